"""agentfx capabilities as Anthropic Messages API tools.

Install with ``pip install 'agentfx[anthropic]'``. Two ways to run them, every
call dispatched through the runtime as ``Invocation(transport="anthropic")``:

- **Your own loop**: send ``tools=tool_params(runtime)`` with each request (it
  lists what is available in the current Model, so build it per request), and
  answer every ``tool_use`` block of the reply with ``await run_tool_use(runtime,
  block)``, a ``tool_result`` block for the next user message. The block may
  be the SDK's ``ToolUseBlock`` or, as a stored transcript holds it, a
  ``ToolUseBlockParam`` mapping. Its ``id`` is the one thing in it that the
  API, not the model, wrote: a block without one (or with one that is not a
  non-empty string) is a mistake in how the block was kept, and is refused
  with a ``ContractError`` before anything is dispatched, since no
  ``tool_result`` could ever be paired with it.
- **The SDK's tool runner**: ``client.beta.messages.tool_runner(...,
  tools=beta_tools(runtime))`` on an ``AsyncAnthropic`` client. The runner
  sends the tool definitions it was given on every request, so it is given
  every capability, and the runtime answers a call to one that is not
  available right now with an ``is_error`` result.

The Messages API takes a raw JSON Schema verbatim and nothing validates the
model's ``input`` against it: the runtime's strict decoding is the one check.
A refusal (invalid input says what to fix), a declared failure Message and a
defect are all ``is_error: true`` results carrying the reply text.

A capability whose ``authorize`` answers :class:`~agentfx.Confirm` is answered
``"<name>" needs a person to confirm: <prompt>`` and nothing is sent, unless
the application passes ``confirm=``: an ``async (ConfirmationRequest) ->
bool`` that asks its user now (``Invocation.confirm``). ``True`` dispatches
the call; ``False`` answers ``Declined: <prompt>``. The tool runner
would send any exception but its ``ToolError`` to the model as the
exception's ``repr``, so these tools raise nothing else; a defect (a hook or
the host raised) is logged here and answered ``Capability "<name>" failed
unexpectedly``.

What the model sees (tool list, reply text) is decided once, in
:mod:`agentfx.tools`; this module only translates it. It deliberately knows
nothing of the pipeline's steps or of audit internals, and nothing in
agentfx's core imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, Protocol, cast

from ._toolcall import call_invocation_id, check_confirm, check_runtime, missing_framework, offered_views, run_call

try:
    from anthropic.lib.tools import BetaAsyncBuiltinFunctionTool, BetaFunctionToolResultType, ToolError
    from anthropic.types import ToolParam, ToolResultBlockParam, ToolUseBlockParam
    from anthropic.types.beta import BetaToolParam
except ImportError as missing:  # pragma: no cover - exercised in a subprocess by the tests
    missing_framework(
        missing,
        adapter="agentfx.anthropic",
        needs="the Anthropic SDK",
        extra="anthropic",
        packages=frozenset({"anthropic"}),
    )

from .confirm import Confirmer
from .errors import ContractError, kind_of
from .invocation import Invocation
from .runtime import AgentRuntime
from .tools import ToolReply, ToolView, tool_views

__all__ = ("AgentfxTool", "TRANSPORT", "ToolUse", "beta_tools", "run_tool_use", "tool_params")

TRANSPORT = "anthropic"
"""The ``Invocation.transport`` of every call these tools make, as the audit records it."""

_logger = logging.getLogger(__name__)


class ToolUse(Protocol):
    """A ``tool_use`` content block: ``anthropic.types.ToolUseBlock`` or its beta twin."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def input(self) -> object: ...


def tool_params(runtime: AgentRuntime[Any, Any]) -> list[ToolParam]:
    """The capabilities available in the current Model (read once), as the ``tools`` of one request.

    A capability whose ``available`` raised is left out (the error is logged
    on this module's logger, with its traceback) and every other one is listed
    as usual; when the Model itself cannot be read, no tool is. The exception
    never reaches the caller's loop: one broken hook hides its own tool, not
    the others. A call the model still makes to a hidden tool is answered by
    :func:`run_tool_use` as usual (as a defect when the hook still raises).

    Raises:
        ContractError: ``runtime`` is not a bound runtime.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> tool_params(runtime)
    [{'name': 'ping', 'description': 'Ping the app', 'input_schema': {'type': 'object', 'properties': {}, 'required': [], 'additionalProperties': False}}]
    """
    check_runtime(runtime, "tool_params(runtime)")
    return [_param(view) for view in offered_views(runtime, _logger)]


def _param(view: ToolView) -> ToolParam:
    return {"name": view.name, "description": view.description, "input_schema": view.input_schema}


async def run_tool_use(
    runtime: AgentRuntime[Any, Any],
    block: ToolUse | ToolUseBlockParam | Mapping[str, object],
    *,
    confirm: Confirmer | None = None,
) -> ToolResultBlockParam:
    """Answer one ``tool_use`` block: dispatch it and return its ``tool_result``.

    Never raises an ``Exception`` for what the model put in the block: a
    block without a name or input is answered as a refusal. Its ``id`` is the
    API's, and the result must repeat it, so a block whose ``id`` is missing,
    not a string or empty is refused before anything is dispatched.

    Args:
        runtime: The bound runtime the call goes through.
        block: The ``tool_use`` block of the model's reply: the SDK's
            ``ToolUseBlock`` (or its beta twin), or a ``ToolUseBlockParam``
            mapping with ``id``, ``name`` and ``input``, as a conversation
            history keeps it.
        confirm: Asks a person when ``authorize`` answers
            :class:`~agentfx.Confirm`; without it such a call is refused.

    Raises:
        ContractError: ``runtime`` is not a bound runtime, ``confirm`` is
            neither ``None`` nor callable, or the block has no ``id`` that a
            ``tool_result`` could name (mistakes in the application's code or
            in how it kept the block, not the model's). Nothing is dispatched
            or audited.

    >>> import anyio, msgspec, agentfx
    >>> from anthropic.types import ToolUseBlock
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> block = ToolUseBlock(type="tool_use", id="toolu_1", name="ping", input={"loud": True})
    >>> anyio.run(run_tool_use, runtime, block)
    {'type': 'tool_result', 'tool_use_id': 'toolu_1', 'content': 'Invalid input for "ping": "loud" is not a field of this input', 'is_error': True}
    >>> anyio.run(run_tool_use, runtime, {"type": "tool_use", "id": "toolu_2", "name": "ping", "input": {}})
    {'type': 'tool_result', 'tool_use_id': 'toolu_2', 'content': 'Dispatched Ping'}
    >>> anyio.run(run_tool_use, runtime, {"type": "tool_use", "name": "ping", "input": {}})
    Traceback (most recent call last):
    agentfx.ContractError: run_tool_use(block): the tool_use block has no "id", so no tool_result can answer it and nothing was dispatched: pass the block as the Messages API sent it, its "id" a non-empty str
    """
    check_runtime(runtime, "run_tool_use(runtime, block)")
    check_confirm(confirm, "run_tool_use")
    if isinstance(block, Mapping):
        fields = cast("Mapping[str, object]", block)
        call_id, name, payload = fields.get("id", _ABSENT), fields.get("name"), fields.get("input")
    else:
        # Read leniently: an object missing a field is answered, never an AttributeError.
        call_id = getattr(block, "id", _ABSENT)
        name, payload = getattr(block, "name", None), getattr(block, "input", None)
    # Checked before dispatch: a call the caller cannot answer must not have happened.
    tool_use_id = _tool_use_id(call_id)
    answer = await _dispatch(runtime, cast("str", name), payload, tool_use_id, confirm)
    # The id is the conversation's own, sent back as it came so the API pairs the result with its call.
    result: ToolResultBlockParam = {"type": "tool_result", "tool_use_id": tool_use_id, "content": answer.text}
    if not answer.ok:
        result["is_error"] = True
    return result


_ABSENT: Final = object()
"""Stands in for a block's ``id`` that is not there at all, as distinct from one that is ``None``."""


def _tool_use_id(call_id: object) -> str:
    """The block's ``id`` as its ``tool_result`` must repeat it; a :class:`~agentfx.ContractError` when there is none.

    The Messages API gives every ``tool_use`` block a non-empty string id and
    refuses a ``tool_result`` that does not name one, so a block without it
    was built or kept wrongly by the application. It is kept whole (not cut
    like an echo): the result pairs with its call only by the exact id.
    """
    if isinstance(call_id, str) and call_id:
        return call_id
    if call_id is _ABSENT:
        problem = 'has no "id"'
    elif call_id is None:
        problem = 'has None for its "id"'
    elif isinstance(call_id, str):
        problem = 'has an empty "id"'
    else:
        # Its kind, never its value: whatever the transcript held stays out of the message.
        problem = f'has {kind_of(call_id)} for its "id"'
    raise ContractError(
        f"run_tool_use(block): the tool_use block {problem}, so no tool_result can answer it and nothing was "
        'dispatched: pass the block as the Messages API sent it, its "id" a non-empty str'
    )


class AgentfxTool(BetaAsyncBuiltinFunctionTool):
    """One capability as a tool for ``AsyncAnthropic``'s ``client.beta.messages.tool_runner``.

    Build them with :func:`beta_tools`. A refusal, a declared failure and a
    defect raise ``ToolError`` with the reply text, which the runner sends as
    an ``is_error`` result; nothing else is ever raised.
    """

    def __init__(self, runtime: AgentRuntime[Any, Any], view: ToolView, confirm: Confirmer | None = None) -> None:
        check_runtime(runtime, "AgentfxTool(runtime, view)")
        check_confirm(confirm, "AgentfxTool")
        self._runtime = runtime
        self._confirm = confirm
        self._definition: BetaToolParam = {
            "name": view.name,
            "description": view.description,
            "input_schema": view.input_schema,
        }

    def to_dict(self) -> BetaToolParam:
        return self._definition

    async def call(self, input: object) -> BetaFunctionToolResultType:
        # The runner hands over the input, not the block, so the call id is ours alone.
        answer = await _dispatch(self._runtime, self._definition["name"], input, None, self._confirm)
        if not answer.ok:
            raise ToolError(answer.text)
        return answer.text


def beta_tools(runtime: AgentRuntime[Any, Any], *, confirm: Confirmer | None = None) -> list[AgentfxTool]:
    """Every capability of the contract, for ``AsyncAnthropic``'s tool runner, in declaration order.

    ``confirm`` asks a person when ``authorize`` answers
    :class:`~agentfx.Confirm`, as for :func:`run_tool_use`.

    Raises:
        ContractError: ``runtime`` is not a bound runtime, or ``confirm`` is
            neither ``None`` nor callable.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> [tool.name for tool in beta_tools(runtime)]
    ['ping']
    """
    check_runtime(runtime, "beta_tools(runtime)")
    check_confirm(confirm, "beta_tools")
    return [AgentfxTool(runtime, view, confirm) for view in tool_views(runtime, available_only=False)]


async def _dispatch(
    runtime: AgentRuntime[Any, Any], name: str, payload: object, call_id: object, confirm: Confirmer | None
) -> ToolReply:
    """The reply to one call; never raises an ``Exception`` (the runner would send its ``repr``)."""
    invocation = Invocation(id=call_invocation_id(call_id), transport=TRANSPORT, confirm=confirm)
    answer, _ = await run_call(runtime, name, payload, invocation, _logger)
    return answer
