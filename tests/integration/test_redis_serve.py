"""Three ``agentfx serve --transport http --redis`` processes, one Model: the real MCP client over HTTP.

Calls are spread across the three servers; each answers from its own copy
of the Model, a completion is settled by whichever process holds the writer
lease, and a change made through one server reaches ``list_changed``
listeners held by the others, over both MCP revisions the endpoint serves. Only the public CLI and the public client are
used, so the test does not depend on how the endpoint is built. The SDK's
HTTP client runs on asyncio here (see ``tests/integration/test_mcp_http.py``
for why it is not run on trio); the server side is asyncio-only anyway.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp
import mcp_types as types
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ToolsListChanged
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.redis_server import RedisServer
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.redis_app:app"


@dataclass
class Serving:
    process: anyio.abc.Process
    url: str


@asynccontextmanager
async def serve(*options: str) -> AsyncGenerator[Serving]:
    command = [sys.executable, "-m", "agentfx", "serve", TARGET, "--transport", "http", "--port", "0", *options]
    async with await anyio.open_process(command, cwd=ROOT) as process:
        try:
            assert process.stderr is not None
            lines = BufferedByteReceiveStream(process.stderr)
            with anyio.fail_after(20):
                while not (line := (await lines.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    pass
            yield Serving(process, line.rsplit(" ", 1)[-1])
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(10):
                await process.wait()


@asynccontextmanager
async def connect(url: str, **options: Any) -> AsyncGenerator[mcp.Client]:
    async with create_mcp_http_client() as http:
        async with mcp.Client(streamable_http_client(url, http_client=http), **options) as session:
            yield session


@asynccontextmanager
async def three(server: RedisServer, ns: str) -> AsyncGenerator[list[Serving]]:
    # Started side by side: each process spends most of its start importing,
    # which the three can do at once rather than one after another.
    servers: list[Serving | None] = [None] * 3
    async with AsyncExitStack() as stack:

        async def start(index: int) -> None:
            servers[index] = await stack.enter_async_context(serve("--redis", server.url, "--namespace", ns))

        async with anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(start, index)
        try:
            yield [s for s in servers if s is not None]
        finally:
            # Stopped side by side too: each then only waits for its own exit.
            for running in servers:
                if running is not None and running.process.returncode is None:
                    running.process.terminate()


def text(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def total(session: mcp.Client) -> int:
    read = await session.read_resource("app://total")
    return json.loads("".join(getattr(contents, "text", "") for contents in read.contents))


async def test_calls_spread_across_three_processes_act_on_one_model(server: RedisServer) -> None:
    ns = f"serve-{uuid.uuid4().hex[:8]}"
    async with three(server, ns) as servers, AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(connect(s.url)) for s in servers]

        async def add(index: int) -> None:
            answer = await sessions[index % 3].call_tool("add", {"key": f"k{index}", "n": index})
            assert text(answer) == "Dispatched Added"

        async with anyio.create_task_group() as group:
            for index in range(30):
                group.start_soon(add, index)
        expected = sum(range(30))
        # Each server answered its own calls after its copy applied them; the others catch up from the log.
        with anyio.fail_after(5):
            while [await total(session) for session in sessions] != [expected] * 3:
                await anyio.sleep(0.02)

        # A completion: the command that answers runs on the writer, whichever process took the call.
        pids: set[int] = set()
        for index, session in enumerate(sessions):
            answer = await session.call_tool("request", {"key": f"r{index}"})
            assert not answer.is_error, text(answer)
            assert text(answer).startswith("Completed: Confirmed")
            assert answer.structured_content is not None
            message = answer.structured_content["completion"]["message"]
            assert message["key"] == f"r{index}"
            pids.add(message["by"])
        server_pids = {s.process.pid for s in servers}
        assert len(pids) == 1 and pids <= server_pids, "one writer settled all three, wherever they were called"


async def test_a_change_through_one_process_reaches_a_list_changed_listener_on_another(server: RedisServer) -> None:
    ns = f"serve-{uuid.uuid4().hex[:8]}"
    notifications: list[object] = []

    async def handler(message: object) -> None:
        notifications.append(message)

    async with (
        three(server, ns) as (a, b, c),
        connect(a.url) as on_a,
        connect(b.url, message_handler=handler, mode="legacy") as on_b,
        connect(c.url) as on_c,
    ):
        # B's client speaks the 2025-11-25 sessions (a notification on its stream),
        # C's the 2026-07-28 revision (a subscriptions/listen stream).
        assert "withdraw" not in [tool.name for tool in (await on_b.list_tools()).tools]
        async with on_c.listen(tools_list_changed=True) as stream:
            assert text(await on_a.call_tool("open", {})) == "Dispatched Opened"
            with anyio.fail_after(5):
                assert isinstance(await anext(stream), ToolsListChanged)
                while not any(isinstance(m, types.ToolListChangedNotification) for m in notifications):
                    await anyio.sleep(0.02)
        assert "withdraw" in [tool.name for tool in (await on_b.list_tools()).tools]
        answer = await on_b.call_tool("withdraw", {"n": 5})
        assert text(answer) == "Dispatched Withdrew"
        with anyio.fail_after(5):
            while await total(on_a) != -5:
                await anyio.sleep(0.02)
