"""Serving runtimes over Streamable HTTP: 2025-11-25 sessions and sessionless 2026-07-28 requests, per principal.

This layer owns the HTTP face: the ``/mcp`` endpoint; the checks every request
passes before anything is dispatched (the SDK's body limit, 4 MiB, and its
``TransportSecuritySettings`` against DNS rebinding and foreign origins, a
readable JSON-RPC envelope, each refusal answered as a JSON-RPC error in
agentfx's own words; authentication bounded by :data:`AUTHENTICATE_TIMEOUT`,
OAuth bearer tokens through :mod:`._auth`); and the binding of every request
to the principal its own credentials prove.

Principals, not connections, own runtimes. Each principal seen is served by
one *tenant*: its runtime (bound to the one program an
:class:`~agentfx.app.App` runs for everyone, or whatever
``make_runtime(principal)`` gave it), the MCP ``Server`` over that runtime,
and the initialization options, built once; the tenant also hosts the task
of that server's change watcher, so a session holds no task group of its own.
A session hears of Model changes only while its GET stream is open (nothing
the server starts can reach it otherwise). A 2025-11-25 session belongs to
the principal that opened it and is served only to requests proving that same
principal; any other is answered exactly like an unknown session, so a
session id never works as a bearer token. A session exists only once its
``initialize`` was answered with a result: a refused handshake names no
session and holds no room under the caps. In a session, a request's id is its
own while the request is in flight: from its POST until the server is done
with it (answered, or settled unanswered once cancelled), even after its
client left. The SDK's transport routes answers by an id's text, so a request
whose id another request of the session still holds (``5``, ``"5"`` and
``"05"`` are one), or whose id is the text the transport keeps for the GET stream, is
answered 400 ``-32600`` with no id, and nothing of it is dispatched. A
2026-07-28 request has no session: it is served by its principal's tenant
alone, so it can never reach another principal's runtime, and
``subscriptions/listen`` streams are per principal.
A tenant lives while a session or a request uses it and
:data:`SESSION_IDLE_TIMEOUT` after.

The era is the request's: an ``MCP-Protocol-Version`` header naming a
sessionless revision is served by the SDK's single-exchange entry, anything
else by the session table here.

It deliberately knows nothing of capabilities, dispatch or audit: each tenant
runs the server of :mod:`agentfx.mcp._server` over its runtime.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, Iterable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

import anyio
import mcp_types as types
import msgspec
import pydantic_core
from anyio.abc import TaskGroup, TaskStatus
from anyio.lowlevel import cancel_shielded_checkpoint
from mcp.server._streamable_http_modern import handle_modern_request
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.request_state import RequestStateSecurity
from mcp.server.runner import serve_loop
from mcp.server.streamable_http import GET_STREAM_KEY, MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    RequestBodyLimitMiddleware,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from .. import __version__
from .._asgi import replay as replay_body
from .._hosts import LOOPBACK_HOSTS, LOOPBACK_ORIGINS
from ..app import App
from ..errors import ContractError
from . import _confirm
from ._auth import BearerTokens, PrincipalFromToken, token_identity
from ._jsonrpc import answer_id, has_id, unreadable_answer
from ._relay import ReadRelay, WriteRelay
from ._server import AgentServer, InFlight, check_identity, check_uris, request_calls, serve_runtime, withhold_sdk_logs

if TYPE_CHECKING:
    from mcp.server.models import InitializationOptions
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from ..program import Program
    from ..runtime import AgentRuntime
    from ._server import Connection

__all__ = [
    "AUTHENTICATE_TIMEOUT",
    "MAX_PRINCIPALS",
    "MAX_SESSIONS",
    "MAX_SESSIONS_PER_PRINCIPAL",
    "SESSION_IDLE_TIMEOUT",
    "Authenticate",
    "HttpApp",
    "MakeRuntime",
    "http_app",
]

_logger = logging.getLogger("agentfx.mcp.http")

P = TypeVar("P")

MCP_PATH = "/mcp"
"""Where the endpoint is served."""

SESSION_IDLE_TIMEOUT = 30 * 60.0
"""Seconds a session, or a principal's runtime, may go unused before it is closed and released.

A session is unused while no request of it is in flight (an open GET stream is
one); a principal's runtime while none of its sessions is open and none of its
sessionless requests (an open ``subscriptions/listen`` stream is one) is in flight.
"""

MAX_SESSIONS = 1000
"""Open sessions at most; a request that would open another is answered 503."""

MAX_SESSIONS_PER_PRINCIPAL = 100
"""Open sessions one principal may hold at most, where requests prove principals; past it, its next is answered 503.

So that one principal opening and abandoning sessions cannot take every room
of :data:`MAX_SESSIONS` from the others for :data:`SESSION_IDLE_TIMEOUT`. An
app that authenticates nobody serves one principal, bounded by
:data:`MAX_SESSIONS` alone.
"""

MAX_PRINCIPALS = 1000
"""Principals served at once at most; past it an idle one is released, else the request is answered 503."""

AUTHENTICATE_TIMEOUT = 10.0
"""Seconds ``authenticate`` (or the token verifier and ``principal_from_token``) may take before the request is answered 503."""


MakeRuntime = Callable[[P], AbstractAsyncContextManager["AgentRuntime[Any, Any]"]]
"""``make_runtime(principal)``: an async context manager yielding the principal's runtime.

It is entered the first time a principal is seen and exited once that
principal has gone :data:`SESSION_IDLE_TIMEOUT` without a session or a request
(or at shutdown), so whatever it starts is shared by all of that principal's
sessions and requests. Without an ``authenticate`` hook or a token verifier it
is called once, with ``None``.
"""

Authenticate = Callable[[Request], "P | None | Awaitable[P | None]"]
"""``authenticate(request)``: the principal of an HTTP request, or ``None`` to refuse it (401). May be async."""


def _error(
    message: str,
    status: int,
    code: int = types.INVALID_REQUEST,
    data: object = None,
    headers: dict[str, str] | None = None,
    request_id: types.RequestId | None = None,
) -> Response:
    error = types.ErrorData(code=code, message=message)
    if data is not None:
        error = types.ErrorData(code=code, message=message, data=data)
    body = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


# What the SDK's request checks (and its body limit) refuse, in this endpoint's
# words (its own are plain text, not JSON-RPC).
_SECURITY_ANSWERS = {
    421: ("Misdirected Request: Host not allowed", 421),
    403: ("Forbidden: Origin not allowed", 403),
    400: ("Bad Request: Content-Type must be application/json", 400),
    413: ("Request body too large", 413),
}

# A session's request whose id another of its requests in flight has (as the
# transport or the SDK's dispatcher tells ids apart: ``5``, ``"5"`` and ``"05"``
# are one, see :func:`_id_key`), or whose id the transport keeps for the
# session's GET stream. Answered with no id: the one it has
# names something else.
_ID_IN_FLIGHT = "Invalid Request: a request with this id is in flight"
_ID_RESERVED = "Invalid Request: this id is reserved"

_IDLE = "has not started"
_RUNNING = "is running"
_STOPPED = "has stopped"
_FAILED = "stopped with an error"


_SHUTTING_DOWN = types.ErrorData(code=types.CONNECTION_CLOSED, message="Server shutting down: the request was cancelled")
"""The answer of every request still in flight when the server stops (the SDK's code; its reason)."""

_TOKEN_EXPIRED = types.ErrorData(
    code=types.CONNECTION_CLOSED, message="The access token expired: listen again with a fresh token"
)
"""The last frame of a ``subscriptions/listen`` stream whose bearer token expired while it was open."""

_STOPPING = "The server is shutting down"
_CLIENT_LEFT = "The client's connection closed"

_ANSWER_WAIT = 1.0
"""Seconds the answers of requests cut short by shutdown may take to leave before their streams close."""


class _TooMany(Exception):
    """No room for another principal."""


class _Unavailable(Exception):
    """A principal's runtime could not be started (logged where it failed)."""


class _NotServing(Exception):
    """The server stopped while the request was read or authenticated: it is answered as one that arrived after."""


@dataclass(eq=False)
class _Tenant:
    """What one principal is served by: its runtime's server, shared by its sessions and its sessionless requests."""

    key: Hashable
    principal: Any
    server: AgentServer | None = None
    init_options: InitializationOptions | None = None
    users: int = 0
    idle: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ready: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    failed: bool = False
    task_group: TaskGroup | None = None
    modern: Connection | None = None

    @property
    def closing(self) -> bool:
        return self.failed or self.idle.cancel_called or self.done.is_set()

    def present(self, principal: Any) -> None:
        """A request proved this tenant's principal again: keep the token that expires last.

        Tokens of one principal differ only in what does not make it (the
        token string, its expiry, the per-token claims), so the one held is
        the freshest, whichever request presented it: an older token still
        in use does not replace a newer one.
        """
        if isinstance(principal, AccessToken) and isinstance(self.principal, AccessToken):
            held = self.principal.expires_at
            if held is not None and (principal.expires_at is None or principal.expires_at > held):
                self.principal = principal

    def acquire(self) -> None:
        # Synchronous with the closing check before it: between the two, no
        # idle deadline can fire.
        self.users += 1
        self.idle.deadline = math.inf

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and not self.closing:
            self.idle.deadline = anyio.current_time() + SESSION_IDLE_TIMEOUT


@dataclass(eq=False, slots=True)
class _Session:
    id: str
    key: Hashable
    transport: StreamableHTTPServerTransport
    tenant: _Tenant | None = None
    connection: Connection | None = None
    started: bool = False
    # Whether its ``initialize`` was answered with a result: until then a
    # request naming it is answered as for an unknown session, and a refused
    # handshake never tells the client its id.
    established: bool = False
    # Whether the session has ended; an event to wait on is made only when
    # someone waits (shutting down), so an open session holds none.
    finished: bool = False
    _done: anyio.Event | None = None
    # Set, and the session's message loop cancelled, only when the server
    # stops: its dispatcher then answers every request still in flight. The
    # loop runs in the transport's idle scope, so that is the scope cancelled
    # (an open session holds no more than it must).
    stopping: bool = False
    calls: int = 0
    quiet: anyio.Event | None = None
    # The key (:func:`_id_key`) of the id of every request in flight, one for
    # any two ids the transport routes alike (a request's answer, and all else
    # the server sends about it, by the id's ``str()``) or its dispatcher
    # correlates alike: ``posted`` while its POST is being served, ``dispatched`` from the server
    # taking it until its answer (or its settling unanswered, as a cancelled
    # request does) has been handed to the transport. A request that outlives
    # its POST (its client left) still holds its id, so nothing it is yet to
    # send can reach another request's stream.
    posted: set[str] = field(default_factory=set[str])
    dispatched: set[str] = field(default_factory=set[str])

    def in_flight(self, key: str) -> bool:
        return key in self.posted or key in self.dispatched

    def stop(self) -> None:
        self.stopping = True
        if self.transport.idle_scope is not None:
            self.transport.idle_scope.cancel()

    def calling(self) -> None:
        self.calls += 1

    def called(self) -> None:
        self.calls -= 1
        if self.calls == 0 and self.quiet is not None:
            self.quiet.set()

    def end(self) -> None:
        self.finished = True
        if self._done is not None:
            self._done.set()

    async def ended(self) -> None:
        """Until the session has ended."""
        if not self.finished:
            done = self._done = self._done or anyio.Event()
            await done.wait()

    async def answered(self) -> None:
        """Until no request of the session is being answered."""
        if self.calls:
            quiet = self.quiet = anyio.Event()
            await quiet.wait()


class _Stopping(WriteRelay[SessionMessage]):
    """A session's write stream, in which the dispatcher's answers to requests cut short by shutdown say so.

    When its loop stops, the SDK's dispatcher answers every request still in
    flight ``-32000`` "Connection closed"; here the server stopping is why,
    and the client is told that in this endpoint's words.
    """

    __slots__ = ("_session",)

    def __init__(self, stream: WriteStream[SessionMessage], session: _Session) -> None:
        super().__init__(stream)
        self._session = session

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if (
            self._session.stopping
            and isinstance(message, types.JSONRPCError)
            and message.error.code == types.CONNECTION_CLOSED
        ):
            item = SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=message.id, error=_SHUTTING_DOWN), item.metadata)
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or message.id is None:
            await self._stream.send(item)
            return
        try:
            await self._stream.send(item)
        finally:
            # The request's answer, however its sending ended: the server has
            # nothing more to send about it.
            await _answered(self._session, _id_key(message.id))


def _id_key(request_id: types.RequestId) -> str:
    """The key a session holds a request's id under while it is in flight.

    The transport routes by the id's ``str()`` and the SDK's dispatcher
    correlates by the id coerced (``"05"`` and ``5`` are one id there), so
    two ids either tells alike have one key:

    >>> _id_key(5), _id_key("5"), _id_key("05"), _id_key("call-1")
    ('5', '5', '5', 'call-1')
    """
    return str(coerce_request_id(request_id))


async def _answered(session: _Session, key: str) -> None:
    """The request under ``key`` was answered, or settled unanswered: the server is done with its id."""
    # Once more round the loop first, so the transport's router, handed the
    # answer, has routed it (or dropped it: its POST may be gone) before
    # another request can take the id.
    await cancel_shielded_checkpoint()
    session.dispatched.discard(key)


class _Dispatched(ReadRelay[SessionMessage | Exception]):
    """A session's read stream, in which each request the server takes holds its id until the server is done with it.

    The server is done with a request once its answer is handed to the
    transport (:class:`_Stopping` sees it go) or, for one that settles
    unanswered (cancelled), once the transport's own hook for that has run.
    """

    __slots__ = ("_session",)

    def __init__(self, stream: ReadStream[SessionMessage | Exception], session: _Session) -> None:
        super().__init__(stream)
        self._session = session

    async def receive(self) -> SessionMessage | Exception:
        item = await self._stream.receive()
        if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
            metadata = item.metadata
            # Only a request the dispatcher will tell of settling unanswered
            # (every one the transport hands on) can hold its id past its POST.
            if isinstance(metadata, ServerMessageMetadata):
                key = _id_key(item.message.id)
                self._session.dispatched.add(key)
                metadata.on_request_unanswered = _settling(metadata.on_request_unanswered, self._session, key)
        return item


def _settling(
    unanswered: Callable[[], Awaitable[None]] | None, session: _Session, key: str
) -> Callable[[], Awaitable[None]]:
    """The transport's hook for a request settled unanswered, then the id released."""

    async def settled() -> None:
        try:
            if unanswered is not None:
                await unanswered()
        finally:
            await _answered(session, key)

    return settled


class _Watched:
    """An ASGI ``send`` that remembers how far the response got, and calls ``finishing()`` as its last part leaves."""

    def __init__(self, send: Send, finishing: Callable[[], None] | None = None) -> None:
        self._send = send
        self._finishing = finishing
        self.started = False
        self.streaming = False
        self.finished = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            headers = cast("Iterable[tuple[bytes, bytes]]", message.get("headers", ()))
            self.streaming = any(k.lower() == b"content-type" and v.startswith(b"text/event-stream") for k, v in headers)
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.finished = True
            if self._finishing is not None:
                self._finishing()
        await self._send(message)

    async def stopped(
        self,
        scope: Scope,
        receive: Receive,
        request_id: types.RequestId | None,
        error: types.ErrorData = _SHUTTING_DOWN,
        unstarted: ASGIApp | None = None,
    ) -> None:
        """Answer a request cut short, however far its response got.

        ``error`` ends a response already under way; ``unstarted`` answers one
        not yet begun (by default, ``error`` as a ``503``).
        """
        if self.finished:
            return
        answer = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
        with anyio.move_on_after(_ANSWER_WAIT, shield=True):
            if not self.started:
                if unstarted is None:
                    unstarted = _error(error.message, 503, error.code, request_id=request_id)
                await unstarted(scope, receive, self)
            elif self.streaming:
                data = answer.model_dump_json(by_alias=True, exclude_unset=True)
                await self({"type": "http.response.body", "body": f"event: message\r\ndata: {data}\r\n\r\n".encode()})
            else:
                await self({"type": "http.response.body", "body": b""})


_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode()


class _Handshake:
    """The ASGI ``send`` of an ``initialize``: its response held until whole, naming the session only if it opened one.

    The SDK's transport names the session (``Mcp-Session-Id``) in the headers
    of every response it gives, which for an SSE answer leave before the
    answer is known, and it answers a refused ``initialize`` with a JSON-RPC
    error in a 200: the client would hold the id of a session that never
    opened. The response to one ``initialize`` is one small answer, so it is
    held whole; then ``opened(status)`` says (and records) whether the
    handshake opened the session, before the client can learn its id, and the
    header is left out when it did not.
    """

    __slots__ = ("_held", "_opened", "_send", "_status", "_released")

    def __init__(self, send: Send, opened: Callable[[int | None], bool]) -> None:
        self._send = send
        self._opened = opened
        self._held: list[Message] = []
        self._status: int | None = None
        self._released = False

    async def __call__(self, message: Message) -> None:
        if self._released:
            await self._send(message)
            return
        if message["type"] == "http.response.start":
            self._status = message["status"]
        self._held.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            await self.release()

    async def release(self) -> None:
        """Send what is held (once), without the session's id unless the handshake opened it."""
        if self._released:
            return
        self._released = True
        named = self._opened(self._status)
        held, self._held = self._held, []
        for message in held:
            if message["type"] == "http.response.start" and not named:
                headers = cast("Iterable[tuple[bytes, bytes]]", message.get("headers", ()))
                message = {**message, "headers": [(k, v) for k, v in headers if k.lower() != _SESSION_HEADER]}
            await self._send(message)


@dataclass(frozen=True)
class _Envelope:
    """What the endpoint read of a POST body before handing it on (and, when it is rewritten, the body handed on)."""

    method: str | None
    request_id: types.RequestId | None
    body: bytes | None = None


class HttpApp(Generic[P]):
    """The ASGI application :func:`http_app` returns.

    It needs the ASGI lifespan protocol (every ASGI server runs it), or
    :meth:`running` around it: an App's program, every principal's runtime
    and every session live from startup to shutdown.

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
        allowed_hosts: Iterable[str] = (),
        token_verifier: TokenVerifier | None = None,
        auth: AuthSettings | None = None,
        principal_from_token: PrincipalFromToken | None = None,
        request_state_security: RequestStateSecurity | None = None,
        name: str = "agentfx",
        version: str = __version__,
    ) -> None:
        _check_arguments(make_runtime, authenticate, token_verifier, auth, principal_from_token)
        check_identity("http_app", name, version)
        if token_verifier is not None and authenticate is not None:
            raise ContractError("http_app takes authenticate or token_verifier, not both")
        if token_verifier is None and (auth is not None or principal_from_token is not None):
            given = "auth" if auth is not None else "principal_from_token"
            raise ContractError(f"http_app({given}=...) needs token_verifier=...")
        if token_verifier is not None and auth is None:
            raise ContractError(
                "http_app(token_verifier=...) needs auth=AuthSettings(issuer_url=..., resource_server_url=...)"
            )
        self._served = make_runtime
        served = make_runtime
        if isinstance(served, App):
            # A factory's contract is known only once it runs, at a principal's first request.
            check_uris(cast("App[Any, Any, P]", served).definition)
        self._authenticate = authenticate
        self._tokens = None if token_verifier is None else BearerTokens(token_verifier, cast("AuthSettings", auth))
        self._principal_from_token = principal_from_token
        # One policy for every principal's server, made now, and a
        # single-use ledger per principal that outlives its servers: a state
        # is redeemed at most once in this process, a pending one survives its
        # principal's server going idle, and no principal can fill another's.
        self._request_state_security = _confirm.security(request_state_security)
        # Room for every principal served at once and as many again whose
        # servers ended while their states are still in time.
        self._approvals = _confirm.Ledgers(ttl=self._request_state_security.ttl, max_ledgers=2 * MAX_PRINCIPALS)
        self._security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=_names("allowed_hosts", allowed_hosts) or list(LOOPBACK_HOSTS),
            allowed_origins=_names("allowed_origins", allowed_origins) or list(LOOPBACK_ORIGINS),
        )
        self._checks = TransportSecurityMiddleware(self._security)
        # What the SDK's transports are given: every request reaching one has
        # passed ``self._checks`` (Host, Origin) in ``_handle`` already, so
        # they check only the content type, not everything a second time.
        self._checked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self._name = name
        self._version = version
        self._sessions: dict[str, _Session] = {}
        # How many of them each principal holds (by its key), while it holds any.
        self._sessions_of: dict[Hashable, int] = {}
        self._tenants: dict[Hashable, _Tenant] = {}
        # Sessionless requests in flight; the ASGI server runs them, so
        # shutting down must end them itself before their runtimes close.
        self._requests: dict[anyio.CancelScope, InFlight] = {}
        self._no_requests: anyio.Event | None = None
        self._program: Program[Any, Any] | None = None
        self._task_group: TaskGroup | None = None
        self._state = _IDLE

    @property
    def session_count(self) -> int:
        """Sessions open right now."""
        return len(self._sessions)

    @property
    def principal_count(self) -> int:
        """Principals whose runtime is held right now (in use, or idle but not yet released)."""
        return len(self._tenants)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._limited(scope, receive, send)
        else:
            # Websocket and anything newer: this endpoint speaks only HTTP.
            return

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The request under the SDK's body limit, whose refusal is answered in this endpoint's words.

        The limit answers a body over :data:`DEFAULT_MAX_REQUEST_BODY_SIZE`
        (declared or counted as it streams) 413 in plain text, before the
        request reaches the endpoint; only that refusal is sent through the
        ``send`` it is given, since what it admits is served on the server's own.
        """

        async def admitted(scope: Scope, receive: Receive, _refusal: Send) -> None:
            await self._handle(scope, receive, send)

        async def refusal(message: Message) -> None:
            if message["type"] == "http.response.start":
                # It refuses nothing but a body too large.
                text, status = _SECURITY_ANSWERS.get(message["status"], _SECURITY_ANSWERS[413])
                await _error(text, status)(scope, receive, send)
            # The rest is its plain-text body, answered above already.

        await RequestBodyLimitMiddleware(admitted, DEFAULT_MAX_REQUEST_BODY_SIZE)(scope, receive, refusal)

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None]:
        """Start what the ASGI lifespan starts (an App's program, the sessions' task group), for embedding.

        Leaving the block stops serving in order: every request still in
        flight is cancelled (a call's invocation aborted, so the audit
        records it) and answered ``-32000`` "Server shutting down: the
        request was cancelled" on its own response, then the sessions close,
        then every principal's runtime, then the App's program.

        Whatever stops an App's program (a command that raised) propagates
        out of the block, as from :meth:`agentfx.App.run`; from then on every
        request is answered 500, "the application stopped", until the block
        is entered again. Serving on would only fail every call, so a server
        run around this block should stop when it raises.
        """
        self._state = _IDLE
        # Again at the start of serving: an SDK module imported since the app
        # was built brings loggers of its own.
        withhold_sdk_logs()
        try:
            async with AsyncExitStack() as stack:
                served = self._served
                if isinstance(served, App):
                    # Entered first, so it is left last: every principal's
                    # runtime is bound to it until its tenant has ended.
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
        # Terminating a transport ends its message loop, and ending a tenant's
        # idle scope ends its task, so every runtime is released through its
        # own context manager, not cancelled. Sessions first: they use tenants.
        sessions = list(self._sessions.values())
        with anyio.move_on_after(5, shield=True):
            # Cancelled calls abort their invocations (and are audited) while
            # their runtimes are still there to record them, and each is
            # answered that the server is shutting down.
            for request, calls in list(self._requests.items()):
                # Aborted first: a call runs shielded, so cancelling its
                # request alone would wait for whatever it waits on.
                calls.close(_STOPPING)
                request.cancel()
            for session in sessions:
                # The session ends its own transport once its loop has stopped
                # and what was in flight has been answered.
                session.stop()
            if self._requests:
                no_requests = self._no_requests = anyio.Event()
                await no_requests.wait()
            for session in sessions:
                if not session.started:
                    await session.transport.terminate()
            for session in sessions:
                await session.ended()
            tenants = list(self._tenants.values())
            for tenant in tenants:
                tenant.idle.cancel()
            for tenant in tenants:
                await tenant.done.wait()

    # --- one request ---------------------------------------------------------------

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        tokens = self._tokens
        metadata = None if tokens is None else tokens.metadata(scope)
        if metadata is not None:
            await metadata(scope, receive, send)
            return
        if _local_path(scope).rstrip("/") != MCP_PATH:
            await _error("Not Found", 404)(scope, receive, send)
            return
        request = Request(scope, receive)
        refused = await self._checks.validate_request(request, is_post=request.method == "POST")
        if refused is not None:
            message, status = _SECURITY_ANSWERS.get(refused.status_code, ("Bad Request", 400))
            await _error(message, status)(scope, receive, send)
            return
        if self._state != _RUNNING:
            await self._not_serving()(scope, receive, send)
            return
        raw_receive = receive
        body = await _read_body(raw_receive)
        if body is None:
            # Nobody is left to answer; a traceback would say nothing more.
            _logger.warning("a client left before sending its whole request body; nothing was served")
            return
        envelope: _Envelope | None = None
        if request.method == "POST":
            read = _read_envelope(body, in_session=MCP_SESSION_ID_HEADER in request.headers)
            if isinstance(read, Response):
                await read(scope, receive, send)
                return
            envelope = read
        # The transport is handed the body as rewritten, if it was; an
        # authenticate hook still reads the one the client sent.
        receive = replay_body(body if envelope is None or envelope.body is None else envelope.body, raw_receive)

        if tokens is not None:
            await self._with_token(tokens, envelope, scope, receive, raw_receive, send)
            return
        # The hook may read the body (to check a signature over it): it gets
        # its own replay, and the transport keeps the other.
        principal = await self._hook_principal(Request(scope, replay_body(body, raw_receive)), raw_receive)
        if isinstance(principal, Response):
            await principal(scope, receive, send)
            return
        if principal is _LEFT:
            return
        if principal is None:
            await _error("Unauthorized", 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        await self._serve_as(principal, envelope, scope, receive, send, None)

    async def _with_token(
        self,
        tokens: BearerTokens,
        envelope: _Envelope | None,
        scope: Scope,
        receive: Receive,
        raw_receive: Receive,
        send: Send,
    ) -> None:
        request = Request(scope, receive)
        token = await self._bounded(tokens.verify, request, raw_receive)
        if isinstance(token, Response):
            await token(scope, receive, send)
            return
        if token is _LEFT:
            return
        token = cast("AccessToken | None", token)

        async def then(scope: Scope, receive: Receive, send: Send) -> None:
            assert token is not None
            principal = await self._token_principal(token, raw_receive)
            if isinstance(principal, Response):
                await principal(scope, receive, send)
                return
            if principal is _LEFT:
                return
            await self._serve_as(principal, envelope, scope, receive, send, token.expires_at)

        # The SDK's own answers: 401 without a valid token, 403 without the
        # required scopes, each with WWW-Authenticate naming the metadata.
        await tokens.guard(token, then)(scope, receive, send)

    async def _hook_principal(self, request: Request, raw_receive: Receive) -> object:
        if self._authenticate is None:
            # Without an authenticate hook every caller is the same anonymous
            # principal; a sentinel keeps that distinct from a refusal.
            return _ANONYMOUS
        try:
            principal: object = self._authenticate(request)
        except Exception:
            _logger.exception("authenticating a request failed")
            return _error("Internal error", 500, types.INTERNAL_ERROR)
        if inspect.isawaitable(principal):
            # Only an awaitable can hang; a synchronous answer needs no bound.
            return await self._bounded(_settle, principal, raw_receive)
        return principal

    async def _token_principal(self, token: AccessToken, raw_receive: Receive) -> object:
        convert = self._principal_from_token
        if convert is None:
            return token
        try:
            principal: object = convert(token)
        except Exception:
            _logger.exception("principal_from_token raised")
            return _error("Internal error", 500, types.INTERNAL_ERROR)
        if inspect.isawaitable(principal):
            principal = await self._bounded(_settle, principal, raw_receive)
        if principal is None:
            _logger.error("principal_from_token returned None; a verified token must prove a principal")
            return _error("Internal error", 500, types.INTERNAL_ERROR)
        return principal

    async def _bounded(self, step: Callable[[Any], Awaitable[object]], argument: object, receive: Receive) -> object:
        """``step(argument)``, bounded by :data:`AUTHENTICATE_TIMEOUT` and by the client staying.

        Answers a ``Response`` when the step raised (500) or ran out of time
        (503), ``_LEFT`` when the client went away first (nothing to answer),
        else what the step returned. ``receive`` is the request's own, past
        its body: the only message left on it is the client leaving.
        """
        outcome: list[object] = []
        try:
            async with anyio.create_task_group() as task_group:

                async def watch() -> None:
                    # The body has been read, so the next message is the
                    # client leaving; nothing else is lost by waiting for it.
                    if (await receive())["type"] == "http.disconnect":
                        outcome.append(_LEFT)
                        task_group.cancel_scope.cancel()

                task_group.start_soon(watch)
                with anyio.move_on_after(AUTHENTICATE_TIMEOUT):
                    outcome.append(await step(argument))
                task_group.cancel_scope.cancel()
        except Exception:
            _logger.exception("authenticating a request failed")
            return _error("Internal error", 500, types.INTERNAL_ERROR)
        if not outcome:
            _logger.warning("authenticating a request took more than %gs; it was answered 503", AUTHENTICATE_TIMEOUT)
            return _error(
                "Service Unavailable: authentication timed out", 503, types.INTERNAL_ERROR, headers={"Retry-After": "1"}
            )
        return outcome[0]

    async def _serve_as(
        self,
        principal: object,
        envelope: _Envelope | None,
        scope: Scope,
        receive: Receive,
        send: Send,
        expires_at: float | None,
    ) -> None:
        # ``expires_at`` is the bearer token's (wall clock, seconds), None
        # without one: a stream that would outlive it (a session's GET stream,
        # a listen stream) is ended then, so what it carries is never sent on
        # a token no longer valid. The client opens it again with a fresh one.
        try:
            key = _key(principal)
            hash(key)
        except Exception:
            _logger.exception("a principal must be hashable; this request could not be served")
            await _error("Internal error", 500, types.INTERNAL_ERROR)(scope, receive, send)
            return
        headers = Request(scope).headers
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await self._serve_sessionless(principal, key, envelope, scope, receive, send, expires_at)
            return
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            await self._open(principal, key, envelope, scope, receive, send)
            return
        session = self._sessions.get(session_id)
        if session is None or not session.established or session.tenant is None or not _same(session.key, key):
            # Indistinguishable from an unknown id, so probing learns nothing:
            # so is a session whose handshake is still being answered, or was
            # refused.
            await _error("Session not found", 404)(scope, receive, send)
            return
        # A session's requests may each bring a refreshed token: authorize sees the freshest, as sessionless ones do.
        session.tenant.present(principal)
        await self._in_session(session, envelope, scope, receive, send, expires_at)

    # --- 2026-07-28: one request, one principal -----------------------------------------

    async def _serve_sessionless(
        self,
        principal: object,
        key: Hashable,
        envelope: _Envelope | None,
        scope: Scope,
        receive: Receive,
        send: Send,
        expires_at: float | None,
    ) -> None:
        try:
            tenant = await self._tenant(principal, key)
        except _TooMany:
            await _error("Too many principals", 503, types.INTERNAL_ERROR)(scope, receive, send)
            return
        except _Unavailable:
            await _error("Internal error", 500, types.INTERNAL_ERROR)(scope, receive, send)
            return
        except _NotServing:
            await self._not_serving()(scope, receive, send)
            return
        request = anyio.CancelScope()
        watched = _Watched(send)
        # This request's own calls: its principal's other clients share the
        # connection (and may reuse its request ids), so a call is aborted per
        # request. They run shielded, and the SDK cancels a request whose
        # client closed its response stream, which they would not hear of.
        calls = self._requests[request] = InFlight()

        async def leaving() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not watched.finished:
                calls.close(_CLIENT_LEFT)
            return message

        # Only a listen stream is ended at its token's expiry: any other
        # request was authorized when it began, and a call cut short there
        # could leave its Message sent and its answer lost.
        deadline = math.inf
        if expires_at is not None and envelope is not None and envelope.method == "subscriptions/listen":
            deadline = _deadline(expires_at)
        expiry = anyio.CancelScope(deadline=deadline)
        try:
            with request, request_calls(calls):
                state = self._modern_state(tenant)
                assert tenant.server is not None
                with expiry:
                    await handle_modern_request(tenant.server, self._checked, False, state, scope, leaving, watched)
            request_id = None if envelope is None else envelope.request_id
            if request.cancel_called:
                # Only shutting down cancels it. The SDK's entry answers
                # nothing when cancelled (the server would log that the app
                # never responded): the request is answered here instead.
                await watched.stopped(scope, receive, request_id)
            elif expiry.cancelled_caught:
                # An error, not the graceful close (its result): the client
                # takes the stream as lost and listens again. Before the
                # stream began, the SDK's 401 sends it for a fresh token.
                assert self._tokens is not None, "only a bearer token has an expiry"
                await watched.stopped(scope, receive, request_id, _TOKEN_EXPIRED, self._tokens.expired())
        finally:
            self._requests.pop(request, None)
            if not self._requests and self._no_requests is not None:
                self._no_requests.set()
            tenant.release()

    def _not_serving(self) -> Response:
        """The answer to a request the server, not running, cannot serve."""
        if self._state == _FAILED:
            # What stopped it is for the server's log; a client learns only that it did.
            return _error("Internal error: the application stopped", 500, types.INTERNAL_ERROR)
        return _error(f"Service Unavailable: the server {self._state}", 503, types.INTERNAL_ERROR)

    def _modern_state(self, tenant: _Tenant) -> Connection:
        # The connection of a principal's sessionless requests (their listen
        # streams, what they listed) is made with the first such request: a
        # principal seen only in sessions never pays for it. Its only
        # stream for messages the server starts is a listen stream.
        if tenant.modern is None:
            assert tenant.server is not None
            tenant.modern = tenant.server.connect(standalone=False)
        return tenant.modern

    # --- principals' runtimes ----------------------------------------------------------

    async def _tenant(self, principal: object, key: Hashable) -> _Tenant:
        """The principal's tenant, started when needed, with one use acquired; release it when done.

        Raises :class:`_NotServing` when the server is no longer running, as it
        may have stopped while the request was read or authenticated: no
        tenant is made then, since nothing would ever start or end it.
        """
        if self._state != _RUNNING:
            raise _NotServing
        tenant = self._tenants.get(key)
        if tenant is not None and not tenant.closing:
            tenant.present(principal)
            tenant.acquire()
            await tenant.ready.wait()
            if tenant.failed or self._state != _RUNNING:
                # Stopped while this request waited for the runtime to start.
                tenant.release()
                raise _Unavailable if tenant.failed else _NotServing
            return tenant
        if len(self._tenants) >= MAX_PRINCIPALS and not self._release_an_idle_tenant():
            _logger.warning("refusing a request: %d principals are already being served", MAX_PRINCIPALS)
            raise _TooMany
        tenant = _Tenant(key=key, principal=principal)
        # Registered and acquired before the first await, so concurrent
        # requests of one principal share this tenant, and the cap holds.
        self._tenants[key] = tenant
        tenant.acquire()
        task_group = self._task_group
        assert task_group is not None
        try:
            await task_group.start(self._run_tenant, tenant)
        except BaseException as exc:
            tenant.failed = True
            tenant.done.set()
            if self._tenants.get(key) is tenant:
                del self._tenants[key]
            tenant.ready.set()
            if isinstance(exc, Exception):
                _logger.exception("starting the runtime of a principal failed")
                raise _Unavailable from None
            raise
        tenant.ready.set()
        if self._state != _RUNNING:
            # Stopped while the runtime started: closing the tenants has begun, or is done.
            tenant.release()
            raise _NotServing
        return tenant

    def _release_an_idle_tenant(self) -> bool:
        for key, tenant in self._tenants.items():
            if tenant.users == 0:
                tenant.idle.cancel()
                del self._tenants[key]
                return True
        return False

    async def _run_tenant(self, tenant: _Tenant, *, task_status: TaskStatus[None]) -> None:
        started = False
        principal: str | None = None
        approvals: _confirm.Approvals | None = None
        try:
            principal = _principal_text(tenant.key)
            approvals = self._approvals.hold(principal)
            async with self._runtime(tenant) as runtime:
                mcp_server = serve_runtime(
                    runtime, name=self._name, version=self._version, sealing=self._sealing(principal), approvals=approvals
                )
                # The 2026 entry checks Mcp-Param headers against the called
                # tool's schema; without this it would list the tools (reading
                # the Model) on every call that has arguments.
                assert isinstance(mcp_server, AgentServer)
                schemas = {name: descriptor.input_schema for name, descriptor in mcp_server.descriptors.items()}
                mcp_server.get_tool_input_schema = schemas.get
                tenant.server = mcp_server
                tenant.init_options = mcp_server.create_initialization_options()
                # One watcher for all of the principal's connections, hosted
                # here, so no session needs a task group of its own.
                async with mcp_server.watching(), anyio.create_task_group() as task_group:
                    tenant.task_group = task_group
                    started = True
                    task_status.started()
                    try:
                        with tenant.idle:
                            await anyio.sleep_forever()
                    finally:
                        if tenant.modern is not None:
                            tenant.modern.close()
                    task_group.cancel_scope.cancel()
        except Exception:
            if not started:
                raise
            # Once started, one principal's failing runtime must not take the others down.
            _logger.exception("the runtime of a principal ended with an error")
        finally:
            if principal is not None and approvals is not None:
                self._approvals.release(principal, approvals)
            tenant.done.set()
            if self._tenants.get(tenant.key) is tenant:
                del self._tenants[tenant.key]

    def _sealing(self, principal: str) -> RequestStateSecurity:
        # One policy for every principal's server (and every process given
        # it), so each state is also bound to the principal it was sealed for:
        # the SDK binds only an OAuth caller, and not an authenticate hook's.
        return _confirm.bound(self._request_state_security, principal)

    def _runtime(self, tenant: _Tenant) -> AbstractAsyncContextManager[AgentRuntime[Any, Any]]:
        served = self._served
        if not isinstance(served, App):
            # A factory is given the principal once: the first of its tokens.
            return served(_unwrap(tenant.principal))
        app = cast("App[Any, Any, P]", served)
        program = self._program
        assert program is not None, "tenants start only while running"
        if tenant.principal is _ANONYMOUS:
            return nullcontext(app.bind(program))
        # Read per invocation, so ``authorize`` sees the newest token that
        # proves this principal (its expiry, not the first token's). A
        # resolver of its own, so a principal that happens to be callable is
        # not mistaken for one.
        return nullcontext(app.bind(program, principal=lambda _invocation: tenant.principal))

    # --- 2025-11-25: sessions -------------------------------------------------------------

    def _admit(self, session: _Session) -> None:
        self._sessions[session.id] = session
        self._sessions_of[session.key] = self._sessions_of.get(session.key, 0) + 1

    def _forget(self, session_id: str) -> None:
        """Drop a session from the tables, once however often it is called."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        held = self._sessions_of.get(session.key, 0) - 1
        if held > 0:
            self._sessions_of[session.key] = held
        else:
            self._sessions_of.pop(session.key, None)

    async def _open(
        self, principal: object, key: Hashable, envelope: _Envelope | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if envelope is None or envelope.method != "initialize":
            await _error("Bad Request: Missing session ID", 400)(scope, receive, send)
            return
        # Admitted and registered before the first await, so concurrent
        # openings cannot all pass the check together.
        if len(self._sessions) >= MAX_SESSIONS:
            _logger.warning("refusing to open a session: %d sessions are already open", MAX_SESSIONS)
            await _error("Too many open sessions", 503, types.INTERNAL_ERROR)(scope, receive, send)
            return
        proved = self._authenticate is not None or self._tokens is not None
        if proved and self._sessions_of.get(key, 0) >= MAX_SESSIONS_PER_PRINCIPAL:
            _logger.warning(
                "refusing to open a session: its principal already holds %d sessions", MAX_SESSIONS_PER_PRINCIPAL
            )
            await _error("Too many open sessions for this principal", 503, types.INTERNAL_ERROR)(scope, receive, send)
            return
        session_id = uuid.uuid4().hex
        session = _Session(
            id=session_id,
            key=key,
            transport=StreamableHTTPServerTransport(
                mcp_session_id=session_id, idle_timeout=SESSION_IDLE_TIMEOUT, security_settings=self._checked
            ),
        )
        self._admit(session)
        established = False
        try:
            try:
                session.tenant = await self._tenant(principal, key)
            except _TooMany:
                await _error("Too many principals", 503, types.INTERNAL_ERROR)(scope, receive, send)
                return
            except _Unavailable:
                await _error("Internal error", 500, types.INTERNAL_ERROR)(scope, receive, send)
                return
            except _NotServing:
                await self._not_serving()(scope, receive, send)
                return
            task_group = self._task_group
            assert task_group is not None
            try:
                await task_group.start(self._serve, session)
            except Exception:
                _logger.exception("opening a session failed")
                await _error("Internal error", 500, types.INTERNAL_ERROR)(scope, receive, send)
                return

            def opened(status: int | None) -> bool:
                # The SDK answers a refused ``initialize`` with a JSON-RPC error
                # in a 200: only a handshake answered with a result opens a session.
                connection = session.connection
                session.established = (
                    status is not None and status < 400 and connection is not None and connection.handshaken
                )
                if not session.established:
                    # Its room under the caps is free before the client hears
                    # of the refusal, so its next attempt finds it.
                    self._forget(session_id)
                return session.established

            answer = _Handshake(send, opened)
            await session.transport.handle_request(scope, receive, answer)
            # A response cut short (its client left, say) leaves as far as it got.
            await answer.release()
            established = session.established
        finally:
            if not established:
                self._forget(session_id)
                if not session.transport.is_terminated:
                    with anyio.CancelScope(shield=True):
                        await session.transport.terminate()
                if session.tenant is not None and not session.started:
                    # A started session task releases its tenant as it ends;
                    # one that never started leaves that to here.
                    session.tenant.release()
                    session.end()

    async def _serve(self, session: _Session, *, task_status: TaskStatus[None]) -> None:
        tenant = session.tenant
        assert tenant is not None and tenant.server is not None
        session.started = True
        try:
            async with session.transport.connect() as (read, write):
                # Each session keeps its own connection state (the client it
                # notifies, what it last listed) over the principal's shared
                # server, whose watcher the tenant hosts: no lifespan, and no
                # task group, per session. Messages the server starts reach
                # the client only while its GET stream is open.
                state = session.connection = tenant.server.connect(standalone=False)
                try:
                    task_status.started()
                    # Made by connect(): the transport cancels it once the
                    # session has gone unused too long, and stop() when the
                    # server stops.
                    idle = session.transport.idle_scope
                    assert idle is not None, "every session transport is made with an idle timeout"
                    if session.stopping:
                        idle.cancel()
                    with idle:
                        # serve_loop, not Server.run(): the session's era is
                        # already known, so no dual-era relay is needed.
                        await serve_loop(
                            tenant.server,
                            # Its end (the session terminated) or its
                            # cancellation (stopped, gone idle) aborts the
                            # session's calls in flight, which run shielded;
                            # each request it hands on holds its id.
                            _Dispatched(state.reading(read), session),
                            _Stopping(write, session),
                            lifespan_state=state,
                            session_id=session.id,
                            init_options=tenant.init_options,
                        )
                    if session.stopping:
                        # The server is stopping: the answers to what was in
                        # flight are on their way to their streams, which
                        # terminating the transport would close under them.
                        with anyio.move_on_after(_ANSWER_WAIT, shield=True):
                            await session.answered()
                finally:
                    state.close()
                    # Ended while its streams are still open (inside connect()),
                    # so the transport's router takes their closing as the end
                    # it is, not as a failure to log.
                    if not session.transport.is_terminated:
                        with anyio.CancelScope(shield=True):
                            await session.transport.terminate()
        except Exception:
            # Once started, a failing session must not take the others down.
            _logger.exception("session %s ended with an error", session.id)
        finally:
            self._forget(session.id)
            tenant.release()
            session.end()
            if not session.transport.is_terminated:
                with anyio.CancelScope(shield=True):
                    await session.transport.terminate()

    async def _in_session(
        self,
        session: _Session,
        envelope: _Envelope | None,
        scope: Scope,
        receive: Receive,
        send: Send,
        expires_at: float | None,
    ) -> None:
        calling = envelope is not None and envelope.request_id is not None
        # The transport keys a request's response stream by the ``str()`` of
        # its id, and the session's GET stream by a key of the same kind: a
        # request under a key in use would take that stream from its owner,
        # whose answers (or change notifications) would never reach it.
        request_id = envelope.request_id if envelope is not None else None
        key = None if request_id is None else _id_key(request_id)
        reserved = request_id is not None and str(request_id) == GET_STREAM_KEY
        if key is not None and (reserved or session.in_flight(key)):
            await _error(_ID_RESERVED if reserved else _ID_IN_FLIGHT, 400)(scope, receive, send)
            return
        # A call whose client leaves before its answer has left is cancelled
        # (below); only a call is watched for that. Once the answer is out, a
        # disconnect is no news: servers report one to every receive() after
        # the response completes, and the SSE response asks.
        left = False
        posted = False

        def finishing() -> None:
            # The POST no longer holds the id: once its answer has left (the
            # transport's stream for the id ended first, which is what ends
            # this response), since the client may ask again under it as soon
            # as it has read the end, however long this handling takes to
            # wind down; else once the transport is done with it. Once only:
            # by then the id may be another request's.
            nonlocal posted
            if posted and key is not None:
                posted = False
                session.posted.discard(key)

        response = _Watched(send, finishing)

        async def watched() -> Message:
            nonlocal left
            message = await receive()
            if message["type"] == "http.disconnect" and not response.finished:
                left = True
            return message

        if calling:
            session.calling()
        # A GET is the session's stream for messages the server starts: only
        # while one is open is the session told of Model changes (none sent
        # without it could reach the client).
        streaming = session.connection if scope["method"] == "GET" else None
        if streaming is not None:
            streaming.stream_opened()
        if key is not None:
            # Nothing was awaited since the check: no request under the same
            # key can have passed it meanwhile.
            session.posted.add(key)
            posted = True
        try:
            if calling:
                await session.transport.handle_request(scope, watched, response)
            elif streaming is not None and expires_at is not None:
                await _stream_until(session.transport, _deadline(expires_at), scope, receive, send)
            else:
                await session.transport.handle_request(scope, receive, send)
        finally:
            if calling:
                session.called()
            if streaming is not None:
                streaming.stream_closed()
            # Served, refused by the transport, cut short or failed: a request
            # the server took still holds its id until the server is done.
            finishing()
        if session.transport.is_terminated:
            self._forget(session.id)
            return
        if session.stopping:
            # The server is stopping: every call of the session has been cancelled and answered already.
            return
        if left and not response.finished and envelope is not None and envelope.request_id is not None and envelope.method != "initialize":
            # Without an event store, a response whose POST stream is gone has
            # nowhere to go: no other stream of the session can carry it. So
            # the call is cancelled as if the client had said so, and the
            # invocation is aborted (and audited) instead of running on.
            await self._cancel(session, envelope.request_id, scope)

    async def _cancel(self, session: _Session, request_id: types.RequestId, scope: Scope) -> None:
        notification = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": _CLIENT_LEFT},
        }
        body = json.dumps(notification).encode()
        kept = {b"host", b"mcp-protocol-version"}
        headers = [(name, value) for name, value in scope["headers"] if name in kept]
        headers += [
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
            (MCP_SESSION_ID_HEADER.lower().encode(), session.id.encode()),
        ]
        async def discard(_message: Message) -> None:
            return

        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            try:
                await session.transport.handle_request(
                    {**scope, "method": "POST", "headers": headers}, replay_body(body, _never), discard
                )
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the session's loop ended meanwhile, taking the call with it


def _deadline(expires_at: float) -> float:
    """A token's expiry (wall clock) on the event loop's clock."""
    return anyio.current_time() + (expires_at - time.time())


async def _stream_until(
    transport: StreamableHTTPServerTransport, deadline: float, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve a session's GET stream, closing it at ``deadline`` as the SDK closes one: the client reconnects."""
    async with anyio.create_task_group() as group:

        async def expire() -> None:
            await anyio.sleep_until(deadline)
            # Still inside this GET's handling, so the session's one GET
            # stream is this request's (a second GET is refused 409 at once).
            transport.close_standalone_sse_stream()

        group.start_soon(expire)
        await transport.handle_request(scope, receive, send)
        group.cancel_scope.cancel()


async def _never() -> Message:
    # The synthesized request's client never leaves: its only message is its body.
    await anyio.sleep_forever()
    raise AssertionError  # pragma: no cover


def _local_path(scope: Scope) -> str:
    # Mounted under a prefix (Starlette's Mount, a server's --root-path), the
    # ASGI path still starts with that prefix, which root_path names.
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


class _Sentinel:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


_ANONYMOUS: Any = _Sentinel("<anonymous>")
_LEFT: Any = _Sentinel("<the client left>")


def _unwrap(principal: object) -> Any:
    return None if principal is _ANONYMOUS else principal


def _key(principal: object) -> Hashable:
    # An AccessToken (the default principal of a token) is a pydantic model:
    # unhashable, and its token string changes on every refresh.
    if isinstance(principal, AccessToken):
        return token_identity(principal)
    return cast("Hashable", principal)


def _principal_text(key: Hashable) -> str:
    """The principal as the same text in every process, for binding a sealed state to it.

    A digest of its type and its JSON encoding (unordered collections
    sorted), so equal principals of one type agree wherever they are served.
    One that JSON cannot encode is bound to this runtime alone: its states
    come back only here, never to another principal.
    """
    if key is _ANONYMOUS:
        return "anonymous"
    kind = type(key)
    try:
        encoded = msgspec.json.encode(key, order="deterministic")
    except (TypeError, ValueError, OverflowError):
        return f"local:{uuid.uuid4().hex}"
    return hashlib.sha256(f"{kind.__module__}.{kind.__qualname__}:".encode() + encoded).hexdigest()


def _same(a: object, b: object) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


async def _settle(value: object) -> object:
    if inspect.isawaitable(value):
        return await cast("Awaitable[object]", value)
    return value


def _check_arguments(
    make_runtime: object, authenticate: object, token_verifier: object, auth: object, principal_from_token: object
) -> None:
    """Refuse, when the app is made, what would fail every request: each would answer 500 or 401 forever."""
    if not isinstance(make_runtime, App) and not callable(make_runtime):
        raise ContractError(
            "http_app takes an App or make_runtime(principal) returning an async context manager of a runtime; "
            f"got {type(make_runtime).__name__}"
        )
    for parameter, hook in (("authenticate", authenticate), ("principal_from_token", principal_from_token)):
        if hook is not None and not callable(hook):
            raise ContractError(f"http_app({parameter}=...) takes a function, got {type(hook).__name__}")
    if token_verifier is not None and not callable(getattr(token_verifier, "verify_token", None)):
        raise ContractError(
            f"http_app(token_verifier=...) takes the SDK's TokenVerifier (with verify_token), got {type(token_verifier).__name__}"
        )
    if auth is not None and not isinstance(auth, AuthSettings):
        raise ContractError(f"http_app(auth=...) takes the SDK's AuthSettings, got {type(auth).__name__}")


def _names(parameter: str, given: Iterable[str]) -> list[str]:
    """The host or origin patterns given, refusing one string (its characters would be taken as the patterns)."""
    if isinstance(cast(object, given), str | bytes):
        raise ContractError(f"http_app({parameter}=...) takes a list of names, not one string: write {parameter}=[{given!r}]")
    names = list(given)
    for name in names:
        if not isinstance(cast(object, name), str):
            raise ContractError(f"http_app({parameter}=...) takes strings, got {type(name).__name__}")
    return names


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (already bounded by the size limit), or ``None`` when the client left first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _read_envelope(body: bytes, *, in_session: bool = False) -> _Envelope | Response:
    """The POST body as one JSON-RPC message, or the error answering it, in this endpoint's words.

    Parsed as the SDK's transport will parse it (so nothing it would refuse,
    with validator text, gets that far), but strictly: ``NaN``, ``Infinity``
    and ``-Infinity``, which its parser takes for numbers, are not JSON, and
    are answered ``-32700`` as any other body that is not. Every failure, a
    nesting too deep for the parser included, is answered here; so is a
    request whose id is neither a string nor an integer, which the parser
    reads as a notification.
    In a 2025 session (``in_session``), a malformed answer (an ``id`` with a
    ``result`` or an ``error``, no ``method``) is handed on rewritten as an
    error answer to that id, the one form the session's pending request can
    hear.
    """
    try:
        # Strict: ``NaN`` and ``Infinity`` are not JSON, and would reach a
        # capability as a float nobody could have sent in JSON.
        raw: object = pydantic_core.from_json(body, allow_inf_nan=False)
    except (ValueError, RecursionError):
        return _error("Parse error", 400, types.PARSE_ERROR)
    request_id = _request_id(raw)
    try:
        message = types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except (ValidationError, RecursionError):
        answered = answer_id(body) if in_session else None
        if answered is not None:
            # A malformed answer to a request of the session's (a person's
            # confirmation, say): the session hears it as an error answer, so
            # what waits on it ends instead of waiting for one that never comes.
            unreadable = unreadable_answer(answered).model_dump_json(by_alias=True).encode()
            return _Envelope(method=None, request_id=None, body=unreadable)
        return _error("Invalid Request", 400, types.INVALID_REQUEST, request_id=request_id)
    if isinstance(message, types.JSONRPCRequest):
        return _Envelope(method=message.method, request_id=message.id)
    if isinstance(message, types.JSONRPCNotification):
        if has_id(body):
            # A request whose id is not a string or an integer, which the
            # parser took for a notification: the transport would accept it
            # (202) and nobody would ever answer it.
            return _error("Invalid Request", 400, types.INVALID_REQUEST)
        return _Envelope(method=message.method, request_id=None)
    return _Envelope(method=None, request_id=None)


def _request_id(raw: object) -> types.RequestId | None:
    if isinstance(raw, dict):
        candidate = cast("dict[str, object]", raw).get("id")
        if isinstance(candidate, str | int) and not isinstance(candidate, bool):
            return candidate
    return None


@overload
def http_app(
    make_runtime: App[Any, Any, Any] | MakeRuntime[None],
    *,
    authenticate: None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
    token_verifier: None = None,
    auth: None = None,
    principal_from_token: None = None,
    request_state_security: RequestStateSecurity | None = None,
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[None]: ...
@overload
def http_app(
    make_runtime: App[Any, Any, P] | MakeRuntime[P],
    *,
    authenticate: Authenticate[P],
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
    token_verifier: None = None,
    auth: None = None,
    principal_from_token: None = None,
    request_state_security: RequestStateSecurity | None = None,
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[P]: ...
@overload
def http_app(
    make_runtime: App[Any, Any, AccessToken] | MakeRuntime[AccessToken],
    *,
    authenticate: None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
    token_verifier: TokenVerifier,
    auth: AuthSettings,
    principal_from_token: None = None,
    request_state_security: RequestStateSecurity | None = None,
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[AccessToken]: ...
@overload
def http_app(
    make_runtime: App[Any, Any, P] | MakeRuntime[P],
    *,
    authenticate: None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
    token_verifier: TokenVerifier,
    auth: AuthSettings,
    principal_from_token: Callable[[AccessToken], P | Awaitable[P]],
    request_state_security: RequestStateSecurity | None = None,
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[P]: ...
def http_app(
    make_runtime: App[Any, Any, Any] | MakeRuntime[Any],
    *,
    authenticate: Authenticate[Any] | None = None,
    allowed_origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] = (),
    token_verifier: TokenVerifier | None = None,
    auth: AuthSettings | None = None,
    principal_from_token: Callable[[AccessToken], Any] | None = None,
    request_state_security: RequestStateSecurity | None = None,
    name: str = "agentfx",
    version: str = __version__,
) -> HttpApp[Any]:
    """An ASGI app serving Streamable HTTP at ``/mcp``: 2025-11-25 sessions and sessionless 2026-07-28 requests.

    Args:
        make_runtime: What each principal is served, one of two kinds:

            - An :class:`agentfx.App`: one shared application. Its program
              starts with the ASGI app and every principal gets a runtime
              bound to it, so everyone acts on the same Model. The principal
              is the one ``authenticate`` or the token proved, or the App's
              own without either; of the tokens that prove one principal,
              ``authorize`` sees the one that expires last.
            - ``make_runtime(principal)``, returning an async context manager
              that yields the principal's runtime: entered the first time the
              principal is seen, shared by all of its sessions and requests,
              and exited :data:`SESSION_IDLE_TIMEOUT` after the last of them
              ended. Principals must be hashable (they key that cache).
              ``lambda principal: app.run(principal=principal)`` gives every
              principal its own program, so each has a Model of its own.
              Without ``authenticate`` or a token verifier it is called with
              ``None``, which ``app.run(principal=None)`` would take as the
              principal: write ``lambda _: app.run()`` to keep the App's own.
              It is given the first token that proves the principal; a
              refreshed one is not handed to the runtime it made.
        authenticate: ``authenticate(request)`` (sync or async) returns the
            request's principal, or ``None`` to refuse it with 401. Every
            request is authenticated, within :data:`AUTHENTICATE_TIMEOUT`
            (503 after); one naming a session must authenticate as the
            principal that opened it. It may read the body (to check a
            signature over it, say): the request is served the same body
            after. Without it (and without a token
            verifier) every caller is anonymous and nothing is checked.
        allowed_origins: The ``Origin`` headers allowed, exact
            (``"https://app.example"``) or with any port
            (``"https://app.example:*"``); requests with any other get 403.
            Empty (the default), loopback origins are allowed; listed, only
            those listed are (add ``"http://localhost:*"`` to keep loopback).
            A request without ``Origin`` is never refused for it.
        allowed_hosts: The ``Host`` headers allowed, against DNS rebinding,
            in the same form (``"mcp.example"``, ``"mcp.example:*"``); any
            other gets 421. Empty (the default), loopback hosts only: served
            on any other address, list the names clients use to reach it.
        token_verifier: OAuth 2.1 bearer tokens instead of ``authenticate``:
            the SDK's ``TokenVerifier``, which checks a token's signature,
            issuer and audience and returns its ``AccessToken``. A missing,
            refused or expired token (or, with
            ``auth.validate_token_resource``, one issued for another
            resource) gets 401, a token without ``auth.required_scopes`` 403,
            both with ``WWW-Authenticate`` naming the resource metadata.
            A GET or ``subscriptions/listen`` stream ends at its token's
            ``expires_at`` (a call in flight does not).
        auth: The SDK's ``AuthSettings`` for the token verifier:
            ``issuer_url`` (the authorization server) and
            ``resource_server_url`` (this endpoint's URL) are required; the
            protected-resource metadata is served at its RFC 9728 path.
        principal_from_token: ``principal_from_token(access_token)`` (sync or
            async): the principal a verified token proves, which ``authorize``
            sees. By default the ``AccessToken`` itself, so
            ``req.principal.scopes`` holds its scopes.
        request_state_security: How the ``requestState`` of a 2026-07-28
            confirmation is sealed (the SDK's ``RequestStateSecurity``), for
            every principal's server. By default the app makes a key of its
            own when it is made, so a retry must come back to the process
            that asked. Several processes serving one contract pass the same
            ``RequestStateSecurity(keys=[...])``, and a retry may reach any of
            them. Every state is bound to the principal it was sealed for (by
            a digest of the principal's type and JSON encoding, beside the
            policy's own ``bind_principal``), so another principal's retry is
            refused. The app keeps a single-use ledger per principal that
            outlives the principal's servers: a state is redeemed at most
            once in each process until it expires, a pending one outlives
            its principal's server (gone idle, say, while the person
            decides), and a principal that fills its ledger
            (:data:`~agentfx.mcp._confirm.LEDGER_CAPACITY` states in their
            lifetime) has only its own retries refused.
        name: The server name reported to clients.
        version: The server version reported to clients; agentfx's own by default.

    Raises:
        ContractError: ``authenticate`` and ``token_verifier`` together, or
            ``auth`` or ``principal_from_token`` without ``token_verifier``,
            or a token verifier without ``auth.resource_server_url``; an
            App whose contract has both a context projection and a resource
            named ``context`` (they would share ``app://context``); or an
            argument of the wrong kind: one string for ``allowed_origins`` or
            ``allowed_hosts`` (write a list), a hook or ``make_runtime`` that
            is not callable, ``auth`` that is not ``AuthSettings``,
            ``request_state_security`` that is not ``RequestStateSecurity``,
            ``name`` or ``version`` that is not a string.

    Serve it with any ASGI server, bound to loopback unless you mean otherwise
    (``uvicorn.run(http_app(app), host="127.0.0.1", port=8000,
    timeout_graceful_shutdown=5)``), or mount it
    under a prefix of a larger ASGI app (Starlette's ``Mount("/agent", app=...)``
    serves ``/agent/mcp``; run the mounted app's :meth:`HttpApp.running` in the
    outer app's lifespan, since a mount receives none). uvicorn runs the
    lifespan's shutdown, which ends the sessions and the calls in flight, only
    once every connection has closed, and a session's GET stream, a listen
    stream or a call waiting on its completion stays open: without
    ``timeout_graceful_shutdown`` it would wait for them forever. (``agentfx
    serve`` runs :meth:`HttpApp.running` around a server with its lifespan off
    instead, so every open request is answered as it stops.) Non-browser clients
    only for now: CORS preflight requests are not answered, so a browser page
    on another origin cannot call the endpoint.

    >>> import msgspec, agentfx
    >>> from agentfx.app import App
    >>> class Pinged(msgspec.Struct, tag=True):
    ...     pass
    >>> pings = App(agentfx.define(agentfx.expose(Pinged, agentfx.variant(Pinged, "Ping"))), 0, lambda n, _: n + 1)
    >>> asgi = http_app(pings, allowed_origins=["https://app.example"], name="pings")
    >>> asgi.session_count, asgi.principal_count
    (0, 0)
    """
    return HttpApp(
        make_runtime,
        authenticate=authenticate,
        allowed_origins=allowed_origins,
        allowed_hosts=allowed_hosts,
        token_verifier=token_verifier,
        auth=auth,
        principal_from_token=principal_from_token,
        request_state_security=request_state_security,
        name=name,
        version=version,
    )
