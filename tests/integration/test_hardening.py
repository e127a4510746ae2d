"""``agentfx serve`` probed as an operator and an attacker would, in real processes, on stdio and on 127.0.0.1.

Each probe starts ``python -m agentfx serve tests.hardening_app:served`` and
reads the journal that application writes (what reached the host, what the
audit recorded, whether the application closed), so it observes the server
from outside, however the server stopped.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp
import mcp_types as types
import pytest
from anyio.abc import Process
from mcp.shared.exceptions import MCPError
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.hardening_app import JOURNAL
from tests.mcp_wire import INITIALIZE, call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.hardening_app:served"
JSON_AND_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
HUGE = 3 * 1024 * 1024
"""Characters of a name or URI sent to be echoed: large, but under the 4 MiB line and body limits."""
ECHO_BOUND = 129 * 4
"""The most bytes one bounded echo can take: 128 characters plus the ellipsis, at 4 bytes each at worst."""


def journal(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines()]


async def journalled(path: Path, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The journal once ``done(events)`` holds, waiting boundedly."""
    with anyio.fail_after(10):
        while not done(events := journal(path)):
            await anyio.sleep(0.02)
    return events


def observed(events: list[dict[str, Any]], tag: str) -> int:
    return sum(1 for event in events if event.get("observed") == tag)


def audited(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for event in events if "outcome" in event]


# --- the two transports, driven raw -----------------------------------------------------


class Stdio:
    """``agentfx serve`` over stdio, spoken to one JSON-RPC line at a time."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(line + b"\n")

    async def request(self, message: object) -> None:
        await self.send(json.dumps(message).encode())

    async def receive_line(self) -> bytes:
        with anyio.fail_after(10):
            return await self._stdout.receive_until(b"\n", 16 * 1024 * 1024)

    async def receive(self) -> dict[str, Any]:
        return json.loads(await self.receive_line())


@asynccontextmanager
async def stdio(path: Path) -> AsyncGenerator[Stdio]:
    command = [sys.executable, "-m", "agentfx", "serve", TARGET, "--transport", "stdio"]
    env = {**os.environ, JOURNAL: str(path)}
    async with await anyio.open_process(command, cwd=ROOT, env=env) as process:
        wire = Stdio(process)
        try:
            await wire.request(INITIALIZE)
            assert (await wire.receive())["result"]["protocolVersion"] == "2025-11-25"
            await wire.request(INITIALIZED)
            yield wire
        finally:
            if process.returncode is None:
                assert process.stdin is not None
                await process.stdin.aclose()
            with anyio.fail_after(10):
                await process.wait()


@dataclass
class Http:
    """``agentfx serve --transport http`` on 127.0.0.1, with one open session."""

    process: Process
    stderr: BufferedByteReceiveStream
    client: httpx.AsyncClient
    url: str
    session: str

    async def post(self, message: object) -> tuple[int, bytes]:
        headers = {**JSON_AND_SSE, "Mcp-Session-Id": self.session, "Mcp-Protocol-Version": "2025-11-25"}
        response = await self.client.post(self.url, content=json.dumps(message).encode(), headers=headers)
        return response.status_code, response.content

    async def rest_of_stderr(self) -> str:
        chunks: list[bytes] = []
        with anyio.fail_after(5):
            try:
                while True:
                    chunks.append(await self.stderr.receive())
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                pass
        return b"".join(chunks).decode()


def answer_of(body: bytes) -> dict[str, Any]:
    """The JSON-RPC answer in a response body, plain JSON or the last event of a stream."""
    text = body.decode()
    data = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1] if data else text)


@asynccontextmanager
async def http(path: Path) -> AsyncGenerator[Http]:
    command = [sys.executable, "-m", "agentfx", "serve", TARGET, "--transport", "http", "--port", "0"]
    env = {**os.environ, JOURNAL: str(path)}
    async with await anyio.open_process(command, cwd=ROOT, env=env) as process, httpx.AsyncClient() as client:
        try:
            assert process.stderr is not None
            stderr = BufferedByteReceiveStream(process.stderr)
            with anyio.fail_after(20):
                while not (line := (await stderr.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    pass
            url = line.rsplit(" ", 1)[-1]
            response = await client.post(url, content=json.dumps(INITIALIZE).encode(), headers=JSON_AND_SSE)
            assert response.status_code == 200
            served = Http(process, stderr, client, url, response.headers["mcp-session-id"])
            assert (await served.post(INITIALIZED))[0] == 202
            yield served
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.fail_after(10):
                await process.wait()


# --- 9. SIGTERM and SIGINT stop the server in good order ---------------------------------

SHUTTING_DOWN = {"code": types.CONNECTION_CLOSED, "message": "Server shutting down: the request was cancelled"}
SIGNALS = pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
PENDING = 5


def assert_stopped_in_order(events: list[dict[str, Any]]) -> None:
    """Every pending call was aborted and audited, and the application closed after them."""
    holds = [event for event in audited(events) if event["capability"] == "hold"]
    assert len(holds) == PENDING, events
    for event in holds:
        # Each Message reached update, so the record is of a dispatched call
        # whose wait was cut short, not of a call that never happened.
        assert event["decision"] == "dispatched"
        assert event["outcome"] in ("AgentCancelledError", "interrupted")
    assert events[-1] == {"closed": True}


@SIGNALS
async def test_a_signal_stops_stdio_serving_with_every_pending_call_audited(
    signum: signal.Signals, tmp_path: Path
) -> None:
    path = tmp_path / "journal.jsonl"
    async with stdio(path) as wire:
        for request_id in range(PENDING):
            await wire.request(call(request_id + 1, "hold", {}))
        await journalled(path, lambda events: observed(events, "Held") == PENDING)
        started = time.monotonic()
        # stdin stays open: the signal alone must stop the server.
        wire.process.send_signal(signum)
        with anyio.fail_after(10):
            await wire.process.wait()
        elapsed = time.monotonic() - started
        assert wire.process.returncode == 0
    assert elapsed < 5.0, f"stopping took {elapsed:.2f}s"
    assert_stopped_in_order(journal(path))


@SIGNALS
async def test_a_signal_stops_http_serving_with_every_pending_call_audited(
    signum: signal.Signals, tmp_path: Path
) -> None:
    path = tmp_path / "journal.jsonl"
    answers: list[tuple[int, object]] = []
    elapsed, stderr = 0.0, ""
    async with http(path) as served, anyio.create_task_group() as calls:

        async def hold(request_id: int) -> None:
            try:
                status, body = await served.post(call(request_id, "hold", {}))
                answers.append((status, answer_of(body)))
            except (httpx.HTTPError, ValueError):
                answers.append((0, None))  # the server closed the connection: the call got no answer

        for request_id in range(PENDING):
            calls.start_soon(hold, request_id + 1)
        await journalled(path, lambda events: observed(events, "Held") == PENDING)
        started = time.monotonic()
        served.process.send_signal(signum)
        with anyio.fail_after(10):
            await served.process.wait()
        elapsed = time.monotonic() - started
        assert served.process.returncode == 0
        stderr = await served.rest_of_stderr()
    assert elapsed < 5.0, f"stopping took {elapsed:.2f}s"
    assert f"agentfx: {signum.name} received; stopping" in stderr
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr
    # Each pending call was told why it ended, on its own stream.
    assert sorted(answers, key=lambda answer: str(answer)) == [
        (200, {"jsonrpc": "2.0", "id": request_id + 1, "error": SHUTTING_DOWN}) for request_id in range(PENDING)
    ]
    assert_stopped_in_order(journal(path))


async def test_a_signal_stops_sessionless_http_serving_with_every_pending_call_audited(tmp_path: Path) -> None:
    # 2026-07-28 clients hold no session: each call runs in its own request.
    path = tmp_path / "journal.jsonl"
    elapsed, stderr = 0.0, ""
    refusals: list[object] = []
    async with http(path) as served, anyio.create_task_group() as calls:

        async def hold() -> None:
            async with mcp.Client(served.url, mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                try:
                    await client.call_tool("hold", {})
                except MCPError as exc:
                    refusals.append({"code": exc.error.code, "message": exc.error.message})

        for _ in range(PENDING):
            calls.start_soon(hold)
        await journalled(path, lambda events: observed(events, "Held") == PENDING)
        started = time.monotonic()
        served.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            await served.process.wait()
        elapsed = time.monotonic() - started
        assert served.process.returncode == 0
        stderr = await served.rest_of_stderr()
    assert elapsed < 5.0, f"stopping took {elapsed:.2f}s"
    # Each call was answered why it ended (uvicorn once logged one ERROR per
    # call, "ASGI callable returned without starting response").
    assert refusals == [SHUTTING_DOWN] * PENDING
    assert "ERROR" not in stderr and "Traceback" not in stderr, stderr
    assert_stopped_in_order(journal(path))


# --- 8. echoes of caller text are bounded ---------------------------------------------


async def test_over_stdio_a_huge_name_or_uri_is_echoed_bounded(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    name, uri = "n" * HUGE, "app://" + "u" * HUGE
    async with stdio(path) as wire:
        await wire.request(call(1, name, {}))
        line = await wire.receive_line()
        answer = json.loads(line)
        assert (answer["id"], answer["error"]["code"]) == (1, types.INVALID_PARAMS)
        assert answer["error"]["message"] == "No such capability: " + "n" * 128 + "…"
        # Three echoes (message, data.capability, data.message), each bounded.
        assert len(line) < 3 * ECHO_BOUND + 300, len(line)

        await wire.request({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": uri}})
        line = await wire.receive_line()
        answer = json.loads(line)
        assert (answer["id"], answer["error"]["code"]) == (2, types.INVALID_PARAMS)
        assert len(line) < 2 * ECHO_BOUND + 300, len(line)
        # The answer must carry the id (JSON-RPC says so); the audit keeps it bounded.
        await wire.request({**call(0, "note", {"text": "x"}), "id": "i" * HUGE})
        assert len(await wire.receive_line()) < HUGE + 1000
    unknown, noted = audited(journal(path))
    assert unknown["capability"] == "n" * 128 + "…"
    assert len(json.dumps(unknown)) < 2 * ECHO_BOUND + 300
    assert noted["invocation"].endswith("/" + "i" * 128 + "…") and len(noted["invocation"]) < 200


async def test_over_http_a_huge_name_or_uri_is_echoed_bounded(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    async with http(path) as served:
        status, body = await served.post(call(1, "n" * HUGE, {}))
        assert status == 200 and len(body) < 3 * ECHO_BOUND + 400, len(body)
        assert answer_of(body)["error"]["code"] == types.INVALID_PARAMS
        read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "app://" + "u" * HUGE}}
        status, body = await served.post(read)
        assert status == 200 and len(body) < 2 * ECHO_BOUND + 400, len(body)
        assert answer_of(body)["error"]["code"] == types.INVALID_PARAMS
        served.process.send_signal(signal.SIGTERM)
        with anyio.fail_after(10):
            await served.process.wait()
    (entry,) = audited(journal(path))
    assert entry["capability"] == "n" * 128 + "…"


# --- 10, 11. lines that are not messages get answers, and dispatch nothing ------------------


async def test_a_line_that_is_not_utf8_is_a_parse_error_and_dispatches_nothing(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    async with stdio(path) as wire:
        valid = json.dumps(call(1, "note", {"text": "PLACEHOLDER"})).encode()
        for garbage in (b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"caf\xe9"):
            await wire.send(valid.replace(b"PLACEHOLDER", garbage))
            answer = await wire.receive()
            assert (answer["id"], answer["error"]["code"]) == (None, types.PARSE_ERROR)
        await wire.request(call(2, "note", {"text": "café"}))
        assert (await wire.receive())["id"] == 2
        await wire.request({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "app://notes"}})
        notes = (await wire.receive())["result"]["contents"][0]["text"]
    assert json.loads(notes) == ["café"]
    assert observed(journal(path), "Noted") == 1


async def test_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    async with stdio(path) as wire:
        for request_id in ({"a": 1}, True, False, 1.5, 1.0, None, [1]):
            await wire.request({**call(0, "note", {"text": "x"}), "id": request_id})
            answer = await wire.receive()
            assert answer == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": types.INVALID_REQUEST, "message": "Invalid Request"},
            }, request_id
        await wire.request(call(7, "note", {"text": "y"}))
        assert (await wire.receive())["id"] == 7
    assert observed(journal(path), "Noted") == 1


async def test_a_line_over_the_limit_is_answered_dropped_and_serving_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    async with stdio(path) as wire:
        await wire.request(call(1, "note", {"text": "x" * (5 * 1024 * 1024)}))
        answer = await wire.receive()
        assert (answer["id"], answer["error"]["code"]) == (None, types.INVALID_REQUEST)
        await wire.request(call(2, "note", {"text": "small"}))
        assert (await wire.receive())["id"] == 2
    assert observed(journal(path), "Noted") == 1
