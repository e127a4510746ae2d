"""The tally program of ``tests.redis_app`` on a test Redis: a fresh namespace, one program, or several sharing it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from agentfx.redis import RedisProgram, run_program
from tests.redis_app import Message, Model, update

__all__ = ["APPLY", "LEASE", "SEND", "Script", "namespace", "programs", "running", "script", "swap_script"]

LEASE = 0.3
"""A short lease, so takeovers happen within a test's time."""


Script = Callable[..., Awaitable[object]]
"""One of a program's registered Lua scripts, called as redis-py calls one (``keys=``, ``args=``)."""

SEND = 0
"""The slot of the script that queues a Message."""

APPLY = 1
"""The slot of the writer's apply script."""


def script(copy: RedisProgram[Any, Any], slot: int) -> Script:
    """The script in ``slot`` of ``copy`` (a private slot: there is no public seam for a lost or held reply)."""
    scripts: tuple[Script, ...] = getattr(copy, "_scripts")
    return scripts[slot]


def swap_script(copy: RedisProgram[Any, Any], slot: int, replacement: Script) -> None:
    """Have ``copy`` call ``replacement`` wherever it called the script in ``slot``."""
    scripts: tuple[Script, ...] = getattr(copy, "_scripts")
    setattr(copy, "_scripts", (*scripts[:slot], replacement, *scripts[slot + 1 :]))


def namespace() -> str:
    """A namespace no other test uses."""
    return f"t-{uuid.uuid4().hex[:10]}"


def running(url: str, ns: str, **options: Any) -> Any:
    """The tally program on ``ns`` (an async context manager), with the short lease unless told otherwise."""
    options.setdefault("lease", LEASE)
    return run_program(url, namespace=ns, init=Model(), update=update, message_type=Message, **options)


@asynccontextmanager
async def programs(url: str, ns: str, count: int, **options: Any) -> AsyncGenerator[list[RedisProgram[Model, Message]]]:
    """``count`` tally programs sharing ``ns``, as several processes would."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(running(url, ns, **options)) for _ in range(count)]
