"""The MCP server for one bound runtime, on the SDK's low-level ``Server``.

This layer owns the MCP face of a runtime over one connection: ``tools/list``
and ``tools/call`` through :mod:`agentfx.tools` (which decides what an agent
is shown and told; :mod:`._wire` spells it in MCP's types), resources at
``app://<name>`` and ``app://context``, and everything MCP says between
requests: ``notifications/tools/list_changed`` when the available set
changes (at once, before the answer, when a call changed it; debounced for
changes from elsewhere), ``notifications/progress`` while a call waits for
its completion, ``notifications/resources/updated`` for subscribed resources
whose encoded value changed (``resources/subscribe`` on 2025-11-25,
``subscriptions/listen`` on 2026-07-28), all announced only when the host can
report Model changes. When a change from elsewhere is compared, and for whom,
is :mod:`agentfx.mcp._watch`'s: one debounced watcher per server, shared by its
connections, fanned out to those that can hear a change. A client's
cancellation becomes an abort of the invocation's signal, and a person is
asked when ``authorize`` answers ``Confirm`` (:mod:`agentfx.mcp._confirm`).

A call runs inline in its request handler, shielded, with no task of its own:
its abort controller is registered on the connection (:class:`InFlight`) and
aborted by the client's ``notifications/cancelled`` (a server middleware), by
the end of the connection's read stream (:meth:`AgentServer.run`), or, for a
call awaiting its completion, by the one task that reports its progress. An
aborted call gets :data:`ABORT_GRACE` seconds to settle before its shield is
cancelled.

It deliberately knows nothing of transports (stdio and HTTP wrap the server it
returns), of the pipeline's steps, of audit, or of how outcomes are worded: it
calls the runtime's public surface and :func:`agentfx.tools.reply`. Nothing a
hook or the host raises ever reaches a client: the SDK would put the
exception text on the wire, so every handler catches and maps it itself.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, nullcontext
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.runner import serve_dual_era_loop
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated, ToolsListChanged
from mcp.shared.direct_dispatcher import DIRECT_TRANSPORT_KIND
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from returns.pipeline import is_successful
from returns.result import Failure, Result, Success
from starlette.requests import Request

from .. import __version__
from .._logs import withhold
from ..errors import ContractError, DispatchError, echo, is_failure
from ..invocation import AbortController, Invocation, new_invocation_id
from ..runtime import AgentRuntime
from .._toolcall import offered, offered_views
from . import _confirm, _wire
from ._relay import ReadRelay
from ._watch import LIST_CHANGED_DEBOUNCE, Burst, ListWatch, ResourceWatch, Watcher

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession
    from mcp.shared._stream_protocols import ReadStream, WriteStream

    from ..contract import Definition
    from ..docs import MessageDescriptor

__all__ = ["ABORT_GRACE", "LIST_CHANGED_DEBOUNCE", "PROGRESS_INTERVAL", "AgentServer", "Connection", "InFlight", "request_calls", "server"]

_logger = logging.getLogger("agentfx.mcp")

PROGRESS_INTERVAL = 10.0
"""Seconds between ``notifications/progress`` while a call waits for its completion (clients time out near 60 s)."""

DELIVERY_WAIT = 1.0
"""At most this long a call's answer waits for its list change to leave on the client's listen streams."""

ABORT_GRACE = 2.0
"""Seconds an aborted call may take to settle before its shield is cancelled: a wait its signal does not reach cannot hold a stopping server."""

_REQUEST_CALLS: ContextVar[InFlight | None] = ContextVar("agentfx_mcp_request_calls", default=None)
"""Where a call registers when its transport aborts it per request rather than per connection (see :func:`request_calls`)."""

_CLIENT_CANCELLED = "The MCP client cancelled the request"
_CONNECTION_CLOSED = "The MCP connection closed"

_INTERNAL = "Internal error"


class InFlight:
    """The calls one connection is running: each one's abort controller and shield, with its JSON-RPC request id.

    A call runs inline in its request handler, shielded, so that only its
    signal can cut the pipeline short; what would otherwise be an outer
    cancellation of the handler reaches it here instead, as an abort:
    :meth:`cancel` for a client's ``notifications/cancelled``, :meth:`close`
    when the connection ends or the server stops. An aborted call is also
    given :data:`ABORT_GRACE` seconds to settle, after which its shield is
    cancelled: the signal cancels every wait of the pipeline's own, and this
    bounds anything else the call might be waiting on.

    Every call leaves on every path (the handler's ``finally``), so the table
    holds only requests in flight. It starts no task.

    >>> async def main() -> None:
    ...     calls, controller = InFlight(), AbortController()
    ...     calls.enter(controller, "7", anyio.CancelScope(shield=True))
    ...     calls.cancel(7, "stop")  # the client may echo "7" as 7
    ...     print(controller.signal.reason, len(calls))
    ...     calls.leave(controller)
    ...     print(len(calls))
    >>> anyio.run(main)
    stop 1
    0
    """

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[AbortController, tuple[types.RequestId | None, anyio.CancelScope | None]] = {}

    def __len__(self) -> int:
        return len(self._calls)

    def enter(
        self, controller: AbortController, request_id: types.RequestId | None, shield: anyio.CancelScope | None
    ) -> None:
        """A call starts; ``shield`` is the scope it runs in (``None``: it runs unshielded)."""
        self._calls[controller] = (request_id, shield)

    def leave(self, controller: AbortController) -> None:
        """The call settled (or was cut short)."""
        self._calls.pop(controller, None)

    def cancel(self, request_id: types.RequestId, reason: object) -> None:
        """Abort the call the client knows as ``request_id`` (the newest, should it have reused an id)."""
        # The dispatcher's own correlation: a client may echo the id 7 as "7".
        wanted = coerce_request_id(request_id)
        for controller, (held, shield) in reversed(self._calls.items()):
            if held is not None and coerce_request_id(held) == wanted:
                _abort(controller, shield, reason)
                return

    def close(self, reason: object) -> None:
        """Abort every call in flight: the connection is ending."""
        for controller, (_, shield) in list(self._calls.items()):
            _abort(controller, shield, reason)


def _abort(controller: AbortController, shield: anyio.CancelScope | None, reason: object) -> None:
    controller.abort(reason)
    if shield is not None:
        deadline = anyio.current_time() + ABORT_GRACE
        if deadline < shield.deadline:
            shield.deadline = deadline


class _ListenStream:
    """One open ``subscriptions/listen`` stream: whether it wants tool list changes (and which resources), and how many it was sent."""

    __slots__ = ("moved", "open", "sent", "tools", "uris")

    def __init__(self, tools: bool, uris: Sequence[str] = ()) -> None:
        self.tools = tools
        self.uris = frozenset(uris)
        self.sent = 0
        self.open = True
        self.moved = anyio.Event()

    def note(self, notification: object) -> None:
        if isinstance(notification, types.ToolListChangedNotification):
            self.sent += 1
            self.wake()

    def close(self) -> None:
        self.open = False
        self.wake()

    def wake(self) -> None:
        self.moved.set()
        self.moved = anyio.Event()


class Connection:
    """What one client connection shares across its requests.

    One lifespan of the server is one connection on stdio and in-process;
    each HTTP session is one, and so are a principal's sessionless requests
    together. The session that last listed tools is the one a
    handshake-era client is notified on; a 2026-era client opts in through
    ``subscriptions/listen`` instead.

    A connection is in its server's :class:`~agentfx.mcp._watch.Watcher`
    fan-out only while something can hear a change: a listen stream is open,
    or it listed tools (or subscribed to a resource) and the transport can
    carry a message the server starts (always on stdio and in-process; on
    HTTP while the session's GET stream is open). Otherwise a Model change
    costs it nothing, and its baseline stays what its client was last shown:
    a listing answered (or a tools listen stream opened) while it hears
    nothing becomes the baseline, since no announcement could have kept the
    old one current.
    What it needs only once it listens (listen streams, subscribed values) is
    made then.
    """

    __slots__ = (
        "_bus",
        "_closed",
        "_handler",
        "_resource_session",
        "_resource_uris",
        "_resources",
        "_session",
        "_standalone",
        "_streams",
        "_tools",
        "_watcher",
        "calls",
        "descriptors",
        "handshaken",
        "runtime",
    )

    def __init__(
        self,
        runtime: AgentRuntime[Any, Any],
        descriptors: Mapping[str, MessageDescriptor],
        watcher: Watcher | None,
        *,
        standalone: bool = True,
    ) -> None:
        self.runtime = runtime
        self.calls = InFlight()
        # Shared by every connection of the server: they are the contract's, built once.
        self.descriptors = descriptors
        self._watcher = watcher
        # How many ways there are to send the client a message it did not ask for.
        self._standalone = 1 if standalone else 0
        self._session: ServerSession | None = None
        self._resource_session: ServerSession | None = None
        self._resource_uris: set[str] | None = None
        self._resources: ResourceWatch | None = None
        self._streams: set[_ListenStream] | None = None
        self._bus: InMemorySubscriptionBus | None = None
        self._handler: ListenHandler | None = None
        self._closed = False
        # Whether the client's ``initialize`` was answered with a result (not
        # an error): an HTTP session is kept only once it was.
        self.handshaken = False
        # What the client was shown of the tool list: made by its first
        # listing (or tools listen stream), before which nothing is compared;
        # taken again by a listing (or tools listen stream) while the client
        # heard of no change.
        self._tools: ListWatch | None = None

    def reading(self, stream: ReadStream[SessionMessage | Exception]) -> ReadStream[SessionMessage | Exception]:
        """``stream``, aborting this connection's calls in flight once it ends or is cancelled.

        The read side of a connection ends (the client went away) or is
        cancelled (the server is stopping) before its message loop waits for
        its handlers: a shielded call would otherwise be waited for as long
        as its host takes.
        """
        return _Closing(stream, self.calls)

    def available_names(self) -> list[str]:
        return _available_names(self.runtime)

    # --- who listens ------------------------------------------------------------------

    def stream_opened(self) -> None:
        """A stream for messages the server starts opened (an HTTP session's GET stream)."""
        self._standalone += 1
        if self._standalone == 1 and self._resources is not None and self._resource_uris:
            # Its subscriptions were heard by nobody until now (a Model change
            # cost them nothing): the next read of each is what the client holds.
            self._resources.resume(self._resource_uris)
        self._refresh()

    def stream_closed(self) -> None:
        """That stream closed."""
        self._standalone -= 1
        self._refresh()

    def close(self) -> None:
        """The connection ended: it hears of nothing more."""
        self._closed = True
        self._refresh()

    def _refresh(self) -> None:
        watcher = self._watcher
        if watcher is None:
            return  # the host cannot report changes: nothing is ever announced
        heard = self._standalone > 0 and (
            (self._session is not None and self._tools is not None) or bool(self._resource_uris)
        )
        wanted = not self._closed and (heard or bool(self._streams))
        # The watcher keeps who listens; joining or leaving twice changes nothing.
        (watcher.join if wanted else watcher.leave)(self)

    def _hears_tool_changes(self) -> bool:
        """Whether a tool list change from elsewhere would reach the client now (so the watcher keeps its baseline current)."""
        if self._watcher is None:
            # Nothing from elsewhere is ever announced; a call's own check,
            # which can always reach its client, is all that moves the baseline.
            return True
        if any(stream.tools for stream in self._streams or ()):
            return True
        return self._standalone > 0 and self._session is not None

    def _hears_resource_changes(self, uri: str) -> bool:
        """Whether a change of the resource at ``uri`` would reach the client now (so the watcher keeps its value current)."""
        if self._watcher is None:
            return True  # nothing is ever announced, and nothing is subscribed
        if any(uri in stream.uris for stream in self._streams or ()):
            return True
        return self._standalone > 0 and self._resource_uris is not None and uri in self._resource_uris

    async def notice(self, burst: Burst) -> None:
        """A burst of Model changes: compare what the client was told and announce the differences."""
        if self._tools is not None:
            await self._tools.notice(burst)
        if self._resources is not None and self._resources.subscribed:
            await self._resources.notice(burst)

    # --- the tool list ----------------------------------------------------------------

    def listed(self, ctx: ServerRequestContext[Connection], names: Sequence[str]) -> None:
        # Whether the client heard of changes up to this listing: if not, no
        # announcement kept its baseline current, and this listing is it.
        hearing = self._hears_tool_changes()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._session = ctx.session
        self._shown(names, hearing=hearing)
        self._refresh()

    async def after_call(self, ctx: ServerRequestContext[Connection]) -> None:
        """Announce, before the call is answered, that the call changed which tools are available.

        Clients re-list between turns: a notification that arrives after the
        answer is a turn late. A handshake-era client hears it on the call's
        own stream; a 2026-era client on its listen streams, and the answer
        waits (boundedly) until it has left on them.
        """

        async def announce() -> None:
            if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                await ctx.session.send_notification(types.ToolListChangedNotification(), related_request_id=ctx.request_id)
            await self._publish_tools_changed()

        if self._tools is not None:
            await self._tools.check(announce)

    def _shown(self, names: Sequence[str], *, hearing: bool) -> None:
        if self._tools is None:
            self._tools = ListWatch(self.available_names, self._announce)
        if hearing:
            self._tools.listed(names)
        else:
            self._tools.reset(names)

    async def _publish_tools_changed(self) -> None:
        bus = self._bus
        if bus is None:
            return  # no listen stream was ever opened
        streams = [stream for stream in self._streams or () if stream.tools]
        before = {stream: stream.sent for stream in streams}
        await bus.publish(ToolsListChanged())
        with anyio.move_on_after(DELIVERY_WAIT):
            for stream in streams:
                while stream.open and stream.sent == before[stream]:
                    await stream.moved.wait()

    async def _announce(self) -> None:
        if self._bus is not None:
            await self._bus.publish(ToolsListChanged())
        session = self._session
        if session is not None:
            try:
                await session.send_tool_list_changed()
            except Exception:
                # The connection went away; a later listing registers its successor.
                self._session = None

    # --- resources ------------------------------------------------------------------

    def knows(self, uri: str) -> bool:
        """Whether ``uri`` names a resource of this contract (without reading it)."""
        if uri == _wire.CONTEXT_URI and self.runtime.has_context:
            return True
        name = _wire.resource_name(uri)
        return name is not None and any(d.name == name for d in self.runtime.resources.list())

    def _watched_resources(self) -> ResourceWatch:
        watch = self._resources
        if watch is None:
            watch = self._resources = ResourceWatch(partial(_encoded, self.runtime), self._announce_resource)
        return watch

    def subscribe_resource(self, ctx: ServerRequestContext[Connection], uri: str) -> None:
        self._resource_session = ctx.session
        uris = self._resource_uris
        if uris is None:
            uris = self._resource_uris = set()
        if uri not in uris:
            uris.add(uri)
            self._watched_resources().subscribe(uri)
        self._refresh()

    def served(self, uri: str, result: types.ReadResourceResult) -> None:
        """The client was just served ``result`` for ``uri``: while it hears nothing of ``uri``, changes are measured from it.

        No announcement could have kept the subscribed value current while
        nothing could carry one: once the client hears again, a change back
        to the value it subscribed at is news to a client that re-read in
        between. So is its first read once it hears again, before a burst
        compared the URI (what changed meanwhile was never announced, and the
        client now holds it); other reads while it hears change nothing, as a
        listing does not.
        """
        watch = self._resources
        if watch is not None and (not self._hears_resource_changes(uri) or watch.resuming(uri)):
            watch.reset(uri, _encoding(result))

    def unsubscribe_resource(self, uri: str) -> None:
        uris = self._resource_uris
        if uris is not None and uri in uris:
            uris.discard(uri)
            self._watched_resources().unsubscribe(uri)
            self._refresh()

    async def _announce_resource(self, uri: str) -> None:
        if self._bus is not None:
            await self._bus.publish(ResourceUpdated(uri=uri))
        session = self._resource_session
        if session is not None and self._resource_uris is not None and uri in self._resource_uris:
            try:
                await session.send_resource_updated(uri)
            except Exception:
                self._resource_session = None

    # --- subscriptions/listen --------------------------------------------------------

    async def serve_listen(
        self, ctx: ServerRequestContext[Connection], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """One listen stream, served by the SDK's handler; agentfx counts what it sends and watches its resources.

        The handler acknowledges what it is handed, so it is handed only what
        this stream will carry: the known resource URIs, each once, in the
        client's order (an unknown one is left out, as ``resources/subscribe``
        refuses it), and no list changes but the tools' (the resources are
        fixed by the contract and there are no prompts).
        """
        wanted = params.notifications
        if wanted.tools_list_changed and not self._hears_tool_changes():
            # Opening the stream is this era's way of having listed (the client
            # re-lists once it is open): differences from here on are news to
            # the client, whatever it was shown while it heard nothing.
            try:
                self._shown(self.available_names(), hearing=False)
            except Exception:
                _logger.exception("listing the available capabilities failed")
        uris = [uri for uri in dict.fromkeys(wanted.resource_subscriptions or ()) if self.knows(uri)]
        honoured = wanted.model_copy(
            update={"resource_subscriptions": uris, "prompts_list_changed": None, "resources_list_changed": None}
        )
        stream = _ListenStream(tools=bool(wanted.tools_list_changed), uris=uris)
        session = copy.copy(ctx.session)
        send = ctx.session.send_notification

        async def counted(notification: types.ServerNotification, related_request_id: types.RequestId | None = None) -> None:
            await send(notification, related_request_id)
            stream.note(notification)

        # The SDK's handler writes the stream; a copy of the session that counts
        # what it wrote lets a call's answer wait for its list change to leave.
        setattr(session, "send_notification", counted)  # noqa: B010
        handler = self._handler
        if handler is None:
            # Made with the first listen stream: a connection that never opens
            # one (every handshake-era one) holds no bus.
            self._bus = InMemorySubscriptionBus()
            handler = self._handler = ListenHandler(self._bus)
        streams = self._streams
        if streams is None:
            streams = self._streams = set()
        streams.add(stream)
        resources = self._watched_resources() if uris else None
        for uri in uris:
            assert resources is not None
            resources.subscribe(uri)
        self._refresh()
        try:
            return await handler(dataclasses.replace(ctx, session=session), params.model_copy(update={"notifications": honoured}))
        finally:
            for uri in uris:
                assert resources is not None
                resources.unsubscribe(uri)
            streams.discard(stream)
            stream.close()
            self._refresh()


class AgentServer(Server[Connection]):
    """The low-level server, advertising each ``listChanged`` exactly when it can keep the promise.

    The SDK derives ``listChanged`` from options its callers (the in-process
    client among them) build without arguments on the 2025-11-25 handshake,
    and from whether ``subscriptions/listen`` is served on 2026-07-28's
    ``server/discover``; agentfx knows whether the notification can ever
    come, so it says so itself, the same in every era. ``resources.listChanged``
    is always false: the resources are fixed by the contract, so
    ``notifications/resources/list_changed`` is never sent (a resource whose
    *value* changed is ``resources/updated``, promised by ``subscribe``).

    Its lifespan is one connection. A transport serving many connections over
    one server (HTTP) makes each with :meth:`connect` instead, and lends the
    shared watcher a task group once, with :meth:`watching`.
    """

    notifies_tool_changes = True
    watcher: Watcher | None = None
    agent_runtime: AgentRuntime[Any, Any] | None = None
    descriptors: Mapping[str, MessageDescriptor] = {}

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        # The handshake's options and the discover answer are both built here,
        # so each promise is made once for every era, whatever options a
        # caller passed (agentfx's transports pass none).
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        update: dict[str, Any] = {}
        if capabilities.tools is not None:
            update["tools"] = capabilities.tools.model_copy(update={"list_changed": self.notifies_tool_changes})
        if capabilities.resources is not None:
            update["resources"] = capabilities.resources.model_copy(update={"list_changed": False})
        return capabilities.model_copy(update=update)

    def connect(self, *, standalone: bool = True) -> Connection:
        """A new connection's state; :meth:`Connection.close` it when the connection ends.

        Args:
            standalone: Whether the transport always carries a message the
                server starts (stdio, in-process); an HTTP session's does only
                while its GET stream is open, which it reports itself.
        """
        assert self.agent_runtime is not None, "made by server()"
        return Connection(self.agent_runtime, self.descriptors, self.watcher, standalone=standalone)

    def watching(self) -> AbstractAsyncContextManager[None]:
        """Lend the shared watcher a task group while the block runs."""
        watcher = self.watcher
        return nullcontext() if watcher is None else watcher.hosting()

    async def run(
        self,
        read_stream: ReadStream[SessionMessage | Exception],
        write_stream: WriteStream[SessionMessage],
        initialization_options: InitializationOptions,
        raise_exceptions: bool = False,
    ) -> None:
        """The SDK's ``Server.run`` (one connection over a pair of streams), ending every call in flight as it ends (:meth:`Connection.reading`)."""
        async with self.lifespan(self) as connection:
            await serve_dual_era_loop(
                self,
                connection.reading(read_stream),
                write_stream,
                lifespan_state=connection,
                init_options=initialization_options,
                raise_exceptions=raise_exceptions,
            )


class _Closing(ReadRelay[SessionMessage | Exception]):
    """A connection's read stream that aborts the connection's calls in flight once it ends or is cancelled."""

    __slots__ = ("_calls",)

    def __init__(self, stream: ReadStream[SessionMessage | Exception], calls: InFlight) -> None:
        super().__init__(stream)
        self._calls = calls

    async def receive(self) -> SessionMessage | Exception:
        try:
            message = await self._stream.receive()
        except BaseException:
            self._calls.close(_CONNECTION_CLOSED)
            raise
        return _bodiless(message)


def _bodiless(message: SessionMessage | Exception) -> SessionMessage | Exception:
    """``message`` with an HTTP request context that no longer holds the request's body.

    The SDK's session transport attaches the Starlette ``Request`` the
    message came in, with the raw body it cached (and its body limit's copy),
    and the dispatcher keeps the last message it read until the next one
    comes: an idle session would hold its last request's bytes, two or three
    times over, for as long as it stays open. Handlers read only the
    request's scope (its headers), so a ``Request`` over the same scope
    serves them.
    """
    if not isinstance(message, SessionMessage):
        return message
    metadata = message.metadata
    if not isinstance(metadata, ServerMessageMetadata):
        return message
    request = metadata.request_context
    if not isinstance(request, Request):
        return message
    # In place: the transport makes one metadata per message, for this message alone.
    metadata.request_context = Request(request.scope)
    return message


@contextmanager
def request_calls(calls: InFlight) -> Generator[InFlight]:
    """While the block runs, the calls of requests it serves register in ``calls``, not their connection's.

    For a transport that can cancel one request without a message (a
    2026-07-28 HTTP request whose client closes its response stream, a
    server stopping): it aborts them with ``calls.close(reason)`` before it
    cancels the request. Handlers started in the block inherit it.
    """
    token = _REQUEST_CALLS.set(calls)
    try:
        yield calls
    finally:
        _REQUEST_CALLS.reset(token)


async def _connection_events(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: what the connection must hear of a client's cancellation or handshake.

    A ``notifications/cancelled`` aborts the call it names: the dispatcher
    cancels the request's scope itself, which a shielded call does not see;
    its controller, registered under the request id, is what must hear of
    it. Notifications of every era pass here first. An ``initialize``
    answered with a result (a refused one raises through here) marks the
    connection :attr:`Connection.handshaken`.
    """
    method = ctx.method
    if method == "initialize":
        result = await call_next(ctx)
        connection = ctx.lifespan_context
        if isinstance(connection, Connection):
            connection.handshaken = True
        return result
    if ctx.request_id is None and method == "notifications/cancelled":
        connection = ctx.lifespan_context
        request_id = cancelled_request_id_from_params(ctx.params)
        if isinstance(connection, Connection) and request_id is not None:
            connection.calls.cancel(request_id, _CLIENT_CANCELLED)
    return await call_next(ctx)


def server(
    runtime: AgentRuntime[Any, Any],
    *,
    name: str = "agentfx",
    version: str = __version__,
    request_state_security: RequestStateSecurity | None = None,
) -> Server[Connection]:
    """The runtime as an MCP server: the SDK's low-level ``Server``.

    Connect it in-process with ``mcp.Client(server(runtime))``, over stdio
    with :func:`serve_stdio`, or over Streamable HTTP with :func:`http_app`.

    A capability whose ``authorize`` answers ``Confirm`` asks the person
    behind the client: in band with a form elicitation on a 2025-11-25
    session, with an ``InputRequiredResult`` on a 2026-07-28 request, and
    otherwise answers that the call needs confirmation. A client's answer is
    the client's word, not proof that a person saw the prompt.

    Args:
        runtime: A bound agentfx runtime.
        name: The server name reported to clients; also the audience of every
            sealed ``requestState``.
        version: The server version reported to clients; agentfx's own by default.
        request_state_security: How the 2026-07-28 ``requestState`` of a
            pending confirmation is sealed (the SDK's ``RequestStateSecurity``).
            By default a key made now, known to this server only: a retry must
            come back to it (a restart or another worker refuses the state).
            Several processes serving one contract pass a shared
            ``RequestStateSecurity(keys=[...])``, and should bind the principal
            (its ``bind_principal``); each server keeps its own single-use
            ledger, so there a state could be redeemed once per process until
            it expires.

    Raises:
        ContractError: ``runtime`` is not a bound runtime (an ``App`` is
            served as ``async with app.run() as runtime``), ``name`` or
            ``version`` is not a string, ``request_state_security`` is not a
            ``RequestStateSecurity``, or the contract has both a context
            projection and a resource named ``context``, which would share the
            URI ``app://context``.

    >>> import anyio, mcp, msgspec, agentfx
    >>> from agentfx.app import App
    >>> class Pinged(msgspec.Struct, tag=True):
    ...     pass
    >>> pings = App(agentfx.define(agentfx.expose(Pinged, agentfx.variant(Pinged, "Ping"))), 0, lambda n, _: n + 1)
    >>> async def main() -> None:
    ...     async with pings.run() as runtime, mcp.Client(server(runtime)) as client:
    ...         print([tool.name for tool in (await client.list_tools()).tools])
    ...         print((await client.call_tool("pinged", {})).content[0].text)
    >>> anyio.run(main)
    ['pinged']
    Dispatched Pinged
    """
    check_served("server()", runtime)
    check_identity("server", name, version)
    sealing = _confirm.security(request_state_security)
    return serve_runtime(runtime, name=name, version=version, sealing=sealing, approvals=_confirm.Approvals(ttl=sealing.ttl))


def withhold_sdk_logs() -> None:
    """Make the SDK's server-side loggers say only their name and level (see :mod:`agentfx._logs`).

    They log what clients sent as it came (a refused ``Host`` header in full,
    a method name of any length): a client could flood the log or forge a
    line in it. The SDK's client logs only what a server sent it: left as it is.
    """
    withhold("mcp", client="mcp.client")


def check_identity(entry: str, name: object, version: object) -> None:
    """Refuse a server name or version that is not a string (every client is told both).

    Raises:
        ContractError: Either is not a string.
    """
    for parameter, given in (("name", name), ("version", version)):
        if not isinstance(given, str):
            raise ContractError(f"{entry}({parameter}=...) takes a string, got {type(given).__name__}")


def check_uris(definition: Definition[Any, Any]) -> None:
    """Refuse a contract two of whose resources would share one ``app://`` URI.

    Only the context projection can clash with a declared resource (names are
    unique within a contract): a resource named ``context`` beside it.

    Raises:
        ContractError: The contract has both a context projection and a resource named ``context``.
    """
    if definition.context is not None and any(resource.name == "context" for resource in definition.resources):
        raise ContractError(
            'The resource "context" would share the URI app://context with the context projection. Rename it.'
        )


def check_served(where: str, runtime: object) -> None:
    """Refuse, naming the entry point ``where``, what is not a bound runtime (an App, a Definition).

    Raises:
        ContractError: ``runtime`` is not an :class:`~agentfx.AgentRuntime`.
    """
    if not isinstance(runtime, AgentRuntime):
        raise ContractError(
            f"{where} takes a bound runtime, got {type(runtime).__name__}: for an App, "
            "write `async with app.run() as runtime:` and serve that runtime"
        )


def serve_runtime(
    runtime: AgentRuntime[Any, Any],
    *,
    name: str,
    version: str,
    sealing: RequestStateSecurity,
    approvals: _confirm.Approvals,
) -> AgentServer:
    """:func:`server`, sealing under ``sealing`` and redeeming confirmations in ``approvals``.

    For an HTTP app, whose principals' servers come and go while the
    process serves: one policy and one ledger for all of them, so a state is
    redeemed at most once per process, and a pending one outlives its
    principal's server.
    """
    check_uris(runtime.definition)
    withhold_sdk_logs()

    @asynccontextmanager
    async def lifespan(_: Server[Connection]) -> AsyncGenerator[Connection]:
        # One connection, which lends the server's watcher a task group while
        # it lasts (the watcher starts only once something listens).
        async with mcp_server.watching():
            connection = mcp_server.connect()
            try:
                yield connection
            finally:
                connection.close()

    async def list_tools(
        ctx: ServerRequestContext[Connection], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # A hook that raises hides its own tool (logged), as in every adapter, not the whole list.
        try:
            tools = [_wire.tool(view) for view in offered_views(runtime, _logger)]
        except Exception:
            _logger.exception("listing the available capabilities failed")
            raise MCPError(code=types.INTERNAL_ERROR, message=_INTERNAL) from None
        ctx.lifespan_context.listed(ctx, [tool.name for tool in tools])
        # The list depends on the Model, so no client may cache it.
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def call_tool(
        ctx: ServerRequestContext[Connection], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        connection = ctx.lifespan_context
        # Before anything runs: a retry's requestState is redeemed here, or refused.
        confirmation = _confirm.plan(ctx, params, approvals)
        controller = AbortController()
        request_id = ctx.request_id
        # Fresh per call: a client may reuse a JSON-RPC id once its request is
        # answered, and the audit must still tell the two calls apart. The
        # request id stays visible, to match an entry with the client's log;
        # bounded, since the client chose it and the audit keeps it.
        call_id = new_invocation_id() if request_id is None else f"{new_invocation_id()}/{echo(str(request_id))}"
        invocation = Invocation(id=call_id, transport="mcp", signal=controller.signal, confirm=confirmation.confirm)
        payload: object = {} if params.arguments is None else params.arguments
        refusal = partial(confirmation.refusal, approvals, params.name, payload)
        # The pipeline runs inline, shielded: a cancellation must reach it as an
        # abort of its signal (which the audit records as a cancellation), never
        # as an outer cancellation that interrupts it mid-step. What would have
        # been that cancellation aborts the registered controller instead: a
        # client's ``notifications/cancelled``, the connection's end, or (while
        # a completion is awaited) the watch beside the call, outside the shield.
        descriptor = connection.descriptors.get(params.name)
        completes = descriptor is not None and descriptor.completion is not None
        shield = anyio.CancelScope(shield=True) if completes or not _structural(ctx) else None
        # A sessionless HTTP request brings its own table: its principal's
        # other clients share the connection, and may use the same request ids.
        calls = _REQUEST_CALLS.get()
        if calls is None:
            calls = connection.calls
        calls.enter(controller, request_id, shield)
        result: types.CallToolResult | types.InputRequiredResult | MCPError | None = None
        try:
            if not completes:
                # The common case: nothing runs beside the call. No shield in
                # process on 2026-07-28, where the client cancels by cancelling
                # this very handler and nothing else would tell a shielded
                # call: the rare call that waits is interrupted (and audited
                # so) rather than held until its host returns.
                with nullcontext() if shield is None else shield:
                    result = await _dispatch(runtime, params.name, payload, invocation, refusal, declined=confirmation.declined)
            else:
                assert shield is not None and descriptor is not None
                async with anyio.create_task_group() as task_group:
                    watch = _Watch(ctx, task_group, controller, shield, descriptor, early=_structural(ctx))
                    try:
                        with shield:
                            result = await _dispatch(
                                runtime, params.name, payload, invocation, refusal, watch.dispatched, confirmation.declined
                            )
                    finally:
                        # Progress ends before the answer: nothing follows a result.
                        watch.stop()
        finally:
            calls.leave(controller)
        # A cancelled request is never answered (it was recorded, as a
        # cancellation). No result: the host outlived the abort's grace and
        # the shield cut it short, which only a cancellation of this request does.
        await anyio.lowlevel.checkpoint_if_cancelled()
        if result is None:
            raise MCPError(code=types.INTERNAL_ERROR, message=_INTERNAL)
        if isinstance(result, MCPError):
            raise result
        if notifies:
            await connection.after_call(ctx)
        return result

    async def list_resources(
        ctx: ServerRequestContext[Connection], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        try:
            resources = [_wire.resource(descriptor) for descriptor in runtime.resources.list()]
            if runtime.has_context:
                resources.append(_wire.context_resource())
        except Exception:
            _logger.exception("listing the resources failed")
            raise MCPError(code=types.INTERNAL_ERROR, message=_INTERNAL) from None
        return types.ListResourcesResult(resources=resources, ttl_ms=0, cache_scope="private")

    async def list_resource_templates(
        ctx: ServerRequestContext[Connection], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        # Every resource has a fixed URI, but a client of the resources
        # capability may ask for templates: it is told there are none.
        return types.ListResourceTemplatesResult(resource_templates=[], ttl_ms=0, cache_scope="private")

    async def read_resource(
        ctx: ServerRequestContext[Connection], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            read = _read(runtime, params.uri)
        except Exception:
            _logger.exception("reading the resource %r failed", echo(params.uri))
            raise MCPError(code=types.INTERNAL_ERROR, message=_INTERNAL) from None
        if not is_successful(read):
            raise _wire.unknown_resource(params.uri)
        result = read.unwrap()
        # What the client is shown now is, while it hears nothing of the URI,
        # what its subscription is measured from (the value just read: no second read).
        ctx.lifespan_context.served(params.uri, result)
        return result

    async def subscribe_resource(
        ctx: ServerRequestContext[Connection], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        connection = ctx.lifespan_context
        if not connection.knows(params.uri):
            raise _wire.unknown_resource(params.uri)
        connection.subscribe_resource(ctx, params.uri)
        return types.EmptyResult()

    async def unsubscribe_resource(
        ctx: ServerRequestContext[Connection], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        ctx.lifespan_context.unsubscribe_resource(params.uri)
        return types.EmptyResult()

    async def listen(
        ctx: ServerRequestContext[Connection], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        return await ctx.lifespan_context.serve_listen(ctx, params)

    # Availability and resources are functions of the Model, so a change can
    # only be noticed when the host reports Model changes or processed
    # Messages. Without either, no notification can ever come: promise none,
    # serve no subscription and no listen stream (a 2026-era client reads that
    # as the same promise).
    notifies = runtime.host.subscribe is not None or runtime.host.observe is not None
    mcp_server = AgentServer(
        name,
        version=version,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe_resource if notifies else None,
        on_unsubscribe_resource=unsubscribe_resource if notifies else None,
        on_subscriptions_listen=listen if notifies else None,
    )
    mcp_server.notifies_tool_changes = notifies
    mcp_server.agent_runtime = runtime
    mcp_server.descriptors = {descriptor.name: descriptor for descriptor in runtime.messages.list()}
    if notifies:
        # One per server (so per runtime), shared by every connection: a Model
        # change costs the connections that listen, not the ones open. The
        # window is read now, so it can be changed before a server is made.
        mcp_server.watcher = Watcher(
            runtime.subscribe,
            partial(_available_names, runtime),
            partial(_encoded, runtime),
            delay=LIST_CHANGED_DEBOUNCE,
        )
    # Seals every requestState this server mints and verifies every one echoed back.
    mcp_server.middleware.append(RequestStateBoundary(sealing, default_audience=name))
    mcp_server.middleware.append(_connection_events)
    return mcp_server


class _Watch:
    """What runs beside a call awaiting its completion, outside its shield: its progress, and the watch on its cancellation.

    **Progress**: once the host has accepted the Message, ``Dispatched <Tag>;
    waiting for <success tags>``, then every :data:`PROGRESS_INTERVAL` while
    the wait goes on. :meth:`stop` ends it before the answer, so no progress
    follows a result. Whether the client sent a progress token is the
    session's to know (on JSON-RPC it rides ``_meta``, in-process it is a
    callback): sending is a no-op for a call that asked for none.

    **The watch.** The call itself runs shielded, so a cancellation of its
    request that comes as a notification or as the connection's end aborts it
    through :class:`InFlight`; one that comes as nothing but a cancelled scope
    (an in-process 2026-07-28 client cancelling its call, a sessionless HTTP
    request cut short at shutdown) lands here instead, in the one task
    outside the shield: it aborts the call's controller and goes on.

    On a transport whose cancellations come as messages, the task starts
    only when there is something to wait for: when the host accepted the
    Message (:meth:`dispatched`, the pipeline's ``on_dispatched``). In process
    (``early``) it starts with the call, since there it is the only thing that
    hears a cancellation, which may come while ``authorize`` or an async host
    is still pending; its progress still waits for the host to accept.
    """

    __slots__ = ("_accepted", "_controller", "_ctx", "_scope", "_shield", "_tag", "_task_group", "_waiting_for")

    def __init__(
        self,
        ctx: ServerRequestContext[Connection],
        task_group: anyio.abc.TaskGroup,
        controller: AbortController,
        shield: anyio.CancelScope,
        descriptor: MessageDescriptor,
        *,
        early: bool = False,
    ) -> None:
        self._ctx = ctx
        self._task_group = task_group
        self._controller = controller
        self._shield = shield
        completion = descriptor.completion
        assert completion is not None, "a watch is made only for a call that awaits its completion"
        self._tag = descriptor.tag
        self._waiting_for = ", ".join(completion["success"]) if "success" in completion else "its declared state"
        self._scope: anyio.CancelScope | None = None
        self._accepted = anyio.Event()
        if early:
            self._start()

    def dispatched(self) -> None:
        """The host accepted the Message: report it, and keep reporting while the completion is awaited."""
        self._accepted.set()
        if self._scope is None:
            self._start()

    def _start(self) -> None:
        self._scope = anyio.CancelScope()
        self._task_group.start_soon(self._run, self._scope)

    def stop(self) -> None:
        """The call settled: no progress after this."""
        if self._scope is not None:
            self._scope.cancel()

    async def _run(self, scope: anyio.CancelScope) -> None:
        try:
            with scope:
                await self._accepted.wait()
                step = 1
                await self._send(step, f"Dispatched {self._tag}; waiting for {self._waiting_for}")
                started = anyio.current_time()
                while True:
                    await anyio.sleep(PROGRESS_INTERVAL)
                    step += 1
                    waited = anyio.current_time() - started
                    await self._send(step, f"Still waiting for {self._waiting_for} after {waited:.0f}s")
        except anyio.get_cancelled_exc_class():
            # Not :meth:`stop` (its scope absorbs its own cancellation): the
            # request was cancelled from outside. The shielded call settles
            # once aborted, then the cancellation goes on.
            _abort(self._controller, self._shield, _CLIENT_CANCELLED)
            raise

    async def _send(self, step: int, message: str) -> None:
        try:
            await self._ctx.session.report_progress(step, None, message)
        except Exception:
            # Progress is a courtesy; a client that went away is told by the answer, or not at all.
            _logger.exception("sending progress failed")


def _structural(ctx: ServerRequestContext[Connection]) -> bool:
    """Whether the request came in process on the SDK's direct dispatcher, where a cancellation is only a cancelled scope.

    The SDK says so only on the request's dispatch context, which the session
    keeps to itself; read defensively, anything else counts as a transport
    whose cancellations arrive as messages or as the connection's end.
    """
    outbound = getattr(ctx.session, "_request_outbound", None)
    transport = getattr(outbound, "transport", None)
    return getattr(transport, "kind", None) == DIRECT_TRANSPORT_KIND


def _available_names(runtime: AgentRuntime[Any, Any]) -> list[str]:
    # What tools/list shows (offered_views), without copying a schema: the watcher asks on every Model change.
    shown = offered(runtime, runtime.definition.capabilities, _logger)
    return [descriptor.name for descriptor, show in zip(runtime.messages.list(), shown, strict=True) if show]


def _encoded(runtime: AgentRuntime[Any, Any], uri: str) -> bytes | None:
    """The JSON encoding of the resource at ``uri``, or ``None`` when it names none; raises what a projection raises."""
    read = _read(runtime, uri)
    return _encoding(read.unwrap()) if is_successful(read) else None


def _encoding(result: types.ReadResourceResult) -> bytes | None:
    """The JSON encoding a read served (what a subscription compares)."""
    contents = result.contents[0]
    return contents.text.encode() if isinstance(contents, types.TextResourceContents) else None


def _read(runtime: AgentRuntime[Any, Any], uri: str) -> Result[types.ReadResourceResult, None]:
    """The resource at ``uri``, or ``Failure(None)`` when it names none; raises what a projection raises."""
    if uri == _wire.CONTEXT_URI and runtime.has_context:
        return Success(_wire.resource_contents(uri, runtime.context()))
    name = _wire.resource_name(uri)
    if name is None:
        return Failure(None)
    return runtime.resources.read(name).map(lambda value: _wire.resource_contents(uri, value)).alt(lambda _: None)


async def _dispatch(
    runtime: AgentRuntime[Any, Any],
    name: str,
    payload: object,
    invocation: Invocation,
    refusal: Callable[[DispatchError], DispatchError | types.InputRequiredResult],
    on_dispatched: Callable[[], None] | None = None,
    declined: str | None = None,
) -> types.CallToolResult | types.InputRequiredResult | MCPError:
    """Run one call to its wire answer; never raises an ``Exception``.

    ``refusal`` decides what answers a refusal (see ``Plan.refusal``): on a
    retry, the confirmation a changed prompt needs, which a 2026-07-28 request
    asks with an ``InputRequiredResult``; ``on_dispatched`` is told
    when the host accepted the Message; ``declined`` is the prompt a
    retry's person said no to (see ``AgentRuntime.messages.attempt``).
    """
    try:
        # Unwrapped: the FutureResult and IOResult containers cost about as
        # much as the rest of a dispatch, and every outcome is mapped here.
        outcome = await runtime.messages.attempt(name, payload, invocation, on_dispatched=on_dispatched, declined=declined)
        if not is_failure(outcome):
            return _wire.success(outcome)
        failure = refusal(outcome)
        if isinstance(failure, types.InputRequiredResult):
            return failure
        try:
            return _wire.failure(failure)
        except MCPError as unknown:
            return unknown
    except Exception:
        _logger.exception("capability %r failed unexpectedly", echo(name))
        return _wire.defect(name)
