"""Serving runtimes over Streamable HTTP, one runtime and one principal per session.

This layer owns the HTTP face: the ``/mcp`` endpoint, Origin checks against
DNS rebinding, authentication of every request, and the session table that
binds each MCP session to the principal that opened it and to its runtime:
bound to the one program an :class:`~agentfx.app.App` runs for all sessions,
or whatever ``make_runtime(principal)`` gave it. A request naming a session is
served only when it authenticates as that session's principal; otherwise it is
answered exactly like an unknown session, so a session id never works as a
bearer token for anyone else.

Sessions are what carry a principal and a runtime, so this endpoint speaks
the session-based (2025-11-25 handshake) protocol. A request for the
sessionless 2026-07-28 era is refused with ``-32022`` naming the versions
served, and the SDK's client falls back to the handshake on its own.

It deliberately knows nothing of capabilities, dispatch or audit: each session
runs the server of :mod:`agentfx.mcp._server` over its own runtime.
"""

from __future__ import annotations

import inspect
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

import anyio
import mcp_types as types
from anyio.abc import TaskGroup, TaskStatus
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response

from .. import __version__
from ..app import App
from ._server import server

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ..program import Program
    from ..runtime import AgentRuntime

__all__ = ["Authenticate", "HttpApp", "MakeRuntime", "http_app", "origin_allowed"]

_logger = logging.getLogger("agentfx.mcp.http")

P = TypeVar("P")

MCP_PATH = "/mcp"
"""Where the endpoint is served."""

SESSION_IDLE_TIMEOUT = 30 * 60.0
"""Seconds a session may go without a request before it is closed and its runtime released."""

MAX_SESSIONS = 1000
"""Open sessions at most; a request that would open another is answered 503."""

_LOOPBACK_ORIGINS = (
    "http://127.0.0.1",
    "http://127.0.0.1:*",
    "http://localhost",
    "http://localhost:*",
    "http://[::1]",
    "http://[::1]:*",
)

MakeRuntime = Callable[[P], AbstractAsyncContextManager["AgentRuntime[Any, Any]"]]
"""``make_runtime(principal)``: an async context manager yielding the session's runtime.

It is entered when a session opens and exited when the session ends (closed by
the client, idle, or at shutdown), so whatever it starts lives exactly as long
as the session. Without an ``authenticate`` hook it is called with ``None``.
"""

Authenticate = Callable[[Request], "P | None | Awaitable[P | None]"]
"""``authenticate(request)``: the principal of an HTTP request, or ``None`` to refuse it (401). May be async."""


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request's ``Origin`` may reach the endpoint.

    No ``Origin`` (a non-browser client) is allowed. With nothing listed, the
    loopback origins are (``http://localhost``, ``http://127.0.0.1``,
    ``http://[::1]``, on any port); a non-empty list is exactly the allowed
    set, loopback origins included only when listed. A pattern is an origin,
    exact, or ``scheme://host:*`` for any port.

    >>> origin_allowed(None, ()), origin_allowed("http://localhost:5173", ())
    (True, True)
    >>> origin_allowed("https://evil.example", ()), origin_allowed("https://app.example", ["https://app.example"])
    (False, True)
    >>> origin_allowed("http://localhost:5173", ["https://app.example"])
    False
    """
    if not origin:
        return True
    for pattern in tuple(allowed) or _LOOPBACK_ORIGINS:
        if origin == pattern:
            return True
        if pattern.endswith(":*") and origin.startswith(pattern[:-1]) and origin[len(pattern) - 1 :].isdigit():
            return True
    return False


def _error(
    message: str,
    status: int,
    code: int = types.INVALID_REQUEST,
    data: object = None,
    headers: dict[str, str] | None = None,
) -> Response:
    error = types.ErrorData(code=code, message=message)
    if data is not None:
        error = types.ErrorData(code=code, message=message, data=data)
    body = types.JSONRPCError(jsonrpc="2.0", id=None, error=error)
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


_IDLE = "has not started"
_RUNNING = "is running"
_STOPPED = "has stopped"
_FAILED = "stopped with an error"


@dataclass(eq=False)
class _Session(Generic[P]):
    id: str
    principal: P
    transport: StreamableHTTPServerTransport
    done: anyio.Event = field(default_factory=anyio.Event)


class HttpApp(Generic[P]):
    """The ASGI application :func:`http_app` returns.

    It needs the ASGI lifespan protocol (every ASGI server runs it), or
    :meth:`running` around it: an App's program, and every session with its
    runtime, live from startup to shutdown.

    When an App's program stops with an error (a command raised), the error
    is logged and every request is answered 500 until shutdown: the lifespan
    protocol has no way to stop a server. A server that should exit instead
    runs with its lifespan off inside :meth:`running`, which raises the error
    (``agentfx serve`` does).
    """

    def __init__(
        self,
        make_runtime: App[Any, Any, P] | MakeRuntime[P],
        *,
        authenticate: Authenticate[P] | None,
        allowed_origins: Iterable[str],
        name: str = "agentfx",
        version: str = __version__,
    ) -> None:
        self._served = make_runtime
        self._authenticate = authenticate
        self._allowed_origins = tuple(allowed_origins)
        self._name = name
        self._version = version
        self._sessions: dict[str, _Session[P]] = {}
        self._program: Program[Any, Any] | None = None
        self._task_group: TaskGroup | None = None
        self._state = _IDLE
        self._limited: ASGIApp = RequestBodyLimitMiddleware(self._handle, DEFAULT_MAX_REQUEST_BODY_SIZE)

    @property
    def session_count(self) -> int:
        """Sessions open right now."""
        return len(self._sessions)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._limited(scope, receive, send)
        else:
            # Websocket and anything newer: this endpoint speaks only HTTP.
            return

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None]:
        """Start what the ASGI lifespan starts (an App's program, the sessions' task group), for embedding.

        Whatever stops an App's program (a command that raised) propagates
        out of the block, as from :meth:`agentfx.App.run`; from then on every
        request is answered 500, "the application stopped", until the block
        is entered again. Serving on would only fail every call, so a server
        run around this block should stop when it raises.
        """
        self._state = _IDLE
        try:
            async with AsyncExitStack() as stack:
                served = self._served
                if isinstance(served, App):
                    # Entered first, so it is left last: every session's runtime
                    # is bound to it until that session has ended.
                    app = cast("App[Any, Any, P]", served)
                    self._program = await stack.enter_async_context(app.program())
                try:
                    async with anyio.create_task_group() as task_group:
                        self._task_group = task_group
                        self._state = _RUNNING
                        try:
                            yield
                        except BaseException:
                            # A cancellation here is the program's task group
                            # failing (a command raised) or the server being
                            # torn down; either way nothing is served any more,
                            # not even while the sessions close.
                            self._state = _FAILED
                            raise
                        finally:
                            if self._state == _RUNNING:
                                self._state = _STOPPED
                            await self._close_all()
                            self._task_group = None
                            task_group.cancel_scope.cancel()
                finally:
                    self._program = None
        except Exception:
            self._state = _FAILED
            raise
        except BaseException:
            self._state = _STOPPED
            raise

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        started = False
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                started = True
                while (await receive())["type"] != "lifespan.shutdown":
                    pass
        except Exception:
            if not started:
                raise
            # The lifespan protocol has no way to stop the server, and an
            # exception escaping it is only logged, by some servers as "the
            # protocol appears unsupported": say what happened, answer 500 from
            # now on, and keep the protocol going until the server shuts down.
            _logger.exception("the application stopped with an error; every request is answered 500 until shutdown")
            while (await receive())["type"] != "lifespan.shutdown":
                pass
        await send({"type": "lifespan.shutdown.complete"})

    async def _close_all(self) -> None:
        # Terminating a transport ends its message loop, so each session's
        # runtime is released through its own context manager, not cancelled.
        sessions = list(self._sessions.values())
        with anyio.move_on_after(5, shield=True):
            for session in sessions:
                await session.transport.terminate()
            for session in sessions:
                await session.done.wait()

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if _local_path(scope).rstrip("/") != MCP_PATH:
            await _error("Not Found", 404)(scope, receive, send)
            return
        if not origin_allowed(request.headers.get("origin"), self._allowed_origins):
            await _error("Forbidden: Origin not allowed", 403)(scope, receive, send)
            return
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            supported = list(HANDSHAKE_PROTOCOL_VERSIONS)
            await _error(
                "This endpoint serves the session-based protocol; initialize a session",
                400,
                types.UNSUPPORTED_PROTOCOL_VERSION,
                {"supported": supported, "requested": version},
            )(scope, receive, send)
            return
        if self._state == _FAILED:
            # What stopped it is for the server's log; a client learns only that it did.
            await _error("Internal error: the application stopped", 500, types.INTERNAL_ERROR)(scope, receive, send)
            return
        if self._state != _RUNNING:
            await _error(f"Service Unavailable: the server {self._state}", 503, types.INTERNAL_ERROR)(
                scope, receive, send
            )
            return
        try:
            principal = await self._principal(request)
        except Exception:
            _logger.exception("authenticate raised")
            await _error("Internal error", 500, types.INTERNAL_ERROR)(scope, receive, send)
            return
        if principal is None:
            await _error("Unauthorized", 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        principal = cast("P", principal)
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            await self._open(principal, request, scope, receive, send)
            return
        session = self._sessions.get(session_id)
        if session is None or not _same(session.principal, principal):
            # Indistinguishable from an unknown id, so probing learns nothing.
            await _error("Session not found", 404)(scope, receive, send)
            return
        await session.transport.handle_request(scope, receive, send)
        if session.transport.is_terminated:
            self._sessions.pop(session.id, None)

    async def _principal(self, request: Request) -> object:
        if self._authenticate is None:
            # Without an authenticate hook every caller is the same anonymous
            # principal; a sentinel keeps that distinct from a refusal.
            return _ANONYMOUS
        principal: object = self._authenticate(request)
        if inspect.isawaitable(principal):
            principal = await cast("Awaitable[object]", principal)
        return principal

    async def _open(self, principal: P, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        if request.method != "POST":
            await _error("Bad Request: Missing session ID", 400)(scope, receive, send)
            return
        body = await request.body()
        if not _is_initialize(body):
            await _error("Bad Request: Missing session ID", 400)(scope, receive, send)
            return
        if len(self._sessions) >= MAX_SESSIONS:
            await _error("Too many open sessions", 503, types.INTERNAL_ERROR)(scope, receive, send)
            return
        session_id = uuid.uuid4().hex
        session = _Session(
            id=session_id,
            principal=principal,
            transport=StreamableHTTPServerTransport(mcp_session_id=session_id, idle_timeout=SESSION_IDLE_TIMEOUT),
        )
        task_group = self._task_group
        assert task_group is not None
        try:
            await task_group.start(self._serve, session)
        except Exception:
            _logger.exception("opening a session failed")
            await _error("Internal error", 500, types.INTERNAL_ERROR)(scope, receive, send)
            return
        self._sessions[session.id] = session
        status = await _answer(session.transport.handle_request, scope, _replay(body, receive), send)
        if status is None or status >= 400:
            self._sessions.pop(session.id, None)
            await session.transport.terminate()

    async def _serve(self, session: _Session[P], *, task_status: TaskStatus[None]) -> None:
        try:
            async with self._runtime(session.principal) as runtime:
                app = server(runtime, name=self._name, version=self._version)
                async with session.transport.connect() as (read, write):
                    task_status.started()
                    idle = session.transport.idle_scope or anyio.CancelScope()
                    with idle:
                        await app.run(read, write, app.create_initialization_options())
        except Exception:
            # Once started, a failing session must not take the others down.
            _logger.exception("session %s ended with an error", session.id)
        finally:
            self._sessions.pop(session.id, None)
            session.done.set()
            if not session.transport.is_terminated:
                with anyio.CancelScope(shield=True):
                    await session.transport.terminate()

    def _runtime(self, principal: P) -> AbstractAsyncContextManager[AgentRuntime[Any, Any]]:
        served = self._served
        if not isinstance(served, App):
            return served(_unwrap(principal))
        app = cast("App[Any, Any, P]", served)
        program = self._program
        assert program is not None, "sessions open only while running"
        if principal is _ANONYMOUS:
            return nullcontext(app.bind(program))
        # A constant resolver, so a principal that happens to be callable is
        # not mistaken for one.
        return nullcontext(app.bind(program, principal=lambda _invocation: principal))


def _local_path(scope: Scope) -> str:
    # Mounted under a prefix (Starlette's Mount, a server's --root-path), the
    # ASGI path still starts with that prefix, which root_path names.
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


class _Anonymous:
    def __repr__(self) -> str:
        return "<anonymous>"


_ANONYMOUS: Any = _Anonymous()


def _unwrap(principal: object) -> Any:
    return None if principal is _ANONYMOUS else principal


def _same(a: object, b: object) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


def _is_initialize(body: bytes) -> bool:
    try:
        message: object = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and cast("dict[str, object]", message).get("method") == "initialize"


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    status: int | None = None

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, watch)
    return status


@overload
def http_app(
    make_runtime: App[Any, Any, Any] | MakeRuntime[None],
    *,
    authenticate: None = None,
    allowed_origins: Iterable[str] = (),
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[None]: ...
@overload
def http_app(
    make_runtime: App[Any, Any, P] | MakeRuntime[P],
    *,
    authenticate: Authenticate[P],
    allowed_origins: Iterable[str] = (),
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[P]: ...
def http_app(
    make_runtime: App[Any, Any, Any] | MakeRuntime[Any],
    *,
    authenticate: Authenticate[Any] | None = None,
    allowed_origins: Iterable[str] = (),
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[Any]:
    """An ASGI app serving Streamable HTTP at ``/mcp``, one runtime per session.

    Args:
        make_runtime: What each session is served, one of two kinds:

            - An :class:`agentfx.App`: one shared application. Its program
              starts with the ASGI app and every session binds its own
              runtime to it, so all sessions act on the same Model. A
              session's principal is the one ``authenticate`` returned, or
              the App's own without that hook.
            - ``make_runtime(principal)``, returning an async context manager
              that yields the session's runtime: entered when the session
              opens, exited when it ends. ``lambda principal:
              app.run(principal=principal)`` gives every session its own
              program, so each has a Model of its own. Without
              ``authenticate`` it is called with ``None``, which
              ``app.run(principal=None)`` would take as the principal: write
              ``lambda _: app.run()`` to keep the App's own.
        authenticate: ``authenticate(request)`` (sync or async) returns the
            request's principal, or ``None`` to refuse it with 401. Every
            request is authenticated; one naming a session must authenticate
            as the principal that opened it. Without it every caller is
            anonymous and nothing is checked.
        allowed_origins: The ``Origin`` headers allowed, exact
            (``"https://app.example"``) or with any port
            (``"https://app.example:*"``); requests with any other get 403.
            Empty (the default), loopback origins are allowed; listed, only
            those listed are (add ``"http://localhost:*"`` to keep loopback).
            A request without ``Origin`` is never refused for it.
        name: The server name reported to clients.
        version: The server version reported to clients; agentfx's own by default.

    Serve it with any ASGI server, bound to loopback unless you mean otherwise
    (``uvicorn.run(http_app(app), host="127.0.0.1", port=8000)``), or mount it
    under a prefix of a larger ASGI app (Starlette's ``Mount("/agent", app=...)``
    serves ``/agent/mcp``; run the mounted app's :meth:`HttpApp.running` in the
    outer app's lifespan, since a mount receives none). Non-browser clients
    only for now: CORS preflight requests are not answered, so a browser page
    on another origin cannot call the endpoint.

    >>> import msgspec, agentfx
    >>> from agentfx.app import App
    >>> class Pinged(msgspec.Struct, tag=True):
    ...     pass
    >>> pings = App(agentfx.define(agentfx.expose(Pinged, agentfx.variant(Pinged, "Ping"))), 0, lambda n, _: n + 1)
    >>> asgi = http_app(pings, allowed_origins=["https://app.example"], name="pings")
    >>> asgi.session_count
    0
    """
    return HttpApp(
        make_runtime, authenticate=authenticate, allowed_origins=allowed_origins, name=name, version=version
    )
