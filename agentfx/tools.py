"""What an agent sees: one tool view and one reply, the same for every adapter.

This layer owns the two mappings every protocol needs: from a bound runtime to
the tools it lists (:func:`tool_views` -> :class:`ToolView`) and from a
dispatch outcome to what the agent is answered (:func:`reply`,
:func:`defect_reply` -> :class:`ToolReply`). MCP, A2A and the agent framework
toolsets all list and answer through it, so a model reading only text learns
what a structured client learns, whichever way it connects.

It is protocol-neutral core: it imports no adapter and no optional
dependency, and deliberately knows nothing of any wire's spelling (MCP's
``isError``, A2A's task states, a framework's retry exception). Adapters shape
a :class:`ToolView` and a :class:`ToolReply` into their own types and keep only
their protocol's rules (MCP answers an unknown tool with a protocol error, for
one).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import msgspec
from returns.io import IOFailure, IOResult, IOSuccess
from returns.result import Failure, Result, Success
from returns.unsafe import unsafe_perform_io

from .docs import MessageDescriptor, summarize
from .errors import AgentInvalidInputError, is_failure
from .hints import Hints
from .pipeline import DispatchResult
from .schema import set_free

if TYPE_CHECKING:
    from .errors import AgentResourceError, DispatchError
    from .runtime import AgentRuntime

__all__ = ["ToolReply", "ToolView", "defect_reply", "reply", "tool_views"]

_logger = logging.getLogger("agentfx.tools")

# The ``_tag`` of a defect reply's data: the audit's outcome name for a call that failed unexpectedly.
_DEFECT_TAG = "AgentDefect"


class ToolView(msgspec.Struct, frozen=True):
    """One capability as a tool, in the words every protocol lists it with.

    Attributes:
        name: The capability name (the tool name).
        title: A short human-readable name, or ``None`` when not declared.
        description: What the capability does, for the agent.
        input_schema: The closed JSON Schema of the payload.
        output_schema: The JSON Schema of :attr:`ToolReply.data` for a
            successful call (an inlined ``type: object`` root).
        hints: What the capability says about its effect, or ``None``.

    The schemas are the view's own copies: an adapter may change them.
    """

    name: str
    title: str | None
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    hints: Hints | None


class ToolReply(msgspec.Struct, frozen=True):
    """What an agent is answered for one call.

    Attributes:
        ok: ``False`` for a refusal, a declared failure Message, a timeout, a
            cancellation or a defect.
        text: What a model reading only text needs: the same facts as ``data``.
        data: JSON-ready builtins; what MCP calls structured content. For a
            successful dispatch it matches the capability's output schema;
            for a refusal it is the encoded failure (``_tag`` and its fields).
    """

    ok: bool
    text: str
    data: dict[str, Any]


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    # Descriptors are shared by every listing; some frameworks rewrite the
    # schema they are given in place, so each view gets its own.
    copied: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(schema))
    return copied


def _view(descriptor: MessageDescriptor) -> ToolView:
    return ToolView(
        name=descriptor.name,
        title=descriptor.title,
        description=descriptor.description,
        input_schema=_copy(descriptor.input_schema),
        output_schema=_copy(descriptor.output_schema),
        hints=descriptor.hints,
    )


def tool_views(runtime: AgentRuntime[Any, Any], *, available_only: bool = True) -> list[ToolView]:
    """The runtime's capabilities as tools, in declaration order.

    Args:
        runtime: A bound runtime.
        available_only: List only what ``available`` offers in the current
            Model (read once); ``False`` lists the whole contract without
            reading the Model.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app", title="Ping"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> [(view.name, view.title) for view in tool_views(runtime)]
    [('ping', 'Ping')]
    """
    descriptors = runtime.messages.available() if available_only else runtime.messages.list()
    return [_view(descriptor) for descriptor in descriptors]


def defect_reply(capability: str) -> ToolReply:
    """The reply to a call that failed because a hook or the host raised.

    Only the capability's name is reported: the exception, its text and its
    traceback stay with the application.

    >>> defect_reply("create_todo")
    ToolReply(ok=False, text='Capability "create_todo" failed unexpectedly', data={'_tag': 'AgentDefect', 'capability': 'create_todo', 'message': 'Capability "create_todo" failed unexpectedly'})
    """
    message = f'Capability "{capability}" failed unexpectedly'
    return ToolReply(ok=False, text=message, data={"_tag": _DEFECT_TAG, "capability": capability, "message": message})


def reply(
    outcome: IOResult[DispatchResult, DispatchError]
    | Result[DispatchResult, DispatchError]
    | DispatchResult
    | DispatchError
    | AgentResourceError,
) -> ToolReply:
    """The reply to one finished call: what the agent reads, and the same as data.

    A dispatch that reached update: ``text`` is :func:`agentfx.summarize`'s
    line and ``data`` names the capability, its tag and, with a completion
    contract, how it settled (``completion.status``) and the settling Message
    (``completion.message``, encoded). When ``data`` carries that Message the
    text goes on, after a newline, with ``data`` as compact JSON, so a model
    that reads only text learns the new todo's id too. The dispatched Message
    itself is never returned: ``to_message`` may have built it from Model state
    the contract does not expose. A declared failure Message is not ``ok``.

    A refusal (any failure value): ``text`` is its message, ``data`` the
    failure exactly as ``msgspec.json.encode`` writes it; invalid input adds
    what to fix: ``Invalid input for "<c>": "title" is required``.

    Args:
        outcome: What ``runtime.messages.dispatch`` gave (an ``IOResult``), a
            ``Result``, a :class:`~agentfx.DispatchResult` or a failure value.

    >>> import msgspec, agentfx
    >>> from agentfx.completion import CompletionOutcome
    >>> class Created(msgspec.Struct, tag=True):
    ...     id: str
    >>> done = agentfx.DispatchResult("create", "Create", None, agentfx.Invocation(id="1"),
    ...                               CompletionOutcome("completed", Created("todo-3")))
    >>> print(reply(done).text)
    Completed: Created
    {"capability":"create","tag":"Create","completion":{"status":"completed","message":{"type":"Created","id":"todo-3"}}}
    >>> refused = agentfx.AgentInvalidInputError.of("create", "Create", "$", problem='"title" is required')
    >>> reply(refused).text
    'Invalid input for "create": "title" is required'
    """
    value: object = outcome
    if isinstance(value, IOSuccess | IOFailure):
        io: IOResult[Any, Any] = value
        value = unsafe_perform_io(io.unwrap() if isinstance(io, IOSuccess) else io.failure())
    elif isinstance(value, Success | Failure):
        result: Result[Any, Any] = value
        value = result.unwrap() if isinstance(result, Success) else result.failure()
    if isinstance(value, DispatchResult):
        return _success(value)
    if is_failure(value):
        return _refusal(value)
    raise TypeError(f"reply() takes a dispatch outcome, got {type(value).__name__}")


def _success(result: DispatchResult) -> ToolReply:
    summary = summarize(result)
    data: dict[str, Any] = {"capability": result.name, "tag": result.tag}
    outcome = result.completion
    if outcome is None:
        return ToolReply(ok=summary.ok, text=summary.text, data=data)
    completion: dict[str, Any] = {"status": outcome.status}
    data["completion"] = completion
    if outcome.message is None:
        return ToolReply(ok=summary.ok, text=summary.text, data=data)
    message: object = outcome.message
    try:
        # msgspec checks no field of a Struct when it is built, so a Message
        # holding what its type refuses (an int where a str is declared) is
        # read back as its type reads it: a client checks the reply against the
        # output schema, and would raise on a call whose Message was sent.
        msgspec.convert(msgspec.to_builtins(message), type(message))
        # Through JSON, not to_builtins: a tuple must arrive as the array its
        # schema promises, and a mapping's keys as strings. A set in order,
        # not msgspec's hash order: every process answers alike.
        try:
            encoded = msgspec.json.encode(message, order="deterministic")
        except TypeError:
            # Items (or keys) of types that do not compare: by their own encoding.
            encoded = msgspec.json.encode(set_free(message))
        completion["message"] = msgspec.json.decode(encoded)
        text = summary.text + "\n" + msgspec.json.encode(data).decode()
    except (TypeError, ValueError, OverflowError, RecursionError):
        # The application's Message does not encode, or does not hold what its
        # type declares: its bug, reported like any defect, without the
        # Message's contents (a ValidationError is a ValueError).
        _logger.exception("the completion Message of %r could not be encoded", result.name)
        return defect_reply(result.name)
    return ToolReply(ok=summary.ok, text=text, data=data)


def _refusal(error: object) -> ToolReply:
    data: dict[str, Any] = msgspec.to_builtins(error)
    text: str = data["message"]
    if isinstance(error, AgentInvalidInputError) and error.problem:
        text = f"{text}: {error.problem}"
    return ToolReply(ok=False, text=text, data=data)
