"""Typed doors into the few redis-py calls whose signatures pyright cannot see through.

redis-py types most commands, but ``from_url``, ``publish`` and ``pubsub``
take untyped ``**kwargs`` and a pub/sub message is a loosely typed dict.
This module gives each a precise signature once, so the program and the bus
stay strict; it deliberately adds no behaviour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from redis.asyncio import BlockingConnectionPool, Redis

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub

__all__ = ["client", "message_data", "next_message", "ping", "pool", "publish", "pubsub", "reachable", "server_info"]


def pool(url: str, **options: object) -> BlockingConnectionPool:
    """``BlockingConnectionPool.from_url(url, **options)``."""
    factory = cast("Callable[..., BlockingConnectionPool]", getattr(BlockingConnectionPool, "from_url"))
    return factory(url, **options)


def client(url: str, **options: object) -> Redis:
    """``Redis.from_url(url, **options)``: a client with its own pool, closed with it."""
    factory = cast("Callable[..., Redis]", getattr(Redis, "from_url"))
    return factory(url, **options)


def publish(redis: Redis, channel: str, data: bytes) -> Awaitable[int]:
    """``PUBLISH channel data``: how many subscribers received it."""
    return cast("Callable[[str, bytes], Awaitable[int]]", getattr(redis, "publish"))(channel, data)


def pubsub(redis: Redis) -> PubSub:
    """A pub/sub connection that drops the subscribe confirmations."""
    return cast("Callable[..., PubSub]", getattr(redis, "pubsub"))(ignore_subscribe_messages=True)


def message_data(message: object) -> bytes | None:
    """The payload of a pub/sub ``message``, or ``None`` for anything else."""
    if not isinstance(message, dict):
        return None
    fields = cast("dict[str, Any]", message)
    data: object = fields.get("data")
    if fields.get("type") != "message" or not isinstance(data, bytes):
        return None
    return data


def next_message(pubsub: PubSub, timeout: float = 1.0) -> Awaitable[object]:
    """The next pub/sub message, or ``None`` after ``timeout`` seconds without one."""
    return cast("Callable[..., Awaitable[object]]", getattr(pubsub, "get_message"))(timeout=timeout)


def ping(pubsub: PubSub) -> Awaitable[object]:
    """``PING`` on a pub/sub connection: its answer arrives as a ``pong`` message."""
    return cast("Callable[[], Awaitable[object]]", getattr(pubsub, "ping"))()


def reachable(redis: Redis) -> Awaitable[object]:
    """``PING`` on a client: raises redis-py's ``ConnectionError`` when Redis cannot be reached."""
    return cast("Callable[[], Awaitable[object]]", getattr(redis, "ping"))()


def server_info(redis: Redis) -> Awaitable[dict[str, object]]:
    """``INFO server``, parsed: the server's version is ``redis_version``."""
    return cast("Callable[[str], Awaitable[dict[str, object]]]", getattr(redis, "info"))("server")
