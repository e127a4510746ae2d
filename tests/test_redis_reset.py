"""agentfx.redis when Redis comes back empty: restarted without persistence, or flushed.

What Redis lost is lost. Every copy notices that Redis no longer holds the
Model it copied (on reconnecting, on the next quiet read of the log, or when
the writer finds the stored Model gone or behind) and reloads what Redis
holds, telling its subscribers once. A Message is never reported lost when it
was applied, nor applied twice; one queued in the history Redis lost is
reported lost, not left to time out. Each test runs programs on a real
redis-server (asyncio only: redis-py's client is asyncio-only).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import msgspec
import pytest
import redis.asyncio

from agentfx.redis import RedisProgram, RedisProgramError
from agentfx.redis._program import _APPLY  # pyright: ignore[reportPrivateUsage]
from tests.redis_app import Added, Boom, Message, Model, fold
from tests.redis_programs import namespace, programs
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio

SECRET = "s3cret-key-in-the-model"


async def flush(raw: redis.asyncio.Redis) -> None:
    """``FLUSHALL``: Redis empty, as after a restart without persistence, but no connection dropped."""
    await cast("Callable[[], Awaitable[object]]", getattr(raw, "flushall"))()


async def connected(raw: redis.asyncio.Redis) -> int:
    info = await cast("Callable[[str], Awaitable[dict[str, object]]]", getattr(raw, "info"))("clients")
    return int(cast(int, info["connected_clients"]))





async def reloaded(copies: list[RedisProgram[Model, Message]], model: Model, version: int, seconds: float = 3) -> None:
    with anyio.fail_after(seconds):
        while any(copy.version != version or copy.model != model for copy in copies):
            await anyio.sleep(0.005)


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if "Redis lost data" in record.getMessage()]


async def filled(copies: list[RedisProgram[Model, Message]], count: int) -> Model:
    """Send ``count`` Messages round the copies; the Model every copy holds once they have all applied them."""
    sent: list[Message] = [Added(key=f"{SECRET}-{index}") for index in range(count)]
    for index, message in enumerate(sent):
        await copies[index % len(copies)].send(message)
    model = fold(sent)
    await reloaded(copies, model, count)
    return model


async def test_after_redis_restarts_empty_every_copy_reloads_without_waiting_for_a_message(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with programs(server.url, namespace(), 3) as copies:
        await filled(copies, 3)
        changes = [0, 0, 0]
        for index, copy in enumerate(copies):
            copy.subscribe(lambda index=index: changes.__setitem__(index, changes[index] + 1))
        caplog.clear()
        server.stop()
        server.start()
        # Nothing is sent: each copy notices on reconnecting, and serves the Model Redis holds now.
        await reloaded(copies, Model(), 0)
        await anyio.sleep(0.3)
        assert changes == [1, 1, 1]
        said = warnings(caplog)
        assert len(said) == 3 and all(record.levelno == logging.WARNING for record in said)
        assert not any(SECRET in record.getMessage() or len(record.getMessage()) > 400 for record in said)
        await copies[1].send(Added(key="after"))
        await reloaded(copies, Model(keys=("after",), total=1), 1)


async def test_after_a_flush_every_copy_reloads_and_the_first_message_is_applied_once_and_acknowledged(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with programs(server.url, namespace(), 3, apply_timeout=3.0) as copies, client(server.url) as raw:
        await filled(copies, 3)
        caplog.clear()
        await flush(raw)
        # At once, before any copy noticed: the Message goes to what Redis holds now, and its sender hears it applied.
        for copy in copies:
            await copy.send(Added(key="first"))
        await reloaded(copies, Model(keys=("first", "first", "first"), total=3), 3)
        await anyio.sleep(0.3)
        assert all(copy.version == 3 for copy in copies)
        assert len(warnings(caplog)) == 3


async def test_after_a_flush_a_quiet_namespace_reloads_its_init(server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    async with programs(server.url, namespace(), 2) as copies, client(server.url) as raw:
        await filled(copies, 2)
        caplog.clear()
        await flush(raw)
        # No connection drops and nothing is sent: the writer finds the Model gone, the other copy on a quiet read.
        await reloaded(copies, Model(), 0)
        await anyio.sleep(0.3)
        assert len(warnings(caplog)) == 2
        await copies[0].send(Added(key="after"))
        await reloaded(copies, Model(keys=("after",), total=1), 1)


@asynccontextmanager
async def sent_while_another_writes(
    raw: redis.asyncio.Redis, copy: RedisProgram[Model, Message], message: Message
) -> AsyncGenerator[tuple[list[str], bytes]]:
    """``message`` sent from ``copy`` while another process holds the lease, so it waits in the inbox.

    Yields, once it is queued, what its ``send`` said (filled when it
    answers: ``"reported applied"`` or the failure's text) and its inbox id;
    on leaving, waits for that answer.
    """
    ns = copy.namespace
    await raw.delete(f"{ns}:writer")
    await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
    with anyio.fail_after(3):
        while copy.is_writer:
            await anyio.sleep(0.01)
    said: list[str] = []

    async def send() -> None:
        try:
            await copy.send(message)
            said.append("reported applied")
        except RedisProgramError as failure:
            said.append(str(failure))

    async with anyio.create_task_group() as group:
        group.start_soon(send)
        with anyio.fail_after(3):
            while not (queued := cast("list[tuple[bytes, object]]", await raw.xrange(f"{ns}:inbox"))):
                await anyio.sleep(0.005)
        yield said, queued[0][0]
        with anyio.fail_after(3):
            while not said:
                await anyio.sleep(0.01)


async def applied_elsewhere(
    pipe: Any, raw: redis.asyncio.Redis, ns: str, base: int, entries: Sequence[tuple[bytes | str, Message, Model | None]]
) -> None:
    """Queue on ``pipe`` the apply another writer (holding the lease as ``"elsewhere"``) would make of ``entries``.

    Each entry is an inbox id, its Message and the Model it made (``None``:
    update raised), applied over version ``base`` of the history Redis holds.
    """
    history, types = cast("list[bytes | None]", await raw.hmget(f"{ns}:model", ["epoch", "types"]))
    assert history is not None
    args: list[Any] = ["elsewhere", 60_000, 1_000, base, len(entries), types or b"", history]
    for entry, message, model in entries:
        flag, stored = ("x", b"") if model is None else ("c", msgspec.msgpack.encode(model))
        args += [entry, flag, msgspec.msgpack.encode(message), stored]
    pipe.eval(_APPLY, 4, *(f"{ns}:{key}" for key in ("writer", "model", "log", "inbox")), *args)


def next_id(entry: bytes) -> str:
    ms, seq = (int(part) for part in entry.split(b"-"))
    return f"{ms}-{seq + 1}"


async def test_a_message_queued_in_the_history_redis_lost_is_reported_lost_at_once(server: RedisServer) -> None:
    ns = namespace()
    async with client(server.url) as raw:
        async with programs(server.url, ns, 1, apply_timeout=30.0) as (copy,):
            await copy.send(Added(key="kept"))
            async with sent_while_another_writes(raw, copy, Added(key="waiting")) as (said, _):
                await flush(raw)
            assert len(said) == 1 and "Redis lost data" in said[0] and "will not be applied" in said[0]
            await reloaded([copy], Model(), 0)
            await copy.send(Added(key="again"))
            assert copy.model == Model(keys=("again",), total=1)


async def test_messages_sent_across_a_flush_are_applied_at_most_once_and_none_applied_is_reported_lost(
    server: RedisServer,
) -> None:
    acked_after: set[str] = set()
    lost: set[str] = set()
    flushed = anyio.Event()
    async with programs(server.url, namespace(), 3, apply_timeout=3.0) as copies, client(server.url) as raw:

        async def sender(copy: RedisProgram[Model, Message], name: str) -> None:
            for index in range(40):
                key = f"{name}-{index}"
                after = flushed.is_set()
                try:
                    await copy.send(Added(key=key))
                except RedisProgramError as failure:
                    assert "Redis lost data" in str(failure), str(failure)
                    lost.add(key)
                else:
                    if after:
                        acked_after.add(key)

        async with anyio.create_task_group() as group:
            for index, copy in enumerate(copies):
                group.start_soon(sender, copy, f"p{index}")
            await anyio.sleep(0.05)
            await flush(raw)
            flushed.set()
        with anyio.fail_after(3):
            while len({(copy.version, copy.model) for copy in copies}) != 1:
                await anyio.sleep(0.005)
        final = copies[0].model
        assert copies[0].version == len(final.keys)
        assert len(final.keys) == len(set(final.keys)), "a Message was applied twice"
        assert acked_after <= set(final.keys), "a Message acknowledged after the flush is missing"
        assert not lost & set(final.keys), "a Message reported lost was applied"


async def test_leaving_after_a_restart_leaves_no_connection_behind(server: RedisServer) -> None:
    async with client(server.url) as raw:
        before = await connected(raw)
        async with programs(server.url, namespace(), 2) as copies:
            await filled(copies, 2)
            server.stop()
            server.start()
            await reloaded(copies, Model(), 0)
            await copies[0].send(Added(key="after"))
        with anyio.fail_after(3):
            while True:
                try:
                    count = await connected(raw)
                except Exception:
                    # This client's own connection was cut by the restart: it reconnects.
                    await anyio.sleep(0.01)
                    continue
                if count <= max(before, 1):
                    break
                await anyio.sleep(0.01)


async def test_after_redis_goes_back_to_an_older_copy_every_copy_reloads_it_once(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    keys = [f"{ns}:{key}" for key in ("model", "log", "inbox")]
    async with programs(server.url, ns, 2) as copies, client(server.url) as raw:
        older = await filled(copies, 1)
        # As a restore from a snapshot taken at version 1 leaves them.
        snapshot = {key: await raw.dump(key) for key in keys}
        for index in range(2):
            await copies[index].send(Added(key=f"later-{index}"))
        await reloaded(copies, Model(keys=(*older.keys, "later-0", "later-1"), total=3), 3)
        changes = [0, 0]
        for index, copy in enumerate(copies):
            copy.subscribe(lambda index=index: changes.__setitem__(index, changes[index] + 1))
        caplog.clear()
        for key, dumped in snapshot.items():
            if dumped is None:
                await raw.delete(key)
            else:
                await raw.restore(key, 0, dumped, replace=True)
        await reloaded(copies, older, 1)
        await anyio.sleep(0.3)
        assert changes == [1, 1] and len(warnings(caplog)) == 2
        await copies[1].send(Added(key="after"))
        await reloaded(copies, Model(keys=(*older.keys, "after"), total=2), 2)


async def test_a_message_lost_with_an_older_copy_is_reported_lost_though_a_later_one_was_applied(
    server: RedisServer,
) -> None:
    # Redis goes back to a copy taken before the Message was queued, in the same
    # history, and another writer applies a later Message before this copy looks:
    # the stored applied id is past the lost one, which no log entry applied.
    ns = namespace()
    keys = {name: f"{ns}:{name}" for name in ("model", "log", "inbox")}
    kept, after = Added(key="kept"), Added(key="after")
    async with client(server.url) as raw:
        async with programs(server.url, ns, 1, apply_timeout=30.0) as (copy,):
            await copy.send(kept)
            snapshot = {name: await raw.dump(key) for name, key in keys.items()}
            await copy.send(Added(key="later"))
            async with sent_while_another_writes(raw, copy, Added(key="lost")) as (said, lost):
                # One transaction, so the copy sees only its end: the older copy, then the other writer's apply.
                async with raw.pipeline(transaction=True) as pipe:
                    for name, dumped in snapshot.items():
                        if dumped is None:
                            pipe.delete(keys[name])
                        else:
                            pipe.restore(keys[name], 0, dumped, replace=True)
                    await applied_elsewhere(pipe, raw, ns, 1, [(next_id(lost), after, fold([kept, after]))])
                    await pipe.execute()
            assert len(said) == 1 and "Redis lost data" in said[0] and "will not be applied" in said[0]
            await reloaded([copy], fold([kept, after]), 2)


async def test_a_message_update_refused_is_reported_so_though_the_log_was_trimmed_past_it(server: RedisServer) -> None:
    # The copy waiting on it falls behind (say, cut off) while another writer
    # applies it, update raising, then more, and the log is trimmed past it:
    # the reload must not take "no log entry" for "applied".
    ns = namespace()
    kept, after = Added(key="kept"), Added(key="after")
    async with client(server.url) as raw:
        async with programs(server.url, ns, 1, apply_timeout=30.0) as (copy,):
            await copy.send(kept)
            async with sent_while_another_writes(raw, copy, Boom()) as (said, boom):
                # One transaction, so the copy sees only its end: the other writer's two applies, then an exact trim.
                async with raw.pipeline(transaction=True) as pipe:
                    entries = [(boom, Boom(), None), (next_id(boom), after, fold([kept, after]))]
                    await applied_elsewhere(pipe, raw, ns, 1, entries)
                    pipe.xtrim(f"{ns}:log", maxlen=1, approximate=False)
                    await pipe.execute()
            assert said == ["update raised while the writer applied this Message; the Model is unchanged"]
            await reloaded([copy], fold([kept, after]), 3)
