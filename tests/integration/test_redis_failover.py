"""Killing the writer: worker processes on one namespace, the writer SIGKILLed while Messages stream in.

Each worker (``python -m tests.redis_app``) runs agentfx.redis's program
with a short lease and sends its own keyed additions, printing each one
``send`` acknowledged. The writer is found from the lease key (its token
names its pid) and killed; a survivor must take the lease within twice the
lease, and the final Model must hold every acknowledged Message exactly once
and no Message twice. asyncio only (redis-py's client).
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from returns.io import IOResult
from returns.pipeline import is_successful
from returns.unsafe import unsafe_perform_io

from agentfx.app import App
from agentfx.errors import AgentCompletionTimeoutError, DispatchError
from agentfx.pipeline import DispatchResult
from agentfx.redis import program, run_program
from tests.redis_app import Message, Model, Requested, contract, update
from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
LEASE = 0.5


@dataclass
class Worker:
    process: anyio.abc.Process
    acked: list[str] = field(default_factory=lambda: [])
    ready: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)

    async def read(self) -> None:
        assert self.process.stdout is not None
        lines = BufferedByteReceiveStream(self.process.stdout)
        try:
            while True:
                line = (await lines.receive_until(b"\n", 4096)).decode()
                if line == "ready":
                    self.ready.set()
                elif line == "done":
                    self.done.set()
                elif line.startswith("acked "):
                    self.acked.append(line.split()[1])
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
            pass


@asynccontextmanager
async def workers(url: str, ns: str, counts: list[int]) -> AsyncGenerator[list[Worker]]:
    async with AsyncExitStack() as stack, anyio.create_task_group() as group:
        started: list[Worker] = []
        for index, count in enumerate(counts):
            command = [sys.executable, "-m", "tests.redis_app", url, ns, str(LEASE), f"w{index}", str(count)]
            process = await stack.enter_async_context(await anyio.open_process(command, cwd=ROOT, stderr=None))
            worker = Worker(process)
            started.append(worker)
            group.start_soon(worker.read)
            with anyio.fail_after(20):
                await worker.ready.wait()
        try:
            yield started
        finally:
            for worker in started:
                if worker.process.returncode is None:
                    worker.process.kill()
            with anyio.fail_after(10):
                for worker in started:
                    await worker.process.wait()
            group.cancel_scope.cancel()


async def lease_holder(url: str, ns: str) -> str | None:
    from agentfx.redis import _client

    connection = _client.client(url)
    try:
        token = cast("bytes | None", await connection.get(f"{ns}:writer"))
    finally:
        await connection.aclose()
    return None if token is None else token.decode()


def pid_of(token: str) -> int:
    return int(token.split(":")[1])


async def stored(url: str, ns: str) -> tuple[Model, int]:
    async with run_program(url, namespace=ns, init=Model(), update=update, message_type=Message, lease=LEASE) as copy:
        return copy.model, copy.version


async def test_killing_the_writer_mid_stream_moves_the_lease_within_two_leases_and_applies_each_message_once(
    server: RedisServer,
) -> None:
    ns = f"failover-{uuid.uuid4().hex[:8]}"
    async with workers(server.url, ns, [120, 120, 120]) as started:
        by_pid = {worker.process.pid: worker for worker in started}
        with anyio.fail_after(10):
            while (token := await lease_holder(server.url, ns)) is None or sum(len(w.acked) for w in started) < 30:
                await anyio.sleep(0.01)
        victim = by_pid[pid_of(token)]
        os.kill(victim.process.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        with anyio.fail_after(10):
            while (successor := await lease_holder(server.url, ns)) in (token, None):
                await anyio.sleep(0.01)
        took_over = time.monotonic() - killed_at
        assert pid_of(successor) in by_pid and pid_of(successor) != victim.process.pid
        assert took_over <= 2 * LEASE, f"the lease moved after {took_over:.2f}s"
        survivors = [worker for worker in started if worker is not victim]
        with anyio.fail_after(30):
            for worker in survivors:
                await worker.done.wait()
        model, version = await stored(server.url, ns)
    counts = Counter(model.keys)
    assert [key for key, seen in counts.items() if seen > 1] == [], "no Message applied twice"
    acknowledged = [key for worker in started for key in worker.acked]
    assert [key for key in acknowledged if key not in counts] == [], "every acknowledged Message applied"
    # The survivors sent everything; the victim's unacknowledged tail was applied at most once.
    assert all(len(worker.acked) == 120 for worker in survivors)
    assert len(acknowledged) <= len(model.keys) == model.total == version <= 360


async def test_completions_on_a_survivor_settle_or_time_out_as_the_contract_says(server: RedisServer) -> None:
    ns = f"failover-{uuid.uuid4().hex[:8]}"
    async with workers(server.url, ns, [0]) as (writer,):
        with anyio.fail_after(10):
            while (token := await lease_holder(server.url, ns)) is None:
                await anyio.sleep(0.01)
        assert pid_of(token) == writer.process.pid
        factory = program(server.url, namespace=ns, message_type=Message, lease=LEASE)
        survivor = App(contract, init=Model(), update=update, program=factory)
        async with run_program(server.url, namespace=ns, init=Model(), update=update, message_type=Message, lease=LEASE) as local:
            runtime = survivor.bind(local)
            outcomes: list[IOResult[DispatchResult, DispatchError]] = []
            async with anyio.create_task_group() as group:

                async def slow() -> None:
                    outcomes.append(await runtime.messages.dispatch(Requested, {"key": "slow", "delay": 1.0}))

                group.start_soon(slow)
                # The writer applied the request and started its (slow) command: kill it now.
                with anyio.fail_after(5):
                    while local.version < 1:
                        await anyio.sleep(0.005)
                os.kill(writer.process.pid, signal.SIGKILL)
            # The command died with its process: the contract's deadline answers.
            outcome = outcomes[0]
            assert not is_successful(outcome)
            error = unsafe_perform_io(outcome.failure())
            assert isinstance(error, AgentCompletionTimeoutError)
            assert error.message == '"request" was dispatched but did not complete within 2s. The Message still reached update.'
            # Queued while no one holds the lease: the survivor takes it, applies the request and runs its command.
            result = await runtime.messages.call(Requested, {"key": "fast"})
            assert result.completion is not None and result.completion.status == "completed"
            assert local.is_writer and local.model.confirmed == ("fast",)
