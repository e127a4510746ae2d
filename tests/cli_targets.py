"""Targets for the ``agentfx serve`` tests: one of each wrong kind it must refuse, then factories that misbehave.

Each wrong one is what a user might plausibly name by mistake: a callable
that is no runtime factory, or a factory whose result is not what ``serve``
needs. Only those that return or yield the wrong thing are called by the CLI
(what they return cannot be known otherwise); the rest are refused without
running them. After them: a factory that fails on entry, one that counts its
entries, and one whose startup never ends.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Coroutine, Generator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio

from tests.mcp_app import app, definition

NUMBER = 42
"""Not callable at all."""


async def async_factory() -> None:
    """An ``async def``: calling it gives a coroutine, not an async context manager."""


async def undecorated() -> AsyncGenerator[None]:
    """An async generator missing its ``@asynccontextmanager``."""
    yield


def needs_a_name(name: str) -> object:
    """A factory that takes an argument ``serve`` has no value for."""
    return app.run()


def returns_a_number() -> int:
    """Zero arguments, but what it returns is no context manager."""
    return 42


async def _pending() -> None:
    return None


def returns_a_coroutine() -> Coroutine[Any, Any, None]:
    """Returns a coroutine the CLI must close, so no "never awaited" warning escapes."""
    return _pending()


@contextmanager
def sync_context() -> Generator[object]:
    """A synchronous context manager: ``serve`` needs an async one."""
    yield app


@asynccontextmanager
async def yields_a_definition() -> AsyncGenerator[object]:
    """An async context manager around the wrong thing: the contract, not a bound runtime."""
    yield definition


@asynccontextmanager
async def enter_raises() -> AsyncGenerator[object]:
    """A factory whose context fails on entry: the application's error, not a wrong target."""
    raise RuntimeError("the factory could not start")
    yield  # pragma: no cover - never reached


ENTRIES = {"entered": 0, "exited": 0}
"""How often :func:`counted` was entered and left."""


@asynccontextmanager
async def counted() -> AsyncGenerator[object]:
    """A good factory that counts how often ``serve`` enters and leaves it."""
    ENTRIES["entered"] += 1
    try:
        async with app.run() as runtime:
            yield runtime
    finally:
        ENTRIES["exited"] += 1


@asynccontextmanager
async def slow_start() -> AsyncGenerator[object]:
    """A factory whose startup never ends: it says so on stderr, then waits (for a stop signal)."""
    print("slow_start: starting", file=sys.stderr, flush=True)
    await anyio.sleep_forever()
    yield  # pragma: no cover - never reached
