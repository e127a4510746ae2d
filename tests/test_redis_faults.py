"""agentfx.redis through states Redis leaves by itself, and a send racing its program's exit.

A refusal that says what Redis is doing (``BUSY`` while another client's
long script runs, ``LOADING``, a failover's) is retried as a lost connection
is; only a refusal that says what the namespace holds stops the program. A
send whose Message was queued as the program stopped is answered at once.
Each test runs a real redis-server (asyncio only).
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from redis.exceptions import ResponseError

from agentfx.redis import RedisProgram, RedisProgramError
from tests.redis_app import Added
from tests.redis_programs import namespace, running
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import client
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio



@pytest.mark.parametrize("command", ["xread", "evalsha"])
async def test_a_redis_busy_with_another_clients_script_is_waited_out(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    # What every command meets while another client's script runs past
    # busy-reply-threshold: the tail's read of the log, and the scripts
    # (the quiet re-read of the stored Model among them).
    import redis.asyncio

    busy = [8]
    original: Any = getattr(redis.asyncio.Redis, command)

    async def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        if busy[0] > 0:
            busy[0] -= 1
            raise ResponseError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
        return await original(self, *args, **kwargs)

    async with running(server.url, namespace()) as program:
        await program.send(Added(key="before"))
        monkeypatch.setattr(redis.asyncio.Redis, command, refused)
        with anyio.fail_after(10):
            while busy[0] > 0:
                await anyio.sleep(0.01)
        monkeypatch.undo()
        with anyio.fail_after(10):
            await program.send(Added(key="after"))
        assert program.model.keys == ("before", "after")


async def test_a_send_queued_as_its_program_stops_is_answered_at_once(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued = anyio.Event()
    stopped = anyio.Event()
    enqueue: Any = getattr(RedisProgram, "_enqueue")

    async def late(self: Any, message: object) -> object:
        answer = await enqueue(self, message)
        queued.set()
        await stopped.wait()  # the reply comes back only once the block has exited
        return answer

    monkeypatch.setattr(RedisProgram, "_enqueue", late)
    ns = namespace()
    failures: list[str] = []

    async def send(program: Any) -> None:
        try:
            await program.send(Added(key="late"))
        except RedisProgramError as refused:
            failures.append(str(refused))

    async with anyio.create_task_group() as outside:
        # The writer lease is held elsewhere, so nothing applies the Message while the block runs.
        async with client(server.url) as raw:
            await raw.set(f"{ns}:writer", "elsewhere", px=60_000)
            async with running(server.url, ns, apply_timeout=30) as program:
                outside.start_soon(send, program)
                await queued.wait()
            stopped.set()
            with anyio.fail_after(2):  # not the 30 s apply_timeout
                while not failures:
                    await anyio.sleep(0.01)
    assert failures == [failures[0]] and failures[0].startswith("The program stopped before the Message was applied")
