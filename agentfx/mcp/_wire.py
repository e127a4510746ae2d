"""How agentfx values look on the MCP wire.

Pure functions from :mod:`agentfx.tools` views and replies, and from resource
descriptors, to the SDK's result models. What an agent is told (the text, the
structured data, what a refusal says) is decided once, in :mod:`agentfx.tools`,
for every adapter; this module keeps only MCP's own spelling of it: a
:class:`~agentfx.ToolView` as a ``Tool`` (``title``, ``ToolAnnotations``,
``outputSchema``), a :class:`~agentfx.ToolReply` as a ``CallToolResult``
(``isError`` when not ok), and the one rule MCP adds: an unknown tool is a
protocol error. It deliberately knows nothing of sessions, transports or how
a dispatch ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mcp_types as types
import msgspec
from mcp.shared.exceptions import MCPError

from ..errors import AgentUnknownCapabilityError, echo
from ..tools import ToolReply, defect_reply, reply

if TYPE_CHECKING:
    from ..docs import ResourceDescriptor
    from ..errors import DispatchError
    from ..pipeline import DispatchResult
    from ..tools import ToolView

__all__ = [
    "CONTEXT_URI",
    "URI_SCHEME",
    "context_resource",
    "defect",
    "failure",
    "resource",
    "resource_contents",
    "resource_name",
    "result",
    "success",
    "tool",
    "unknown_resource",
]

URI_SCHEME = "app://"
"""Every resource agentfx serves lives under this scheme: ``app://<name>``."""

CONTEXT_URI = "app://context"
"""The context projection, when the contract declares one."""

_JSON = "application/json"


def tool(view: ToolView) -> types.Tool:
    """The MCP tool for one capability: name, title, description, both schemas and its hints.

    >>> import agentfx
    >>> from agentfx.tools import ToolView
    >>> view = ToolView("wipe", "Wipe", "Wipe it", {"type": "object"}, {"type": "object"},
    ...                 agentfx.Hints(destructive=True))
    >>> tool(view).annotations
    ToolAnnotations(title=None, read_only_hint=None, destructive_hint=True, idempotent_hint=None, open_world_hint=None)
    """
    hints = view.hints
    annotations = (
        None
        if hints is None
        else types.ToolAnnotations(
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        )
    )
    return types.Tool(
        name=view.name,
        title=view.title,
        description=view.description,
        input_schema=view.input_schema,
        output_schema=view.output_schema,
        annotations=annotations,
    )


def result(answer: ToolReply) -> types.CallToolResult:
    """A reply as a tool result: its text, its data as structured content, ``isError`` when not ok."""
    return types.CallToolResult(
        content=[types.TextContent(text=answer.text)],
        structured_content=answer.data,
        is_error=not answer.ok,
    )


def success(dispatched: DispatchResult) -> types.CallToolResult:
    """A dispatch that reached update; a declared failure Message is an ``isError`` result."""
    return result(reply(dispatched))


def failure(error: DispatchError) -> types.CallToolResult:
    """A refused or interrupted dispatch, as an ``isError`` result the agent can read and act on.

    Raises:
        MCPError: ``-32602`` for an unknown tool: the call named nothing this
            server lists, which MCP treats as a protocol error, not a tool result.
    """
    if isinstance(error, AgentUnknownCapabilityError):
        raise MCPError(code=types.INVALID_PARAMS, message=error.message, data=msgspec.to_builtins(error))
    return result(reply(error))


def defect(capability: str) -> types.CallToolResult:
    """A call that failed because a hook or the host raised: only the capability's name is reported.

    >>> answer = defect("create_todo")
    >>> answer.is_error, answer.structured_content["_tag"]
    (True, 'AgentDefect')
    """
    return result(defect_reply(capability))


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

    The message names the URI as the client sent it, whatever made it unknown,
    bounded like every echo (:func:`agentfx.errors.echo`).

    >>> error = unknown_resource("app://nope").error
    >>> error.code, error.message
    (-32602, 'Cannot read resource "app://nope": no such resource')
    """
    uri = echo(uri)
    message = f'Cannot read resource "{uri}": no such resource'
    return MCPError(code=types.INVALID_PARAMS, message=message, data={"uri": uri})
