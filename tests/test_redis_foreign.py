"""agentfx.redis on a namespace another program already uses: refused at the start, its keys left alone.

A key of the right kind that agentfx did not write (a hash with fields it
never stores, a stream of other entries, a string that never expires where
the lease should be) is another program's: ``run_program`` raises
:class:`RedisProgramError` in one line naming the key and the fix, before it
reads an inbox entry or writes anything. A namespace agentfx wrote, with or
without a types fingerprint or a history id, and an empty one, still start.
Each test runs a real redis-server (asyncio only: redis-py's client is
asyncio-only).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
import redis.asyncio

from agentfx.redis import RedisProgramError
from tests.redis_app import Added
from tests.redis_programs import namespace, running
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio





async def _hash(raw: redis.asyncio.Redis, ns: str) -> None:
    await raw.hset(f"{ns}:model", mapping={"name": "someone else's", "count": 3})


async def _ours_but_unreadable(raw: redis.asyncio.Redis, ns: str) -> None:
    await raw.hset(f"{ns}:model", mapping={"model": b"\x80", "version": "three"})


async def _inbox(raw: redis.asyncio.Redis, ns: str) -> None:
    await raw.xadd(f"{ns}:inbox", {"job": "resize", "image": "a.png"})
    await raw.xadd(f"{ns}:inbox", {"job": "resize", "image": "b.png"})


async def _log(raw: redis.asyncio.Redis, ns: str) -> None:
    await raw.xadd(f"{ns}:log", {"event": "login", "user": "ann"})


async def _writer(raw: redis.asyncio.Redis, ns: str) -> None:
    await raw.set(f"{ns}:writer", "a value kept for good")


Setup = Callable[[redis.asyncio.Redis, str], Awaitable[None]]


@pytest.mark.parametrize(("setup", "name", "said"), [
    (_hash, "model", "is a hash agentfx did not write, not the one that holds the Model"),
    (_ours_but_unreadable, "model", "is a hash agentfx did not write, not the one that holds the Model"),
    (_inbox, "inbox", "is a stream agentfx did not write, not the one that holds the inbox"),
    (_log, "log", "is a stream agentfx did not write, not the one that holds the log"),
    (_writer, "writer", "is a string that never expires, not the writer lease"),
], ids=["hash", "hash with unreadable fields", "inbox", "log", "lease"])
async def test_another_programs_key_is_refused_at_the_start_and_left_as_it_was(
    server: RedisServer, setup: Setup, name: str, said: str
) -> None:
    ns = namespace()
    key = f"{ns}:{name}"
    async with client(server.url) as raw:
        await setup(raw, ns)
        keys = [f"{ns}:{suffix}" for suffix in ("model", "inbox", "log", "writer")]
        before = [await raw.dump(k) for k in keys]
        entered: list[bool] = []
        with pytest.raises(RedisProgramError) as refused:
            async with running(server.url, ns):
                entered.append(True)
        assert entered == []
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"{key} {said} of namespace {ns!r}")
        assert "choose another namespace" in message and "someone else's" not in message and "resize" not in message
        # Nothing consumed, nothing written: the other program's keys are as they were, and no others appeared.
        assert [await raw.dump(k) for k in keys] == before


async def test_every_foreign_key_is_named_in_one_line(server: RedisServer) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        await _hash(raw, ns)
        await _inbox(raw, ns)
    with pytest.raises(RedisProgramError, match=f"^{ns}:model .*; {ns}:inbox .*delete those keys if nothing else uses them$"):
        async with running(server.url, ns):
            pass


async def test_a_namespace_agentfx_wrote_starts_with_or_without_its_fingerprint_and_history(server: RedisServer) -> None:
    ns = namespace()
    async with running(server.url, ns) as first:
        await first.send(Added(key="a"))
    async with client(server.url) as raw:
        # As an older agentfx stored it: no history id, and (types msgspec could not describe) no fingerprint.
        await raw.hdel(f"{ns}:model", "epoch", "types")
        async with running(server.url, ns) as later:
            assert later.model.keys == ("a",)
            await later.send(Added(key="b"))
            assert later.model.keys == ("a", "b")


async def test_messages_queued_before_any_writer_stored_a_model_are_agentfx_s(server: RedisServer) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        # Someone else holds the lease: the Message is queued, and no Model is stored yet.
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        async with running(server.url, ns, apply_timeout=0.2) as first:
            with pytest.raises(RedisProgramError, match="no writer applied it"):
                await first.send(Added(key="queued"))
        assert await raw.xlen(f"{ns}:inbox") == 1
        await raw.delete(f"{ns}:writer")
        async with running(server.url, ns) as later:
            with anyio.fail_after(3):
                while later.version < 1:
                    await anyio.sleep(0.01)
            assert later.model.keys == ("queued",)


async def test_a_stray_entry_at_one_end_of_the_log_does_not_disown_it(server: RedisServer) -> None:
    ns = namespace()
    async with running(server.url, ns) as first:
        await first.send(Added(key="a"))
    async with client(server.url) as raw:
        await raw.xadd(f"{ns}:log", {"stray": "1"})
    async with running(server.url, ns) as later:
        assert later.model.keys == ("a",)


async def test_a_fingerprint_left_alone_by_a_flush_mid_store_is_agentfx_s(server: RedisServer) -> None:
    # A writer stores the Model, then its fingerprint; a flush between the two leaves the fingerprint alone.
    ns = namespace()
    async with running(server.url, ns) as first:
        await first.send(Added(key="a"))
    async with client(server.url) as raw:
        fingerprint = await raw.hget(f"{ns}:model", "types")
        assert fingerprint
        await raw.delete(f"{ns}:model", f"{ns}:log", f"{ns}:inbox")
        await raw.hset(f"{ns}:model", "types", fingerprint)
        async with running(server.url, ns) as later:
            await later.send(Added(key="b"))
            assert later.model.keys == ("b",)
