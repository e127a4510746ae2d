"""agentfx.redis's writer when ``update`` is slow: a batch never outlasts the lease.

``update`` runs synchronously, so nothing renews the writer lease while a
batch is being updated. A batch that took longer than the lease would be
refused at its apply (the lease expired meanwhile), and the writer would run
the same batch again, forever. The writer stops a batch early instead, so it
keeps applying whenever one ``update`` takes well under the lease. Runs on a
real redis-server (asyncio only: redis-py's client is asyncio-only).
"""

from __future__ import annotations

import time
from collections import Counter

import anyio
import msgspec
import pytest

from agentfx.program import Command
from agentfx.redis import run_program
from tests.redis_app import Added, Message, Model, fold
from tests.redis_app import update as tally
from tests.redis_programs import LEASE, namespace
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio

QUEUED = 120
PER_MESSAGE = 0.005
"""Seconds each ``update`` takes: a full batch of the queued Messages takes twice the lease, one a sixtieth of it."""


async def test_a_backlog_whose_batch_would_outlast_the_lease_is_applied_once_each(server: RedisServer) -> None:
    assert QUEUED * PER_MESSAGE >= 2 * LEASE > PER_MESSAGE
    calls: Counter[str] = Counter()

    def update(model: Model, message: Message) -> Model | tuple[Model, list[Command[Message]]]:
        if isinstance(message, Added):
            calls[message.key] += 1
        time.sleep(PER_MESSAGE)  # Synchronous, as a slow update is: the event loop (and the lease's renewal) waits.
        return tally(model, message)

    ns = namespace()
    queued = [Added(key=f"k{index}", n=index) for index in range(QUEUED)]
    async with client(server.url) as raw:
        # A backlog waiting before any writer runs (a burst, or the inbox a dead writer left).
        for message in queued:
            await raw.xadd(f"{ns}:inbox", {"m": msgspec.msgpack.encode(message)})
    last = Added(key="last", n=1)
    with anyio.fail_after(8):
        async with run_program(
            server.url, namespace=ns, init=Model(), update=update, message_type=Message, lease=LEASE, apply_timeout=5
        ) as program:
            # Returns once the copy applied it, after the backlog; it would time out if no batch were ever stored.
            await program.send(last)
            assert program.version == QUEUED + 1
            assert program.model == fold([*queued, last])
    assert set(calls) == {message.key for message in queued} | {"last"}
    # Each batch stored on its first try: no batch was updated over and over.
    assert sum(calls.values()) < 2 * (QUEUED + 1), calls.most_common(3)
