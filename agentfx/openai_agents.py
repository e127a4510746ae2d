"""agentfx capabilities as OpenAI Agents SDK function tools.

Install with ``pip install 'agentfx[openai-agents]'``. :func:`function_tools`
builds one ``FunctionTool`` per capability of the contract; give them to an
``Agent(tools=...)`` and run it with ``Runner.run``. Every call is dispatched
through the runtime as ``Invocation(transport="openai-agents")``.

The SDK's traps, and how the tools avoid them:

- An exception raised by a hand-built ``FunctionTool`` aborts the whole run,
  so ``on_invoke_tool`` never raises an ``Exception``: a refusal is answered
  with the reply text (invalid input says what to fix), and a defect (a hook
  or the host raised) is logged here and answered
  ``Capability "<name>" failed unexpectedly``. No exception text reaches the model.
- The SDK takes a raw JSON Schema verbatim and validates nothing against it:
  the arguments go to the runtime as the model wrote them, and its strict
  decoding is the one check. Arguments that are not JSON (a trailing comma,
  ``NaN``) reach it as a stand-in that is not text, refused ``the input must
  be an object``: the raw text is never dispatched nor audited, where a
  ``redact`` key could not hide what it holds. A ``"\\ud800"`` escape (a lone
  surrogate) would be refused ``"<field>" must be valid Unicode``, but the
  runner itself raises ``UnicodeEncodeError`` on one before any tool runs (it
  fingerprints every call's arguments as UTF-8); nothing is sent. So does
  ``RecursionError`` on arguments nested some 900 levels deep, from the same
  fingerprinting: a run whose model is not trusted belongs in a ``try`` that
  takes both as the model's failure. The schema
  is passed with ``strict_json_schema=False``: the SDK's strict mode would
  rewrite it (every field required), and the model would be told a different
  contract than the runtime enforces.
- ``is_enabled`` reads the Model at every turn, so the model is offered only
  what is available now. Each tool asks only its own capability's
  ``available`` (the SDK asks every tool), and a hook that raises hides its
  tool, logged here with its traceback, instead of ending the run with the
  exception. A call to a tool that was hidden is the SDK's own
  affair: it aborts the run unless ``RunConfig(tool_not_found_behavior=
  "return_error_to_model")``, which answers the model ``Tool '<name>' not found.``
  (also what a call approved after its capability went away gets). A tool
  that was offered but stopped being available before the call ran is
  answered by the runtime (``Capability "<name>" is not available right
  now``): the SDK checks ``is_enabled`` again just before running the calls
  and would end the run on a tool disabled in between, so a tool offered in
  a turn stays enabled until that turn's calls run, and the next turn reads
  the Model afresh: a tool a call made unavailable (its own or any other
  tool's) is hidden there, never offered stale (see ``_Offers``).
- ``needs_approval`` must be decided before the call, but only ``authorize``
  can say whether this call asks a person, so every capability that declares
  ``authorize`` needs approval. The run then stops with an interruption;
  ``state.approve(item)`` and running again dispatches that call, its
  ``Confirm`` answer approved and nothing else (``authorize`` refusing still
  refuses). The SDK asks before ``authorize`` runs, so the person approves
  the tool call on the Model as it was when the run stopped, not the
  ``Confirm`` prompt, and that is all the approval covers: when the approved
  call is built from another Model (another todo was selected, say), nothing
  is sent and the model is answered ``"<name>" needs a person to confirm:
  <prompt>`` in the new words, so that a new call asks the person again.
  That is the Model the call reads once as it starts, which ``authorize``
  and ``to_message`` see, not the live one: a Model that comes back to what
  the person saw while ``authorize`` is pending does not let through a call
  built from another, and one that moves on meanwhile does not retarget a
  call built from the right one. The tools remember the Model each person
  was asked on themselves (bounded, in memory): resume a run
  with the same tool list that stopped it. Two runs that stop on one call id
  (a provider that numbers the calls of each response) over different Models
  leave neither approval a Model it covers: both are asked again. An
  approval resumed anywhere else
  (another process, a rebuilt list) is answered the same way, and so is one
  of a call whose arguments the SDK could not read as a JSON object (blank
  ones: the SDK then stops for a person without asking the tool, so the
  Model is not known). A decision is
  read under the name the call was made by, so a tool inside the SDK's
  ``tool_namespace`` is approved as ``<namespace>.<name>``.
  ``state.approve(item, always_approve=True)`` is the person's approval of
  every call of that tool for the rest of that run (wherever it resumes),
  and the SDK then asks about none of them: each is dispatched confirmed
  (audited ``confirmed: true``) on whatever Model it is built from and
  whatever its ``Confirm`` would ask; ``authorize`` refusing still refuses,
  and another run asks again. Offer "always" only where a person means exactly that. Set a tool's
  ``needs_approval`` to ``False`` when its ``authorize`` never asks a person;
  one that does is then answered ``"<name>" needs a person to confirm:
  <prompt>`` and nothing is sent.
- A capability name may have up to 128 characters, but the OpenAI API takes
  function names of at most 64: :func:`function_tools` refuses a longer one
  with a ``ContractError`` naming it, before any request is sent.

What the model sees (tool list, reply text) is decided once, in
:mod:`agentfx.tools`; this module only translates it. It deliberately knows
nothing of the pipeline's steps or of audit internals, and nothing in
agentfx's core imports it.
"""

from __future__ import annotations

import logging
import secrets
import weakref
from typing import Any, NamedTuple

import msgspec

from ._approval import Remembered, asked_again
from ._toolcall import call_invocation_id, check_runtime, json_arguments, missing_framework, offered, run_call

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext
except ImportError as missing:  # pragma: no cover - exercised in a subprocess by the tests
    missing_framework(
        missing,
        adapter="agentfx.openai_agents",
        needs="the OpenAI Agents SDK",
        extra="openai-agents",
        packages=frozenset({"agents"}),
    )

from .contract import Capability
from .docs import MessageDescriptor
from .confirm import ConfirmationRequest
from .errors import ContractError
from .invocation import Invocation
from .runtime import AgentRuntime
from .tools import ToolView, reply, tool_views

__all__ = ("TRANSPORT", "function_tools")

TRANSPORT = "openai-agents"
"""The ``Invocation.transport`` of every call these tools make, as the audit records it."""

_MAX_NAME_LENGTH = 64
"""The longest function name the OpenAI API takes (``^[a-zA-Z0-9_-]{1,64}$``); agentfx names may have 128 characters."""

_logger = logging.getLogger(__name__)


def function_tools(runtime: AgentRuntime[Any, Any]) -> list[FunctionTool]:
    """One ``FunctionTool`` per capability of the contract, in declaration order.

    Every capability is built, available or not: ``is_enabled`` decides per
    turn, so the list can be built once and kept on the ``Agent``.

    Raises:
        ContractError: ``runtime`` is not a bound runtime, or a capability's
            name is longer than the 64 characters the OpenAI API takes for a
            function name.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> [(tool.name, tool.description, tool.needs_approval) for tool in function_tools(runtime)]
    [('ping', 'Ping the app', False)]
    """
    check_runtime(runtime, "function_tools(runtime)")
    views = tool_views(runtime, available_only=False)
    for view in views:
        if len(view.name) > _MAX_NAME_LENGTH:
            # agentfx names may be twice as long; the API would refuse the request only once the model is called.
            raise ContractError(
                f'function_tools(runtime): capability "{view.name}" has a name of {len(view.name)} characters, '
                f"and OpenAI function names are at most {_MAX_NAME_LENGTH}: give it a shorter name"
            )
    return [
        _tool(runtime, capability, view, descriptor)
        for capability, view, descriptor in zip(
            runtime.definition.capabilities, views, runtime.messages.list(), strict=True
        )
    ]


def _tool(
    runtime: AgentRuntime[Any, Any], capability: Capability[Any, Any], view: ToolView, descriptor: MessageDescriptor
) -> FunctionTool:
    name = view.name
    offers = _Offers()
    own = (capability,)

    def is_enabled(ctx: RunContextWrapper[Any], _agent: Any) -> bool:
        # The SDK asks every tool in turn: each evaluates its own hook, against
        # one Model read, so a turn costs one hook call per capability.
        [available] = offered(runtime, own, _logger)
        return offers.enabled(ctx, available)

    # The Model each call needing approval was read on when the SDK stopped
    # for a person, by call id (in a 1-tuple: a Model may be None), and how
    # many stops on that id are still to be resumed.
    asked = Remembered[str, _Asked](_MAX_ASKED)

    async def needs_approval(_ctx: RunContextWrapper[Any], _params: dict[str, Any], call_id: str) -> bool:
        # The person is asked about the call on the Model as it is now: keep it,
        # so that their "yes" covers this Model and not whatever it has become.
        try:
            model = runtime.host.model()
        except Exception:
            # The call itself will find it out, as a defect; nothing is approved against it.
            _logger.exception("reading the Model failed; the approval of %r will be asked again", call_id[:128])
            return True
        before = asked.pop(call_id)
        # A call id is the model's text, and two runs of these tools may stop on
        # the same one (a provider that numbers the calls of each response): one
        # person's "yes" must never be checked against the Model another was
        # asked on, so such an id covers no Model, and every approval of it asks
        # again, until no stop on it is left to resume (the SDK gives a tool
        # nothing that tells one run's resumed checkpoint from another's).
        if before is None:
            asked.remember(call_id, _Asked((model,), 1))
        else:
            seen = before.seen if _same(model, before.seen[0]) else _TWO_MODELS
            asked.remember(call_id, _Asked(seen, before.pending + 1))
        return True

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> str:
        invocation = Invocation(id=call_invocation_id(ctx.tool_call_id), transport=TRANSPORT)
        approval: _Approval | None = None
        if _approval(ctx, ctx.tool_call_id) is True:
            entry = asked.pop(ctx.tool_call_id)
            seen = None if entry is None or entry.seen is _TWO_MODELS else entry.seen
            if entry is not None and entry.pending > 1:
                # Other stops on this id are still to be resumed: what they were asked on stays.
                asked.remember(ctx.tool_call_id, _Asked(entry.seen, entry.pending - 1))
            if _approval(ctx, _NO_CALL) is True:
                # "Always approve": the person allowed every call of this tool for
                # the rest of this run, whatever it would do, so the SDK asks about
                # none of them and nothing records a Model they were asked on.
                # That decision is the confirmation.
                invocation = msgspec.structs.replace(invocation, confirmed=True)
            else:
                # Approval is per call, and covers the Model the person was asked on: a
                # call that reached the tool after a person approved it is confirmed
                # when it is built from that Model; the same tool called again is
                # asked about again.
                approval = _Approval(seen)
                invocation = msgspec.structs.replace(invocation, confirm=approval.answer)
        payload = json_arguments(arguments)
        if approval is not None:
            # The pipeline reads its one snapshot (steps 3-9) as soon as the call
            # starts, before anything can wait: nothing awaits between this read
            # and that one, so this is the Model authorize and to_message see,
            # whatever the live Model has become by the time a person is asked.
            approval.read(runtime)
        # Never raises: an exception from a hand-built FunctionTool would abort the run.
        answer, failure = await run_call(runtime, name, payload, invocation, _logger)
        if approval is not None and approval.changed is not None:
            # The Model moved on while the person decided: this approval does not
            # cover what the call would now do. The model is told what to ask for.
            again = asked_again(approval.changed, failure)
            if again is not failure and again is not None:
                return reply(again).text
        return answer.text

    return FunctionTool(
        name=name,
        description=view.description,
        params_json_schema=view.input_schema,
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=False,
        is_enabled=is_enabled,
        # ``may_confirm`` only documents it: an undeclared Confirm still works, so
        # every authorize may ask a person, and only an approved call is confirmed.
        needs_approval=needs_approval if descriptor.requires_authorization else False,
    )


_MAX_ASKED = 4096
"""How many calls waiting for a person one tool remembers the Model of."""


class _Asked(NamedTuple):
    """What a tool remembers of a call id it stopped on: the Model asked on, and the stops not yet resumed."""

    seen: tuple[object]
    pending: int


_TWO_MODELS: tuple[object] = (object(),)
"""What a tool remembers of a call id it stopped on twice, on two different Models: no Model it covers."""


class _Approval:
    """A person's "yes" to one call: it confirms the call only when it is built from the Model they were asked on.

    ``seen`` is that Model (in a 1-tuple: a Model may be ``None``), or
    ``None`` when nobody was asked about this call here (another process,
    another tool list). :meth:`read` takes the Model the call is built from.
    """

    __slots__ = ("changed", "_built", "_seen")

    def __init__(self, seen: tuple[object] | None) -> None:
        self._seen = seen
        self._built: tuple[object] | None = None
        self.changed: str | None = None

    def read(self, runtime: AgentRuntime[Any, Any]) -> None:
        """Read the Model the call is about to be built from: call it just before the call starts."""
        try:
            self._built = (runtime.host.model(),)
        except Exception:
            # The pipeline's own read fails the same way, and answers the call as a defect.
            self._built = None

    async def answer(self, request: ConfirmationRequest) -> bool:
        # The Model the call is built from, not the live one: a Model that moved
        # on and came back while authorize was pending (A, B, A) must not let a
        # call built from B through on a "yes" given on A.
        if self._seen is not None and self._built is not None and _same(self._built[0], self._seen[0]):
            return True
        # Another selection, say: the prompt the person would now be shown may differ.
        self.changed = request.prompt
        return False


def _same(model: object, seen: object) -> bool:
    if model is seen:
        return True
    try:
        return bool(model == seen)
    except Exception:  # a Model without a usable equality: only the very same one is the same
        return False


def _approval(ctx: ToolContext[Any], call_id: str) -> bool | None:
    """The person's decision on the call ``call_id`` of this tool: ``True``, ``False``, or ``None`` when nobody decided.

    The SDK records a decision under the name the call was made by: within a
    ``tool_namespace`` that is the qualified name (``todo.delete_selected_todo``).
    Asked about :data:`_NO_CALL`, it says whether the tool was approved for
    every call (``state.approve(item, always_approve=True)``): only such a
    decision covers a call nobody made.
    """
    qualified = getattr(ctx, "qualified_tool_name", None)
    if isinstance(qualified, str) and qualified != ctx.tool_name:
        decided = ctx.is_tool_approved(qualified, call_id)
        if decided is not None:
            return decided
    return ctx.is_tool_approved(ctx.tool_name, call_id)


_NO_CALL = f"agentfx-no-call-{secrets.token_hex(16)}"
"""A call id no model call has (random per process): a per-call decision never names it."""


class _Offers:
    """Whether one tool was offered to each run in the run's current turn.

    The SDK asks ``is_enabled`` twice a turn: when it lists the turn's tools
    for the model (``Agent.get_all_tools``), and again, once the model has
    answered, just before it runs the calls (every tool, called or not), and
    it ends the whole run when a called tool is disabled by then
    (``ModelBehaviorError``). Both checks of a turn see the same
    ``ctx.turn_input`` list, which the runner replaces at the start of every
    turn, a resumed one included. So a tool offered at a check of this turn
    stays enabled for the rest of it: a Model that changed while the model
    was thinking lets the call reach the runtime, which refuses it as
    unavailable. The first check of the next turn reads the Model afresh, and
    a tool that is no longer available (its own call, or another tool's, made
    it so) is hidden there, never offered stale.
    """

    __slots__ = ("_offered",)

    def __init__(self) -> None:
        # By run (the context's id): the turn checked last, and whether it was offered then.
        self._offered: dict[int, tuple[object, bool]] = {}

    def enabled(self, ctx: RunContextWrapper[Any], available: bool) -> bool:
        key = id(ctx)
        # The list itself, compared by identity: an id could be reused once the runner drops it.
        turn: object = ctx.turn_input
        last = self._offered.get(key)
        if last is None:
            # Forget a run with its context: a long-lived tool list must not grow.
            weakref.finalize(ctx, self._offered.pop, key, None)
        elif last[0] is turn and last[1]:
            return True
        self._offered[key] = (turn, available)
        return available
