"""agentfx capabilities as LangChain tools.

Install with ``pip install 'agentfx[langchain]'``. :func:`structured_tools`
builds one ``StructuredTool`` per capability available in the current Model;
bind them to a chat model (``model.bind_tools(tools)``) and answer each of
its tool calls with ``await tool.ainvoke(tool_call)``. Every call is
dispatched through the runtime as ``Invocation(transport="langchain")``.

- **Availability**: a LangChain tool list is fixed once built, so rebuild it
  for every turn (every model call). A tool kept from an earlier turn still
  works: the runtime answers a call to a capability that is no longer
  available as a refusal.
- **Strict input**: each tool's ``args_schema`` is the contract's JSON Schema,
  given to the model verbatim; LangChain validates nothing against a JSON
  Schema, so the runtime's strict decoding is the one check. The tool call's
  ``args`` reach it whole, as the model sent them: LangChain would otherwise
  spread them as keyword arguments of its own ``_arun``, which takes
  ``config`` and ``run_manager`` for itself (a field of that name would be
  lost, an undeclared one dispatched unseen) and fails on ``self``.
  LangChain itself writes the input as text (``str``) for its callbacks
  before anything runs: ``args`` nested close to Python's recursion limit
  (under a thousand levels, fewer the deeper the caller's own stack) raise
  ``RecursionError`` there, out of ``ainvoke``, with nothing dispatched or
  audited. A loop whose model is not trusted takes it as the model's failure.
- **Refusals** (invalid input says what to fix), a declared failure Message and
  a defect raise ``ToolException`` with the reply text, and the tools are built
  with ``handle_tool_error=True``: the model gets a ``ToolMessage`` with
  ``status="error"`` and that text, and the run goes on. A defect (a hook or the
  host raised) is logged here and answered ``Capability "<name>" failed
  unexpectedly``; no exception text reaches the model.
- **Results**: the tools answer ``content_and_artifact``: the ``ToolMessage``
  content is the reply text (which carries the completion's data) and its
  ``artifact`` the reply's ``data``, for the application, never sent to a model.
- **Confirmation**: a capability whose ``authorize`` answers
  :class:`~agentfx.Confirm` is refused ``"<name>" needs a person to confirm:
  <prompt>`` and nothing is sent, unless the application passes ``confirm=``:
  an ``async (ConfirmationRequest) -> bool`` that asks its user now.

The tools are asynchronous only (``ainvoke``): the runtime is. What the model
sees (tool list, reply text) is decided once, in :mod:`agentfx.tools`; this
module only translates it. It deliberately knows nothing of the pipeline's
steps or of audit internals, and nothing in agentfx's core imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

from ._toolcall import (
    call_invocation_id,
    check_confirm,
    check_runtime,
    missing_framework,
    offered_views,
    run_call,
    tool_metadata,
)

try:
    from langchain_core.messages import ToolCall
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import StructuredTool, ToolException
except ImportError as missing:  # pragma: no cover - exercised in a subprocess by the tests
    missing_framework(
        missing,
        adapter="agentfx.langchain",
        needs="langchain-core",
        extra="langchain",
        packages=frozenset({"langchain_core"}),
    )

from .confirm import Confirmer
from .invocation import Invocation
from .runtime import AgentRuntime
from .tools import ToolView

__all__ = ("TRANSPORT", "structured_tools")

TRANSPORT = "langchain"
"""The ``Invocation.transport`` of every call these tools make, as the audit records it."""

_logger = logging.getLogger(__name__)


def structured_tools(runtime: AgentRuntime[Any, Any], *, confirm: Confirmer | None = None) -> list[StructuredTool]:
    """The capabilities available in the current Model (read once), as LangChain tools. Rebuild per turn.

    A capability whose ``available`` raised is left out (the error is logged
    on this module's logger, with its traceback) and every other one is built
    as usual; when the Model itself cannot be read, no tool is. The exception
    never reaches the caller's loop: one broken hook hides its own tool, not
    the others.

    Args:
        runtime: The bound runtime every call goes through.
        confirm: Asks a person when ``authorize`` answers
            :class:`~agentfx.Confirm`; without it such a call is refused.

    Raises:
        ContractError: ``runtime`` is not a bound runtime, or ``confirm`` is
            neither ``None`` nor callable.

    >>> import asyncio, msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> [ping] = structured_tools(runtime)
    >>> call = {"type": "tool_call", "id": "call_1", "name": "ping", "args": {"loud": True}}
    >>> answer = asyncio.run(ping.ainvoke(call))
    >>> answer.status, answer.content
    ('error', 'Invalid input for "ping": "loud" is not a field of this input')
    """
    check_runtime(runtime, "structured_tools(runtime)")
    check_confirm(confirm, "structured_tools")
    return [_tool(runtime, view, confirm) for view in offered_views(runtime, _logger)]


class _WholeInputTool(StructuredTool):
    """A ``StructuredTool`` whose coroutine gets the tool input whole, then the tool call's id, as positional arguments.

    ``BaseTool.arun`` turns the input into ``self._arun(*args, **kwargs)``
    arguments here; a ``dict`` input becomes keywords, beside the ``config``
    and ``run_manager`` LangChain adds, so the model's keys would share a
    namespace with LangChain's own. Passed whole, whatever its keys, the input
    meets only the runtime's strict decoding. The call id (``None`` when the
    tool is invoked with bare arguments, not a tool call) keeps the audit
    matched with the conversation, as on every framework.

    LangChain reads any ``dict`` whose ``"type"`` is ``"tool_call"`` as a
    ``ToolCall``; bare arguments holding that key would raise ``KeyError``
    (no ``"id"``) or hand the runtime their ``"args"`` under a call id the
    caller chose. Only a ``dict`` shaped as a ``ToolCall`` is read as one here;
    any other is the bare input it is.
    """

    async def ainvoke(
        self, input: str | dict[str, Any] | ToolCall, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        return await super().ainvoke(self._as_input(input), config, **kwargs)

    def invoke(self, input: str | dict[str, Any] | ToolCall, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        # Synchronous calls are refused by StructuredTool (the coroutine is all there is),
        # with its own error, not a KeyError from reading bare arguments as a call.
        return super().invoke(self._as_input(input), config, **kwargs)

    def _as_input(self, input: str | dict[str, Any] | ToolCall) -> str | dict[str, Any] | ToolCall:
        if isinstance(input, dict) and input.get("type") == "tool_call" and not _is_tool_call(input):
            # Wrapped as a call without id: LangChain passes the args on as bare input is passed.
            return ToolCall(name=self.name, args=cast("dict[str, Any]", input), id=None, type="tool_call")
        return input

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        # LangChain annotates the positional arguments as strings (its
        # single-string tools); ``_arun`` passes them on to the coroutine as they are.
        return cast("tuple[str, ...]", (tool_input, tool_call_id)), {}


def _is_tool_call(value: Mapping[str, object]) -> bool:
    """Whether ``value`` has a ``ToolCall``'s fields with their types (LangChain reads it by its ``"type"`` alone)."""
    call_id = value.get("id", 0)  # absent is not None: LangChain would raise KeyError
    named = isinstance(value.get("name"), str)
    return named and isinstance(value.get("args"), dict) and (call_id is None or isinstance(call_id, str))


def _tool(runtime: AgentRuntime[Any, Any], view: ToolView, confirm: Confirmer | None) -> StructuredTool:
    name = view.name

    async def call(arguments: object, call_id: str | None) -> tuple[str, dict[str, Any]]:
        # The tool call's ``args`` exactly as the model sent them, unchecked.
        invocation = Invocation(id=call_invocation_id(call_id), transport=TRANSPORT, confirm=confirm)
        answer, _ = await run_call(runtime, name, arguments, invocation, _logger)
        if not answer.ok:
            raise ToolException(answer.text)
        return answer.text, answer.data

    return _WholeInputTool(
        name=name,
        description=view.description,
        args_schema=view.input_schema,
        coroutine=call,
        response_format="content_and_artifact",
        handle_tool_error=True,
        metadata=tool_metadata(view),
    )
