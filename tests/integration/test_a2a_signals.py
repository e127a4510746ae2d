"""``agentfx serve --transport a2a`` stopped by SIGTERM or SIGINT with calls pending, observed from outside.

What makes it work is the A2A app's own: leaving its lifespan aborts every
running task through its invocation signal while the program still runs.
The first test proves that in process, on an App; the others drive the CLI.

Each probe starts ``python -m agentfx serve tests.hardening_app:served
--transport a2a`` on a free 127.0.0.1 port, leaves calls waiting on their
completion through the A2A SDK's own client, signals the process, and reads
the journal the application writes: what reached the host, what the audit
recorded, and whether the application closed after them.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, TaskState
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

import agentfx
from agentfx.a2a import a2a_app, agent_card
from agentfx.app import App
from tests import hardening_app
from tests.hardening_app import JOURNAL

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.hardening_app:served"
PENDING = 3
SIGNALS = pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])


@pytest.fixture
def anyio_backend() -> str:
    # The A2A SDK's client and server run on asyncio only.
    return "asyncio"


def journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


async def held(path: Path, count: int) -> None:
    """Wait (boundedly) until ``count`` Held Messages have reached the host."""
    with anyio.fail_after(10):
        while sum(1 for event in journal(path) if event.get("observed") == "Held") < count:
            await anyio.sleep(0.02)


@dataclass
class Served:
    process: Process
    stderr: BufferedByteReceiveStream
    base: str

    async def rest_of_stderr(self) -> str:
        chunks: list[bytes] = []
        with anyio.fail_after(5):
            try:
                while True:
                    chunks.append(await self.stderr.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                pass
        return b"".join(chunks).decode()


@asynccontextmanager
async def a2a(path: Path) -> AsyncGenerator[Served]:
    command = [sys.executable, "-m", "agentfx", "serve", TARGET, "--transport", "a2a", "--port", "0"]
    env = {**os.environ, JOURNAL: str(path)}
    async with await anyio.open_process(command, cwd=ROOT, env=env) as process:
        try:
            assert process.stderr is not None
            stderr = BufferedByteReceiveStream(process.stderr)
            with anyio.fail_after(20):
                while not (line := (await stderr.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    pass
            url = line.rsplit(" ", 1)[-1]
            assert url.startswith("http://127.0.0.1:") and url.endswith("/a2a"), url
            yield Served(process, stderr, url.removesuffix("/a2a"))
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.fail_after(10):
                await process.wait()


def send_hold(client: Any) -> AsyncGenerator[Any]:
    message = Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, parts=[new_data_part({"skill": "hold", "input": {}})]
    )
    # Blocking: the answer comes once the call settles, which only stopping
    # makes it do (Released is never sent).
    return client.send_message(SendMessageRequest(message=message))


async def test_leaving_the_lifespan_aborts_every_running_task_through_its_signal_before_the_program_stops() -> None:
    log = agentfx.audit_log()
    reached = 0

    def update(model: hardening_app.Model, message: hardening_app.Message) -> hardening_app.Model:
        nonlocal reached
        reached += isinstance(message, hardening_app.Held)
        return hardening_app.update(model, message)

    app = App(hardening_app.definition, hardening_app.Model(), update, audit=log)
    card = agent_card(app.definition, name="held", description="Holds", url="http://127.0.0.1/a2a", version="1")
    asgi = a2a_app(app, card)
    answers: list[tuple[int, str]] = []
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=20) as http:
        client = await create_client("http://127.0.0.1", ClientConfig(httpx_client=http, streaming=False))
        try:
            async with anyio.create_task_group() as calls:
                async with asgi.router.lifespan_context(asgi):

                    async def hold() -> None:
                        async for response in send_hold(client):
                            answers.append((response.task.status.state, response.task.id))

                    for _ in range(PENDING):
                        calls.start_soon(hold)
                    with anyio.fail_after(10):
                        while reached < PENDING:
                            await anyio.sleep(0.01)
                    assert answers == []
        finally:
            await client.close()
    assert [state for state, _ in answers] == [TaskState.TASK_STATE_CANCELED] * PENDING
    entries = log.entries()
    assert [(entry.decision, entry.outcome) for entry in entries] == [("dispatched", "AgentCancelledError")] * PENDING
    assert sorted(entry.invocation for entry in entries) == sorted(task_id for _, task_id in answers)


@SIGNALS
async def test_a_signal_stops_a2a_serving_with_every_pending_task_aborted_and_audited(
    signum: signal.Signals, tmp_path: Path
) -> None:
    path = tmp_path / "journal.jsonl"
    answers: list[tuple[int, str]] = []
    elapsed, stderr = 0.0, ""
    async with a2a(path) as served, httpx.AsyncClient(timeout=20) as http:
        client = await create_client(served.base, ClientConfig(httpx_client=http, streaming=False))
        try:
            async with anyio.create_task_group() as calls:

                async def hold() -> None:
                    async for response in send_hold(client):
                        answers.append((response.task.status.state, response.task.id))

                for _ in range(PENDING):
                    calls.start_soon(hold)
                await held(path, PENDING)
                started = time.monotonic()
                served.process.send_signal(signum)
                with anyio.fail_after(10):
                    await served.process.wait()
                elapsed = time.monotonic() - started
        finally:
            await client.close()
        assert served.process.returncode == 0
        stderr = await served.rest_of_stderr()
    assert elapsed < 5.0, f"stopping took {elapsed:.2f}s"
    assert stderr.count(f"agentfx: {signum.name} received; stopping\n") == 1, stderr
    assert "Traceback" not in stderr, stderr
    # Each pending call was answered before the server went: its task canceled.
    assert [state for state, _ in answers] == [TaskState.TASK_STATE_CANCELED] * PENDING
    events = journal(path)
    holds = [event for event in events if "outcome" in event and event["capability"] == "hold"]
    assert len(holds) == PENDING, events
    for event in holds:
        # Dispatched (the Message reached update), then aborted through the
        # invocation's signal while waiting for its completion.
        assert event["decision"] == "dispatched"
        assert event["outcome"] == "AgentCancelledError"
        assert event["transport"] == "a2a"
    # One record per task: the invocation id is the task's id.
    assert sorted(event["invocation"] for event in holds) == sorted(task_id for _, task_id in answers)
    assert events[-1] == {"closed": True}
