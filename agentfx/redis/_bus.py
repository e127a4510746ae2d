"""The MCP SDK's ``SubscriptionBus`` over Redis pub/sub, for listen streams on every process.

This layer owns one channel, ``<ns>:events``: :meth:`RedisSubscriptionBus.publish`
delivers an event to this process's listeners at once and publishes it for
every other process sharing the namespace, whose reader task hands it to
their listeners. Pub/sub is fire-and-forget, as the SDK's listen streams are
(no replay: a client that lost its stream re-listens and refetches), so an
event published while Redis is unreachable reaches this process only. The
listening connection is pinged when quiet and replaced when Redis stops
answering it, so a partition that leaves it open does not end the events.

It deliberately knows nothing of agentfx's runtime or of what the events
mean: it carries the SDK's typed ``ServerEvent`` values and leaves
subscription ids, filters and wire notifications to the SDK's
``ListenHandler``. asyncio only, like redis-py's client.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

from functools import cache
from typing import TYPE_CHECKING

import anyio
import msgspec
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from . import _client
from ._program import check_namespace

if TYPE_CHECKING:
    from mcp.shared.subscriptions import ServerEvent
    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub

__all__ = ["RedisSubscriptionBus", "subscription_bus"]

_logger = logging.getLogger("agentfx.redis")

_BACKOFF = (0.05, 2.0)
_MAX_URI = 4096
_TIMEOUT = 2.0
"""Seconds a reply from Redis may take: a publish to a Redis that stopped answering fails instead of hanging."""
_HEARTBEAT = 5.0
"""Seconds of quiet after which the listening connection pings, to learn it still reaches Redis."""


class _Wire(msgspec.Struct, frozen=True):
    origin: str
    kind: str
    uri: str | None = None


@cache
def _vocabulary() -> tuple[dict[type[object], str], dict[str, ServerEvent]]:
    # Imported on first use, so agentfx.redis's program runs without the MCP extra.
    from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ToolsListChanged

    kinds: dict[type[object], str] = {
        ToolsListChanged: "tools",
        PromptsListChanged: "prompts",
        ResourcesListChanged: "resources",
        ResourceUpdated: "resource",
    }
    singletons: dict[str, ServerEvent] = {
        "tools": ToolsListChanged(),
        "prompts": PromptsListChanged(),
        "resources": ResourcesListChanged(),
    }
    return kinds, singletons


class RedisSubscriptionBus:
    """A ``SubscriptionBus`` (the MCP SDK's protocol) shared by every process on one namespace.

    Obtain one from :func:`subscription_bus`. Pass it wherever the SDK takes
    a bus (``MCPServer(subscriptions=bus)``, ``ListenHandler(bus)``).
    Listeners are synchronous and run on the event loop, in publication
    order per publishing process; one that raises is logged and skipped.
    """

    __slots__ = ("_channel", "_client", "_decoder", "_listeners", "_origin")

    def __init__(self, client: Redis, channel: str) -> None:
        self._client = client
        self._channel = channel
        self._origin = uuid.uuid4().hex
        self._listeners: dict[object, Callable[[ServerEvent], None]] = {}
        self._decoder = msgspec.json.Decoder(_Wire)

    @property
    def channel(self) -> str:
        """The Redis channel events travel on."""
        return self._channel

    @property
    def listener_count(self) -> int:
        """Listeners subscribed in this process."""
        return len(self._listeners)

    async def publish(self, event: ServerEvent) -> None:
        """Deliver ``event`` to this process's listeners, then to every other process's.

        Raises:
            TypeError: ``event`` is not one of the SDK's ``ServerEvent`` types.
            redis.exceptions.RedisError: Redis is unreachable; this process's
                listeners have been told already.
        """
        kind = _vocabulary()[0].get(type(event))
        if kind is None:
            raise TypeError(f"Cannot publish {type(event).__name__}: it is not an MCP ServerEvent")
        self._deliver(event)
        uri: str | None = getattr(event, "uri", None) if kind == "resource" else None
        await _client.publish(self._client, self._channel, msgspec.json.encode(_Wire(self._origin, kind, uri)))

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        """Register ``listener`` in this process and return an idempotent unsubscribe."""
        token = object()
        self._listeners[token] = listener

        def unsubscribe() -> None:
            self._listeners.pop(token, None)

        return unsubscribe

    def _deliver(self, event: ServerEvent) -> None:
        for listener in list(self._listeners.values()):
            try:
                listener(event)
            except Exception:
                _logger.exception("a subscription listener raised; the others still run")

    def _received(self, data: bytes) -> None:
        try:
            wire = self._decoder.decode(data)
        except msgspec.DecodeError:
            _logger.warning("ignored a malformed event on %s", self._channel)
            return
        if wire.origin == self._origin:
            return
        if wire.kind == "resource":
            if wire.uri is None or len(wire.uri) > _MAX_URI:
                _logger.warning("ignored a malformed event on %s", self._channel)
                return
            from mcp.shared.subscriptions import ResourceUpdated

            event: ServerEvent = ResourceUpdated(uri=wire.uri)
        else:
            known = _vocabulary()[1].get(wire.kind)
            if known is None:
                _logger.warning("ignored a malformed event on %s", self._channel)
                return
            event = known
        self._deliver(event)

    async def _read(self, ready: anyio.Event) -> None:
        delay = _BACKOFF[0]
        while True:
            pubsub: PubSub = _client.pubsub(self._client)
            try:
                await pubsub.subscribe(self._channel)
                ready.set()
                delay = _BACKOFF[0]
                # A connection a partition left open hears nothing, with no
                # error ever: quiet past the heartbeat is pinged, and a ping
                # not answered in time replaces the connection.
                heard = anyio.current_time()
                pinged = False
                while True:
                    message = await _client.next_message(pubsub, timeout=min(1.0, _HEARTBEAT))
                    now = anyio.current_time()
                    if message is not None:
                        heard, pinged = now, False
                        data = _client.message_data(message)
                        if data is not None:
                            self._received(data)
                    elif pinged and now - heard > _HEARTBEAT + _TIMEOUT:
                        _logger.warning("Redis stopped answering while listening on %s; reconnecting", self._channel)
                        break
                    elif not pinged and now - heard > _HEARTBEAT:
                        await _client.ping(pubsub)
                        pinged = True
            except (RedisError, OSError):
                _logger.warning("lost Redis while listening on %s; reconnecting", self._channel)
            finally:
                with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                    await pubsub.aclose()
            await anyio.sleep(delay)
            delay = min(delay * 2, _BACKOFF[1])


@asynccontextmanager
async def subscription_bus(url: str, *, namespace: str) -> AsyncGenerator[RedisSubscriptionBus]:
    """A :class:`RedisSubscriptionBus` on ``<namespace>:events`` for the duration of an ``async with`` block.

    The block starts once the channel is subscribed, so an event another
    process publishes after that reaches this one. asyncio only.

    Args:
        url: A redis-py URL, ``redis://host:port/db``.
        namespace: Processes sharing it share events.

    Raises:
        ContractError: A malformed namespace.
        RuntimeError: Not running on asyncio.
        redis.exceptions.ConnectionError: Redis is unreachable when the bus starts.
    """
    check_namespace(namespace)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError("agentfx.redis runs on asyncio only: redis-py's client does not run on trio") from None
    # Bounded: a partition leaves the connection open and silent, and the
    # publisher is an answer waiting to go out. One retry reconnects after
    # Redis restarted (a repeated event is harmless); more would multiply the bound.
    client = _client.client(url, socket_connect_timeout=2, socket_timeout=_TIMEOUT, retry=Retry(NoBackoff(), 1))
    try:
        # Once, before listening: an unreachable Redis is said at once, as
        # run_program says it, not after the listener's retries time out.
        await _client.reachable(client)
        bus = RedisSubscriptionBus(client, f"{namespace}:events")
        async with anyio.create_task_group() as task_group:
            ready = anyio.Event()
            task_group.start_soon(bus._read, ready)  # pyright: ignore[reportPrivateUsage]
            with anyio.fail_after(10):
                await ready.wait()
            try:
                yield bus
            finally:
                task_group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await client.aclose()
