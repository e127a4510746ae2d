"""Serving a runtime over stdio, answering unreadable lines instead of ignoring them.

This layer owns the stdio transport: the SDK's ``stdio_server`` (which keeps
stray prints off the wire) around the server of :mod:`agentfx.mcp._server`,
plus the one thing the SDK leaves out: a line that is not JSON gets a JSON-RPC
parse error (``-32700``) and a line that is JSON but not a JSON-RPC message an
invalid-request error (``-32600``), so a client never waits on a reply that
will not come. A blank line is no message at all and is skipped. It
deliberately knows nothing of capabilities or dispatch.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .. import __version__
from ._server import server

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream

    from ..runtime import AgentRuntime

__all__ = ["GuardedReadStream", "blank_line", "protocol_error", "serve_stdio"]

_JSON_WHITESPACE = " \t\r\n"


def blank_line(exc: Exception) -> bool:
    """Whether the line that raised ``exc`` held nothing but whitespace (so nobody is waiting on it).

    >>> import mcp_types as types
    >>> def error(line: str) -> Exception:
    ...     try:
    ...         types.jsonrpc_message_adapter.validate_json(line)
    ...     except ValueError as exc:
    ...         return exc
    ...     raise AssertionError(line)
    >>> blank_line(error(" \\r\\n")), blank_line(error("{oops"))
    (True, False)
    """
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if not errors:
        return False
    for error in errors:
        line: object = error.get("input")
        if error["type"] != "json_invalid" or not isinstance(line, str) or line.strip(_JSON_WHITESPACE):
            return False
    return True


def protocol_error(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read as a message.

    The id is the line's own when it is a request whose id can be read, else ``null``.

    >>> import mcp_types as types
    >>> try:
    ...     types.jsonrpc_message_adapter.validate_json("{oops")
    ... except ValueError as exc:
    ...     protocol_error(exc).error.code
    -32700
    """
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        if any(error["type"] == "json_invalid" for error in errors):
            return _error(None, types.PARSE_ERROR, "Parse error")
        return _error(_request_id(errors), types.INVALID_REQUEST, "Invalid Request")
    return _error(None, types.PARSE_ERROR, "Parse error")


def _error(request_id: types.RequestId | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _request_id(errors: Any) -> types.RequestId | None:
    # The union's branches report the offending object itself for a missing
    # field, so the id of a malformed request can be read back from there.
    for error in cast("list[Mapping[str, Any]]", errors):
        candidate: object = error.get("input")
        if isinstance(candidate, Mapping) and "method" in candidate:
            request_id = cast("Mapping[str, object]", candidate).get("id")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                return request_id
    return None


class GuardedReadStream:
    """A read stream that answers unreadable input itself and passes every message on.

    Args:
        inner: The transport's read stream (messages, or the exception a line raised).
        write: The transport's write stream, where the protocol errors go.
    """

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        write: WriteStream[SessionMessage],
    ) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's context of the last message, when the inner stream records one."""
        context: object = getattr(self._inner, "last_context", None)
        return context if isinstance(context, contextvars.Context) else None

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if isinstance(item, SessionMessage):
                return item
            if blank_line(item):
                continue
            await self._write.send(SessionMessage(message=protocol_error(item)))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


async def serve_stdio(runtime: AgentRuntime[Any, Any], *, name: str = "agentfx", version: str = __version__) -> None:
    """Serve the runtime over this process's stdin and stdout until stdin closes.

    While serving, anything the application prints goes to stderr, never onto
    the wire. ``agentfx serve MODULE:ATTR`` does this for an App::

        async with app.run() as runtime:
            await serve_stdio(runtime)

    Args:
        runtime: A bound agentfx runtime.
        name: The server name reported to clients.
        version: The server version reported to clients; agentfx's own by default.
    """
    app = server(runtime, name=name, version=version)
    async with stdio_server() as (read, write):
        await app.run(GuardedReadStream(read, write), write, app.create_initialization_options())
