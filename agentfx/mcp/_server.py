"""The MCP server for one bound runtime, on the SDK's low-level ``Server``.

This layer owns the MCP face of a runtime: ``tools/list`` from the capabilities
available right now, ``tools/call`` through the runtime's wire path, resources
at ``app://<name>`` and ``app://context``, ``notifications/tools/list_changed``
when the available set changes (announced only when the host can report Model
changes), turning a client's cancellation into an
abort of the invocation's signal, and asking a person when ``authorize``
answers ``Confirm`` (:mod:`agentfx.mcp._confirm`).

It deliberately knows nothing of transports (stdio and HTTP wrap the server it
returns), of the pipeline's steps, or of audit: it calls the runtime's public
surface and maps what comes back. Nothing a hook or the host raises ever
reaches a client: the SDK would put the exception text on the wire, so every
handler catches and maps it itself.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from returns.io import IOSuccess
from returns.pipeline import is_successful
from returns.result import Failure, Result, Success
from returns.unsafe import unsafe_perform_io

from .. import __version__
from ..errors import echo
from ..invocation import AbortController, Invocation, new_invocation_id
from ..tools import tool_views
from . import _confirm, _wire

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from ..runtime import AgentRuntime

__all__ = ["LIST_CHANGED_DEBOUNCE", "server"]

_logger = logging.getLogger("agentfx.mcp")

LIST_CHANGED_DEBOUNCE = 0.05
"""Seconds a burst of Model changes is collected before the available set is compared once."""

_INTERNAL = "Internal error"


class ListWatch:
    """Tells a client its tool list changed: debounced, diffed, and only once it has listed.

    ``changed()`` is called synchronously on every Model change; :meth:`run`
    waits :data:`LIST_CHANGED_DEBOUNCE` after the first change of a burst,
    reads the available names once and calls ``announce`` when they differ
    from the names read at the previous check.

    The client's first listing is where the comparison starts: before it there
    is nothing to contradict, so nothing is sent. Later listings change
    nothing. A client SDK lists on its own (to validate a result, say), so a
    listing says nothing about what the client's code was shown; comparing
    against it would swallow the very change that listing happened to see.

    Args:
        read: The names available right now, in declaration order.
        announce: Sends the notification.
        delay: The debounce window in seconds.
    """

    def __init__(
        self,
        read: Callable[[], Sequence[str]],
        announce: Callable[[], Awaitable[object]],
        *,
        delay: float = LIST_CHANGED_DEBOUNCE,
    ) -> None:
        self._read = read
        self._announce = announce
        self._delay = delay
        self._last: tuple[str, ...] | None = None
        self._dirty = anyio.Event()

    @property
    def last(self) -> tuple[str, ...] | None:
        """The names as of the previous check (or the first listing); ``None`` before the client listed."""
        return self._last

    def listed(self, names: Sequence[str]) -> None:
        """The client has just been shown ``names``; only the first listing counts."""
        if self._last is None:
            self._last = tuple(names)

    def changed(self) -> None:
        """The Model changed; safe to call from any listener on the event loop."""
        self._dirty.set()

    async def run(self) -> None:
        """Watch until cancelled."""
        while True:
            await self._dirty.wait()
            await anyio.sleep(self._delay)
            # A change after this reset starts the next window, so none is lost.
            self._dirty = anyio.Event()
            await self.check()

    async def check(self) -> None:
        """Compare once and announce a difference."""
        if self._last is None:
            return
        try:
            names = tuple(self._read())
        except Exception:
            _logger.exception("reading the available capabilities failed; the tool list was not re-checked")
            return
        if names == self._last:
            return
        self._last = names
        try:
            await self._announce()
        except Exception:
            _logger.exception("announcing a tool list change failed")


class Connection:
    """What one client connection shares across its requests.

    One lifespan of the server is one connection on every transport agentfx
    runs (stdio, in-process, each HTTP session), so the session that last
    listed tools is the one a handshake-era client is notified on; a
    2026-era client opts in through ``subscriptions/listen`` instead.
    """

    def __init__(self, runtime: AgentRuntime[Any, Any]) -> None:
        self.runtime = runtime
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        self._session: ServerSession | None = None
        self.watch = ListWatch(self.available_names, self._announce, delay=LIST_CHANGED_DEBOUNCE)
        self._begin: Callable[[], None] | None = None

    def begin_with(self, begin: Callable[[], None]) -> None:
        """``begin()`` starts watching the runtime; it runs once, when the client first listens."""
        self._begin = begin

    def listening(self) -> None:
        """The client can now be told of changes (it listed tools, or opened a listen stream)."""
        begin, self._begin = self._begin, None
        if begin is not None:
            begin()

    def available_names(self) -> list[str]:
        return [descriptor.name for descriptor in self.runtime.messages.available()]

    def listed(self, ctx: ServerRequestContext[Connection], names: Sequence[str]) -> None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self._session = ctx.session
        self.watch.listed(names)
        self.listening()

    async def _announce(self) -> None:
        await self._bus.publish(ToolsListChanged())
        session = self._session
        if session is not None:
            try:
                await session.send_tool_list_changed()
            except Exception:
                # The connection went away; a later listing registers its successor.
                self._session = None


class _AgentServer(Server[Connection]):
    """The low-level server, advertising ``tools.listChanged`` exactly when it can keep the promise.

    The SDK derives ``listChanged`` from options its callers (the in-process
    client among them) build without arguments; agentfx knows whether the
    notification can ever come, so it says so itself.
    """

    notifies_tool_changes = True

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=self.notifies_tool_changes),
            experimental_capabilities,
            extensions,
        )


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
        ValueError: The contract has both a context projection and a resource
            named ``context``, which would share the URI ``app://context``.

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
    sealing = _confirm.security(request_state_security)
    approvals = _confirm.Approvals(ttl=sealing.ttl)
    names = [descriptor.name for descriptor in runtime.resources.list()]
    if runtime.has_context and "context" in names:
        raise ValueError(
            'The resource "context" would share the URI app://context with the context projection. Rename it.'
        )

    @asynccontextmanager
    async def lifespan(_: Server[Connection]) -> AsyncGenerator[Connection]:
        connection = Connection(runtime)
        async with anyio.create_task_group() as task_group:
            unsubscribe: list[Callable[[], None]] = []

            def begin() -> None:
                # From the first listing or listen stream, not from the
                # connection's start: a connection (an idle HTTP session) that
                # nobody listens on costs nothing when the Model changes.
                unsubscribe.append(runtime.subscribe(connection.watch.changed))
                task_group.start_soon(connection.watch.run)

            connection.begin_with(begin)
            try:
                yield connection
            finally:
                for stop in unsubscribe:
                    stop()
                task_group.cancel_scope.cancel()

    async def list_tools(
        ctx: ServerRequestContext[Connection], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            tools = [_wire.tool(view) for view in tool_views(runtime)]
        except Exception:
            _logger.exception("listing the available capabilities failed")
            raise MCPError(code=types.INTERNAL_ERROR, message=_INTERNAL) from None
        ctx.lifespan_context.listed(ctx, [tool.name for tool in tools])
        # The list depends on the Model, so no client may cache it.
        return types.ListToolsResult(tools=tools, ttl_ms=0, cache_scope="private")

    async def call_tool(
        ctx: ServerRequestContext[Connection], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        # Before anything runs: a retry's requestState is redeemed here, or refused.
        confirmation = _confirm.plan(ctx, params, approvals)
        controller = AbortController()
        # Fresh per call: a client may reuse a JSON-RPC id once its request is
        # answered, and the audit must still tell the two calls apart. The
        # request id stays visible, to match an entry with the client's log;
        # bounded, since the client chose it and the audit keeps it.
        call_id = new_invocation_id() if ctx.request_id is None else f"{new_invocation_id()}/{echo(str(ctx.request_id))}"
        invocation = Invocation(id=call_id, transport="mcp", signal=controller.signal, confirm=confirmation.confirm)
        payload: object = {} if params.arguments is None else params.arguments
        settled = anyio.Event()
        answer: list[types.CallToolResult | types.InputRequiredResult | MCPError] = []

        def ask_later(error: object) -> types.InputRequiredResult | None:
            return confirmation.input_required(approvals, params.name, payload, error)

        async def run() -> None:
            # Shielded: the client's cancellation must reach the pipeline as an
            # abort of the signal (which the audit records as a cancellation),
            # not as an outer cancellation that interrupts it mid-step.
            with anyio.CancelScope(shield=True):
                try:
                    answer.append(await _dispatch(runtime, params.name, payload, invocation, ask_later))
                finally:
                    settled.set()

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(run)
            try:
                await settled.wait()
            except anyio.get_cancelled_exc_class():
                # The client cancelled (or the connection closed). Abort and let
                # the shielded task settle before the cancellation goes on: a
                # cancelled request is never answered, but it is still recorded.
                controller.abort("The MCP client cancelled the request")
                raise
        result = answer[0]
        if isinstance(result, MCPError):
            raise result
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

    async def read_resource(
        ctx: ServerRequestContext[Connection], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            read = _read(runtime, params.uri)
        except Exception:
            _logger.exception("reading the resource %r failed", params.uri)
            raise MCPError(code=types.INTERNAL_ERROR, message=_INTERNAL) from None
        if not is_successful(read):
            raise _wire.unknown_resource(params.uri)
        return read.unwrap()

    async def listen(
        ctx: ServerRequestContext[Connection], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        connection = ctx.lifespan_context
        if params.notifications.tools_list_changed and connection.watch.last is None:
            # Opening the stream is this era's way of having listed: differences
            # from here on are news to the client.
            try:
                connection.watch.listed(connection.available_names())
            except Exception:
                _logger.exception("listing the available capabilities failed")
        connection.listening()
        return await connection.listen(ctx, params)

    # Availability is a function of the Model, so a change can only be noticed
    # when the host reports Model changes or processed Messages. Without
    # either, no notification can ever come: promise none, and serve no
    # listen stream (a 2026-era client reads that as the same promise).
    notifies = runtime.host.subscribe is not None or runtime.host.observe is not None
    mcp_server = _AgentServer(
        name,
        version=version,
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscriptions_listen=listen if notifies else None,
    )
    mcp_server.notifies_tool_changes = notifies
    # Seals every requestState this server mints and verifies every one echoed back.
    mcp_server.middleware.append(RequestStateBoundary(sealing, default_audience=name))
    return mcp_server


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
    ask_later: Callable[[object], types.InputRequiredResult | None] | None = None,
) -> types.CallToolResult | types.InputRequiredResult | MCPError:
    """Run one call to its wire answer; never raises an ``Exception``.

    ``ask_later`` may turn a refusal into an ``InputRequiredResult`` (a
    confirmation to ask on a 2026-07-28 request).
    """
    try:
        outcome = await runtime.messages.dispatch_unknown(name, payload, invocation)
        if isinstance(outcome, IOSuccess):
            return _wire.success(unsafe_perform_io(outcome.unwrap()))
        failure = unsafe_perform_io(outcome.failure())
        later = ask_later(failure) if ask_later is not None else None
        if later is not None:
            return later
        try:
            return _wire.failure(failure)
        except MCPError as unknown:
            return unknown
    except Exception:
        _logger.exception("capability %r failed unexpectedly", name)
        return _wire.defect(name)
