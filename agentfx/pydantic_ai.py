"""agentfx capabilities as a pydantic-ai toolset.

Install with ``pip install 'agentfx[pydantic-ai]'``. :class:`AgentfxToolset`
is a pydantic-ai ``AbstractToolset``: add it to an ``Agent`` and the model is
offered, at every run step, exactly the capabilities available in the current
Model, each call dispatched through the runtime as
``Invocation(transport="pydantic-ai")``.

pydantic-ai takes a raw JSON Schema verbatim but does not validate arguments
against it, so the toolset accepts whatever the model sent and lets the
runtime decode it strictly. Its arguments validator only reads JSON text, as
every adapter does (:func:`agentfx._toolcall.json_arguments`): arguments that
are not JSON reach the runtime as a stand-in it refuses like any other invalid
input (``the input must be an object``), audited, instead of pydantic-core's
decoder text and the raw arguments going back to the model. JSON that is not
an object (``null``, ``[1]``) reaches the runtime as it was sent and is
refused in the same words; pydantic-ai itself is only ever handed a ``dict``
(it ends the run on ``null``). The outcome is carried over in pydantic-ai's
own terms:

- a success returns the reply text (which carries the completion's data), with
  the reply's ``data`` as the ``ToolReturn`` metadata the application can read
  and the model never sees;
- invalid input raises ``ModelRetry`` with the reply text (what to fix), which
  pydantic-ai counts against the tool's ``max_retries``;
- every other refusal, and a declared failure Message, raises ``ToolFailed``
  with the reply text: the model sees a failed tool result, and the refusal is
  *not* counted as a retry (the model did nothing wrong by calling a tool that
  stopped being available, or that its principal may not call);
- a capability whose ``authorize`` answers :class:`~agentfx.Confirm` raises
  ``ApprovalRequired`` with the prompt in its metadata: the run ends with a
  ``DeferredToolRequests`` output (give the agent ``output_type=[str,
  DeferredToolRequests]``; see :class:`AgentfxToolset` for an agent without
  it), and running again with ``DeferredToolResults(approvals={call_id:
  True})`` re-runs the same call on the Model as it is then. The approval
  covers the prompt the person was shown and nothing else: the call is
  dispatched only while ``authorize`` still asks exactly that; when it asks
  something else now (another todo was selected meanwhile), nothing is sent
  and the call is deferred again, with the new prompt. The toolset remembers
  each prompt it deferred a call with (bounded, in memory); a toolset that did
  not defer the call (another process, a rebuilt agent) reads it from the
  ``DeferredToolResults.metadata`` the application passes back
  (``metadata=requests.metadata``), and without either asks again. A denial
  (``ToolDenied``) is pydantic-ai's to answer: the call never reaches the
  runtime;
- a defect (a hook or the host raised) is logged here and answered
  ``Capability "<name>" failed unexpectedly``; no exception text reaches the model.

What the model sees (tool list, reply text) is decided once, in
:mod:`agentfx.tools`; this module only translates it. It deliberately knows
nothing of the pipeline's steps or of audit internals, and nothing in
agentfx's core imports it.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, cast

import msgspec

from ._toolcall import (
    call_invocation_id,
    check_runtime,
    json_arguments,
    missing_framework,
    offered,
    run_call,
    tool_metadata,
)

try:
    from pydantic_ai import ApprovalRequired, ModelRetry, RunContext, ToolDefinition, ToolFailed, ToolReturn
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as missing:  # pragma: no cover - exercised in a subprocess by the tests
    missing_framework(
        missing,
        adapter="agentfx.pydantic_ai",
        needs="pydantic-ai",
        extra="pydantic-ai",
        packages=frozenset({"pydantic_ai", "pydantic_core"}),
    )

from ._approval import Approval, Remembered, asked_again, kept
from .errors import AgentConfirmationRequiredError, AgentInvalidInputError, ContractError
from .invocation import Invocation
from .runtime import AgentRuntime
from .tools import ToolView, tool_views

__all__ = ("AgentfxToolset", "TRANSPORT")

TRANSPORT = "pydantic-ai"
"""The ``Invocation.transport`` of every call this toolset makes, as the audit records it."""

_logger = logging.getLogger(__name__)

# What pydantic-core makes of partial arguments while they stream in; never dispatched.
_PARTIAL = SchemaValidator(core_schema.any_schema())


class _NotAnObject(dict[str, Any]):
    """The validated arguments of a call whose arguments are not a JSON object: empty, and told apart by type.

    A dict, as pydantic-ai expects validated arguments to be (it ends the run
    on anything else, ``None`` included); a model cannot make one, so
    :meth:`AgentfxToolset.call_tool` hands the runtime what was sent instead:
    the value itself (``None``, a list, a number), or
    :data:`~agentfx._toolcall.UNREADABLE` for text that is not JSON. The
    runtime refuses either as ``the input must be an object``, audited.
    """

    __slots__ = ("sent",)

    def __init__(self, sent: object) -> None:
        super().__init__()
        self.sent = sent


def _validated(arguments: object) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return cast("dict[str, Any]", arguments)
    return _NotAnObject(arguments)


class _Arguments:
    """The arguments validator: pass the arguments through for the runtime to decode strictly.

    pydantic-ai would only check that they are JSON, and answer text that is
    not with pydantic-core's own error, the raw arguments in it; the runtime
    is the one authority on the input, and refuses in agentfx's words.
    """

    def validate_json(
        self,
        input: str | bytes | bytearray,
        *,
        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
        **kwargs: Any,
    ) -> Any:
        if allow_partial not in (False, "off"):
            return _PARTIAL.validate_json(input, allow_partial=allow_partial)
        return _validated(json_arguments(input))

    def validate_python(
        self, input: Any, *, allow_partial: bool | Literal["off", "on", "trailing-strings"] = False, **kwargs: Any
    ) -> Any:
        return _validated(input)


_ARGUMENTS = _Arguments()


class AgentfxToolset(AbstractToolset[Any]):
    """The runtime's available capabilities as pydantic-ai tools, re-read at every run step.

    Args:
        runtime: The bound runtime every call goes through.
        id: The toolset's id, unique among an agent's toolsets (durable
            execution needs one).
        max_retries: How many invalid inputs in a row the model may send to one
            tool before pydantic-ai ends the run (pydantic-ai's ``retries``).

    Raises:
        ContractError: ``runtime`` is not a bound runtime, ``id`` not a string
            or ``None``, or ``max_retries`` not a whole number of at least 0.

    A call a person must confirm is deferred (``ApprovalRequired``), and
    pydantic-ai, not the toolset, decides what a deferral does: the agent needs
    ``DeferredToolRequests`` among its output types, or a
    ``HandleDeferredToolCalls`` capability that answers it inline. Without
    either, pydantic-ai ends the whole run with a ``UserError`` (nothing is
    sent). The toolset cannot tell from the run context which the agent has
    (both are decided per run, outside it), so it always defers.

    >>> import asyncio, msgspec, agentfx
    >>> from pydantic_ai import Agent
    >>> from pydantic_ai.models.test import TestModel
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> agent = Agent(TestModel(), toolsets=[AgentfxToolset(runtime)])
    >>> asyncio.run(agent.run("Ping it")).output
    '{"ping":"Dispatched Ping"}'
    """

    def __init__(self, runtime: AgentRuntime[Any, Any], *, id: str | None = None, max_retries: int = 1) -> None:
        check_runtime(runtime, "AgentfxToolset(runtime)")
        if id is not None and not isinstance(cast(object, id), str):
            raise ContractError(f"AgentfxToolset(id={id!r}): the id is a string, or None")
        retries = cast(object, max_retries)
        # A bool is an int to Python, and pydantic-ai would count against it.
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ContractError(
                f"AgentfxToolset(max_retries={max_retries!r}): the retries are a whole number of at least 0"
            )
        self._runtime = runtime
        self._id = id
        self._max_retries = max_retries
        # The prompt each call was last deferred with: pydantic-ai hands an
        # approved call back with whatever metadata the application passed in
        # DeferredToolResults, not the metadata the call was deferred with.
        # A prompt is remembered as its digest when long: authorize may build it
        # from the model's own arguments, of any length.
        self._asked = Remembered[_Key, str | bytes](_MAX_ASKED)
        # The contract is fixed once bound: only which of these are offered changes.
        self._views = tool_views(runtime, available_only=False)

    @property
    def id(self) -> str | None:
        return self._id

    @property
    def runtime(self) -> AgentRuntime[Any, Any]:
        """The runtime this toolset dispatches through."""
        return self._runtime

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The capabilities available in the current Model (read once), in declaration order.

        A capability whose ``available`` raised is left out of this step's
        tools (the error is logged on this module's logger, with its
        traceback), and every other capability is listed as usual: one broken
        hook hides its own tool, not the agent's others, and a call to the
        hidden tool is pydantic-ai's unknown tool. When the Model itself
        cannot be read, no tool is listed. The exception never reaches
        pydantic-ai, which would end the run with it.
        """
        capabilities = self._runtime.definition.capabilities
        shown = offered(self._runtime, capabilities, _logger)
        return {view.name: self._tool(view) for view, show in zip(self._views, shown, strict=True) if show}

    def _tool(self, view: ToolView) -> ToolsetTool[Any]:
        return ToolsetTool(
            toolset=self,
            tool_def=ToolDefinition(
                name=view.name,
                description=view.description,
                parameters_json_schema=view.input_schema,
                metadata=tool_metadata(view),
            ),
            max_retries=self._max_retries,
            args_validator=_ARGUMENTS,
        )

    async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]) -> Any:
        """Dispatch one call and answer it in pydantic-ai's terms (see the module docstring)."""
        # A fresh id per call, with the model's call id kept visible: a resumed
        # (approved) call reuses its call id, and the audit must tell the two apart.
        invocation = Invocation(id=call_invocation_id(ctx.tool_call_id), transport=TRANSPORT)
        approval: Approval | None = None
        key = (ctx.conversation_id, ctx.tool_call_id, name)
        if ctx.tool_call_approved:
            # The approval covers the prompt the person was shown, and nothing
            # else: the re-run confirms only while authorize still asks exactly that.
            approval = Approval(self._asked.pop(key) or _shown_in(ctx.tool_call_metadata))
            invocation = msgspec.structs.replace(invocation, confirm=approval)
        payload: object = tool_args.sent if isinstance(tool_args, _NotAnObject) else tool_args
        answer, failure = await run_call(self._runtime, name, payload, invocation, _logger)
        if approval is not None:
            # Not what the person approved (the Model moved on meanwhile, or what
            # they were shown is not known here): ask again, in the new words.
            failure = asked_again(approval.changed, failure)
        if isinstance(failure, AgentInvalidInputError):
            raise ModelRetry(answer.text)
        if isinstance(failure, AgentConfirmationRequiredError):
            # Nothing was sent. pydantic-ai ends the run with this call among the
            # DeferredToolRequests' approvals; approving it re-runs the call,
            # which this prompt (and nothing else) then confirms.
            self._asked.remember(key, kept(failure.prompt))
            raise ApprovalRequired(metadata={"prompt": failure.prompt, "capability": failure.capability})
        if not answer.ok:
            raise ToolFailed(answer.text)
        return ToolReturn(return_value=answer.text, metadata=answer.data)


def _shown_in(metadata: object) -> str | None:
    """The prompt an approval's metadata says the person was shown: ``DeferredToolRequests.metadata`` passed back."""
    if isinstance(metadata, dict):
        prompt = cast("dict[str, object]", metadata).get("prompt")
        if isinstance(prompt, str):
            return prompt
    return None


_Key = tuple[str | None, str | None, str]
"""A deferred call: its conversation, its call id and its tool."""


_MAX_ASKED = 4096
"""How many deferred calls' prompts one toolset remembers while they wait for a person."""
