"""agentfx.redis with large Models: the log and each apply are bounded by bytes, not only by entries.

Every log entry whose Message changed the Model carries the whole encoded
Model, and one apply passes one encoded Model per changed Message. Bounded
by entries alone, a 1 MB Model made a log of about ten thousand MB, and a
burst of sends one apply of hundreds of MB. These tests use Models of 16 KiB
and budgets shrunk to match, so they run in a moment against a real
redis-server.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import msgspec
import pytest

from agentfx.redis import RedisProgram, run_program
from agentfx.redis import _program  # pyright: ignore[reportPrivateUsage]
from tests.redis_programs import APPLY, SEND, script, swap_script
from tests.redis_server import Link, RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio

LEASE = 0.3
SIZE = 16 * 1024
"""Bytes of each Model."""


class Blob(msgspec.Struct, frozen=True):
    data: bytes = b""
    n: int = 0


class Put(msgspec.Struct, frozen=True, tag=True):
    """Replace the Model with ``size`` bytes, counting one more Message."""

    size: int = SIZE
    padding: bytes = b""


def update(model: Blob, message: Put) -> Blob:
    return Blob(data=bytes(message.size), n=model.n + 1)


def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def running(url: str, ns: str, **options: Any) -> Any:
    options.setdefault("lease", LEASE)
    return run_program(url, namespace=ns, init=Blob(), update=update, message_type=Put, **options)


async def settled(copy: RedisProgram[Blob, Put], version: int) -> None:
    with anyio.fail_after(5):
        while copy.version < version:
            await anyio.sleep(0.005)


async def writing(copy: RedisProgram[Blob, Put]) -> None:
    with anyio.fail_after(5):
        while not copy.is_writer:
            await anyio.sleep(0.01)


def sizes_of(calls: list[int], copy: RedisProgram[Blob, Put], slot: int) -> None:
    """Record the bytes of every call of the script in ``slot`` (APPLY or SEND)."""
    original = script(copy, slot)

    async def measured(**kwargs: Any) -> object:
        calls.append(sum(len(arg) for arg in kwargs["args"] if isinstance(arg, bytes)))
        return await original(**kwargs)

    swap_script(copy, slot, measured)


async def test_the_log_keeps_about_log_bytes_of_large_models_not_log_length_versions(server: RedisServer) -> None:
    # 120 Models of 16 KiB in a log of 256 KiB: about 16 versions, not 120
    # (log_length, ten thousand, would have kept them all).
    ns = namespace()
    budget = 256 * 1024
    async with running(server.url, ns, log_bytes=budget) as writer, running(server.url, ns, log_bytes=budget) as follower:
        await writing(writer)
        seen: list[int] = []

        def observed(_message: Put) -> None:
            seen.append(follower.version)

        follower.observe(observed)
        for _ in range(120):
            await writer.send(Put())
        await settled(follower, 120)
        async with client(server.url) as raw:
            length = await raw.xlen(f"{ns}:log")
            # redis-py leaves MEMORY USAGE's keyword arguments untyped.
            memory_usage = cast("Callable[..., Awaitable[int | None]]", getattr(raw, "memory_usage"))
            used = await memory_usage(f"{ns}:log", samples=0)
        assert budget // (SIZE + 100) <= length <= budget // SIZE + 1
        assert used is not None and used < 2 * budget
        # A copy that keeps up still takes every version from the log, in order: nothing was trimmed under it.
        assert seen == list(range(1, 121))
        assert follower.model == writer.model == Blob(data=bytes(SIZE), n=120)


async def test_a_copy_left_behind_a_log_trimmed_by_bytes_reloads_the_model(
    server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    ns = namespace()
    link = Link(server.port)
    async with anyio.create_task_group() as group:
        await group.start(link.run)
        async with running(server.url, ns, log_bytes=128 * 1024) as writer:
            await writing(writer)
            async with running(link.url, ns) as behind:
                changes: list[int] = []
                behind.subscribe(lambda: changes.append(behind.model.n))
                link.cut()
                for _ in range(40):
                    await writer.send(Put())
                link.restore()
                await settled(behind, 40)
                assert behind.model == writer.model
                assert changes[-1] == 40
        assert any("was trimmed past version" in record.getMessage() for record in caplog.records)
        group.cancel_scope.cancel()


async def test_a_writer_trims_by_bytes_a_log_another_writer_left(server: RedisServer) -> None:
    # The entries already there are of sizes the new writer never saw: it
    # counts them as large as its own, and trims them with its first apply.
    ns = namespace()
    async with running(server.url, ns) as first:
        await writing(first)
        for _ in range(60):
            await first.send(Put())
    async with client(server.url) as raw:
        assert await raw.xlen(f"{ns}:log") == 60
        async with running(server.url, ns, log_bytes=128 * 1024) as second:
            await writing(second)
            await second.send(Put())
            assert second.model.n == 61
            assert await raw.xlen(f"{ns}:log") <= 128 * 1024 // SIZE + 1


@pytest.mark.parametrize("model", [SIZE, 4 * SIZE], ids=["models within the budget", "each model over the budget"])
async def test_one_apply_carries_about_a_batch_budget_of_models_and_the_rest_waits_for_the_next(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch, model: int
) -> None:
    # 40 sends queue while another process holds the lease, then this one
    # takes it and reads all 40 at once: one apply with all of them would
    # carry 40 Models. Each carries about the budget, one Model over it at
    # most; a Model larger than the budget goes alone. Every Message is
    # applied once, in order.
    budget = 64 * 1024
    monkeypatch.setattr(_program, "_BATCH_BYTES", budget)
    ns = namespace()
    applies: list[int] = []
    async with client(server.url) as raw:
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        async with running(server.url, ns) as copy:
            sizes_of(applies, copy, APPLY)
            async with anyio.create_task_group() as group:
                for _ in range(40):
                    group.start_soon(copy.send, Put(size=model))
                with anyio.fail_after(5):
                    while await raw.xlen(f"{ns}:inbox") < 40:
                        await anyio.sleep(0.01)
                await raw.delete(f"{ns}:writer")
            assert copy.model == Blob(data=bytes(model), n=40) and copy.version == 40
    assert max(applies) <= max(budget, model) + model + 4096
    assert len(applies) >= 40 * model // (budget + model)
    if model > budget:
        assert len(applies) == 40


async def test_one_queueing_call_carries_about_a_batch_budget_of_messages(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    budget = 64 * 1024
    monkeypatch.setattr(_program, "_BATCH_BYTES", budget)
    calls: list[int] = []
    async with running(server.url, namespace()) as copy:
        await writing(copy)
        sizes_of(calls, copy, SEND)
        async with anyio.create_task_group() as group:
            for _ in range(40):
                group.start_soon(copy.send, Put(size=0, padding=bytes(SIZE)))
        assert copy.model.n == 40
    assert sum(calls) >= 40 * SIZE
    assert max(calls) <= budget + SIZE + 4096


async def test_large_messages_left_for_the_next_batch_are_not_read_again_and_again(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 40 Messages of 16 KiB queue before this process writes; batches of
    # about 4 apply them. Reading the whole rest of the inbox for each batch
    # would read some 220 Messages (40, 36, 32, ...) to apply 40.
    monkeypatch.setattr(_program, "_BATCH_BYTES", 64 * 1024)
    ns = namespace()
    read: list[int] = []
    async with client(server.url) as raw:
        await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
        async with running(server.url, ns) as copy:
            redis: Any = getattr(copy, "_client")
            xread = redis.xread

            async def counted(streams: dict[str, object], **kwargs: Any) -> Any:
                reply = await xread(streams, **kwargs)
                if f"{ns}:inbox" in streams and reply:
                    read.append(len(reply[0][1]))
                return reply

            monkeypatch.setattr(redis, "xread", counted)
            async with anyio.create_task_group() as group:
                for _ in range(40):
                    group.start_soon(copy.send, Put(size=0, padding=bytes(SIZE)))
                with anyio.fail_after(5):
                    while await raw.xlen(f"{ns}:inbox") < 40:
                        await anyio.sleep(0.01)
                await raw.delete(f"{ns}:writer")
            assert copy.model.n == 40
    assert read[0] == 40
    assert sum(read) <= 3 * 40
