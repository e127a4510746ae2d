"""agentfx.redis's observers across a reset: every Message of the history Redis holds reaches every copy's observers.

After a flush, the copies blocked on the log Redis deleted first see the new
history's first entry. Each reloads, and still hears that entry: a completion
contract waiting on the Message settles whichever process took the call.
Runs on a real redis-server (asyncio only: redis-py's client is asyncio-only).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import cast

import anyio
import pytest

from tests.redis_app import Added, Message, Model, fold
from tests.redis_programs import namespace, programs
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("sender", ["the writer", "another copy"])
async def test_after_a_flush_every_copy_observes_the_first_messages_once_in_order(server: RedisServer, sender: str) -> None:
    async with programs(server.url, namespace(), 3, apply_timeout=3.0) as copies, client(server.url) as raw:
        before = [Added(key=f"before-{index}") for index in range(3)]
        for index, message in enumerate(before):
            await copies[index].send(message)
        with anyio.fail_after(3):
            while any(copy.version != 3 for copy in copies) or not any(copy.is_writer for copy in copies):
                await anyio.sleep(0.005)
        writer = next(copy for copy in copies if copy.is_writer)
        source = writer if sender == "the writer" else next(copy for copy in copies if copy is not writer)
        heard: list[list[str]] = [[] for _ in copies]
        changes = [0 for _ in copies]
        for index, copy in enumerate(copies):
            copy.observe(lambda m, index=index: heard[index].append(cast(Added, m).key))
            copy.subscribe(lambda index=index: changes.__setitem__(index, changes[index] + 1))
        await cast("Callable[[], Awaitable[object]]", getattr(raw, "flushall"))()
        # At once, while the other copies still wait on the log Redis deleted.
        after: list[Message] = [Added(key="first"), Added(key="second")]
        for message in after:
            await source.send(message)
        with anyio.fail_after(3):
            while any(copy.version != 2 or copy.model != fold(after) for copy in copies):
                await anyio.sleep(0.005)
        await anyio.sleep(0.3)
        assert heard == [["first", "second"]] * 3
        # Once for the reload, then once per Message that changed the Model: alike on every copy.
        assert changes == [3, 3, 3]
        assert all(copy.model == Model(keys=("first", "second"), total=2) for copy in copies)
