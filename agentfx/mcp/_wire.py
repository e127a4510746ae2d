"""How agentfx values look on the MCP wire.

Pure functions from descriptors, dispatch results and failure values to the
SDK's result models, so every mapping rule lives in one place and is tested
without a connection. This module deliberately knows nothing of sessions,
transports or how a dispatch ran: it is handed an outcome and shapes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError

from ..docs import summarize
from ..errors import AgentUnknownCapabilityError

if TYPE_CHECKING:
    from ..docs import MessageDescriptor, ResourceDescriptor
    from ..errors import DispatchError
    from ..pipeline import DispatchResult

__all__ = [
    "CONTEXT_URI",
    "DEFECT_TAG",
    "URI_SCHEME",
    "context_resource",
    "defect",
    "defect_message",
    "failure",
    "resource",
    "resource_contents",
    "resource_name",
    "success",
    "tool",
    "unknown_resource",
]

URI_SCHEME = "app://"
"""Every resource agentfx serves lives under this scheme: ``app://<name>``."""

CONTEXT_URI = "app://context"
"""The context projection, when the contract declares one."""

DEFECT_TAG = "AgentDefect"
"""The ``_tag`` of the structured content of a call that failed unexpectedly (the audit's outcome name)."""

_JSON = "application/json"


def defect_message(capability: str) -> str:
    """The whole of what a caller learns about a defect.

    >>> defect_message("create_todo")
    'Capability "create_todo" failed unexpectedly'
    """
    return f'Capability "{capability}" failed unexpectedly'


def tool(descriptor: MessageDescriptor) -> types.Tool:
    """The MCP tool for one capability: its name, description and input schema."""
    return types.Tool(
        name=descriptor.name,
        description=descriptor.description,
        input_schema=dict(descriptor.input_schema),
    )


def success(result: DispatchResult) -> types.CallToolResult:
    """A dispatch that reached update.

    The text is :func:`agentfx.summarize`'s; the structured content names the
    capability, its Message tag and, when the capability declares one, how the
    completion settled (with the settling Message, encoded). A declared failure
    Message is a successful dispatch but an unsuccessful call, so it is
    reported with ``isError``.
    """
    summary = summarize(result)
    structured: dict[str, Any] = {"capability": result.name, "tag": result.tag}
    outcome = result.completion
    if outcome is not None:
        completion: dict[str, Any] = {"status": outcome.status}
        if outcome.message is not None:
            completion["message"] = msgspec.to_builtins(outcome.message)
        structured["completion"] = completion
    return types.CallToolResult(
        content=[types.TextContent(text=summary.text)],
        structured_content=structured,
        is_error=not summary.ok,
    )


def failure(error: DispatchError) -> types.CallToolResult:
    """A refused or interrupted dispatch, as an ``isError`` result the agent can read and act on.

    The text is the failure's agent-facing message; the structured content is
    the failure Struct exactly as ``msgspec.json.encode`` writes it, so a
    client can decode it back into the same class.

    Raises:
        MCPError: ``-32602`` for an unknown tool: the call named nothing this
            server lists, which MCP treats as a protocol error, not a tool result.
    """
    if isinstance(error, AgentUnknownCapabilityError):
        raise MCPError(code=types.INVALID_PARAMS, message=error.message, data=msgspec.to_builtins(error))
    return types.CallToolResult(
        content=[types.TextContent(text=error.message)],
        structured_content=msgspec.to_builtins(error),
        is_error=True,
    )


def defect(capability: str) -> types.CallToolResult:
    """A call that failed because a hook or the host raised.

    Only the capability's name is reported: the exception, its text and its
    traceback stay on the server.

    >>> result = defect("create_todo")
    >>> result.is_error, result.structured_content["_tag"]
    (True, 'AgentDefect')
    """
    message = defect_message(capability)
    return types.CallToolResult(
        content=[types.TextContent(text=message)],
        structured_content={"_tag": DEFECT_TAG, "capability": capability, "message": message},
        is_error=True,
    )


def resource(descriptor: ResourceDescriptor) -> types.Resource:
    """The MCP resource for one declared resource, at ``app://<name>``."""
    return types.Resource(
        uri=URI_SCHEME + descriptor.name,
        name=descriptor.name,
        description=descriptor.description,
        mime_type=_JSON,
    )


def context_resource() -> types.Resource:
    """The MCP resource for the context projection, at ``app://context``."""
    return types.Resource(
        uri=CONTEXT_URI,
        name="context",
        description="The application state projected for agents",
        mime_type=_JSON,
    )


def resource_name(uri: str) -> str | None:
    """The resource name an ``app://`` URI names, or ``None`` for any other URI.

    >>> resource_name("app://todos"), resource_name("file:///etc/passwd"), resource_name("app://")
    ('todos', None, None)
    """
    if not uri.startswith(URI_SCHEME):
        return None
    name = uri[len(URI_SCHEME) :]
    return name or None


def resource_contents(uri: str, value: object) -> types.ReadResourceResult:
    """A resource read: the encoded value as one JSON text, never cached by the client."""
    text = msgspec.json.encode(value).decode()
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=_JSON, text=text)],
        ttl_ms=0,
        cache_scope="private",
    )


def unknown_resource(uri: str) -> MCPError:
    """The protocol error for a URI that names no resource (``-32602``, as MCP prescribes).

    The message names the URI as the client sent it, whatever made it unknown.

    >>> error = unknown_resource("app://nope").error
    >>> error.code, error.message
    (-32602, 'Cannot read resource "app://nope": no such resource')
    """
    message = f'Cannot read resource "{uri}": no such resource'
    return MCPError(code=types.INVALID_PARAMS, message=message, data={"uri": uri})
