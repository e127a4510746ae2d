"""Inbox entries someone else added (anyone with access to the namespace may): a legal but extreme id, a body that is no Message.

The batch they end is applied whole, and its commands run; the inbox is
trimmed exactly past them; what is logged never quotes an entry. Each test
runs a real redis-server (asyncio only: redis-py's client is asyncio-only).
"""
# pyright: reportPrivateUsage=false
# (one test fails the apply script on purpose, so it reaches the script itself)

from __future__ import annotations

import time

import anyio
import msgspec
import pytest

from tests.redis_app import Requested
from tests.redis_programs import namespace, running
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("sequence", [2**64 - 1, 2**63, 2**53 + 1], ids=["last possible", "past a signed 64-bit", "past a double"])
async def test_a_batch_ended_by_an_entry_with_an_extreme_id_is_applied_whole_and_its_commands_run(
    server: RedisServer, sequence: int
) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        # A sender's Message waits in the inbox, as send() queues it; then an entry with the
        # largest sequence a stream id can hold, one second ahead.
        await raw.xadd(f"{ns}:inbox", {"m": msgspec.msgpack.encode(Requested(key="r1"))})
        ahead = int(time.time() * 1000) + 1000
        await raw.xadd(f"{ns}:inbox", {"m": msgspec.msgpack.encode(Requested(key="r2"))}, id=f"{ahead}-{sequence}")
        async with running(server.url, ns) as copy:
            with anyio.fail_after(5):
                # Each Requested's command answers Confirmed: none may be lost with the batch.
                while copy.model.confirmed != ("r1", "r2"):
                    await anyio.sleep(0.005)
            assert copy.version == 4
            assert await raw.hget(f"{ns}:model", "version") == b"4"
            # Trimmed past the batch, exactly: nothing applied stays behind.
            assert await raw.xlen(f"{ns}:inbox") == 0


async def test_an_entry_that_is_no_message_is_recorded_as_failed_and_logged_without_its_body(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    secret = b"not-for-the-log-0xfeed"
    async with client(server.url) as raw:
        added = await raw.xadd(f"{ns}:inbox", {"m": secret})
        garbage = added.decode() if isinstance(added, bytes) else added
        async with running(server.url, ns) as copy:
            await copy.send(Requested(key="after"))
            with anyio.fail_after(5):
                while copy.model.confirmed != ("after",):
                    await anyio.sleep(0.005)
            assert await raw.hget(f"{ns}:model", "failed") == garbage.encode()
    said = [(record.getMessage(), record.exc_info) for record in caplog.records if garbage in record.getMessage()]
    assert said == [(f"inbox entry {garbage} is not a Message of this program; it is recorded as failed", None)]
    assert not any(secret.decode() in record.getMessage() or (record.exc_text or "").count(secret.decode()) for record in caplog.records)


async def test_an_apply_that_fails_after_it_stored_the_batch_still_runs_the_batchs_commands(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentfx.redis import _program

    # Redis undoes nothing of a script that fails part-way: an error the
    # script raises after its writes leaves the batch stored.
    failing = _program._APPLY.replace("return logid", "redis.call('XTRIM', KEYS[4], 'MINID', 'no id')\nreturn logid")
    assert failing != _program._APPLY
    monkeypatch.setattr(_program, "_APPLY", failing)
    ns = namespace()
    async with running(server.url, ns) as copy:
        await copy.send(Requested(key="r1"))
        with anyio.fail_after(5):
            while copy.model.confirmed != ("r1",):
                await anyio.sleep(0.005)
    async with client(server.url) as raw:
        assert await raw.hget(f"{ns}:model", "version") == b"2"
