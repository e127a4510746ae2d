"""``agentfx serve --transport stdio`` in a subprocess, driven by the SDK's stdio client and by raw lines.

Each test starts ``python -m agentfx serve ...`` in the repository root, so
it exercises the CLI, the stdio transport and the adapter together, on both
protocol eras and on asyncio and trio.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import msgspec
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.stdio import stdio_client
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged

from tests.mcp_app import AUDIT_FILE, SECRET
from tests.mcp_wire import INITIALIZE, call, nested, text, tools_changed

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])


def serve(target: str, **env: str) -> mcp.StdioServerParameters:
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentfx", "serve", target, "--transport", "stdio"],
        cwd=str(ROOT),
        env={**os.environ, **env},
    )


class Entry(msgspec.Struct):
    """The fields of an encoded audit entry these tests read."""

    capability: str
    transport: str
    decision: str
    outcome: str


async def context(client: mcp.Client) -> str:
    read = await client.read_resource("app://context")
    return "".join(getattr(contents, "text", "") for contents in read.contents)


def read_audit(path: Path) -> list[Entry]:
    if not path.exists():
        return []
    return [msgspec.json.decode(line, type=Entry) for line in path.read_bytes().splitlines()]


async def audited_entries(path: Path, count: int) -> list[Entry]:
    with anyio.fail_after(5):
        while len(entries := read_audit(path)) < count:
            await anyio.sleep(0.02)
    return entries


async def call_changing_tools(
    client: mcp.Client, mode: str, notifications: list[object], name: str, arguments: dict[str, Any]
) -> None:
    """Call ``name`` and see the server announce a changed tool list, the way ``mode`` hears of it."""
    if mode == "legacy":
        await client.call_tool(name, arguments)
        await tools_changed(notifications)
    else:
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool(name, arguments)
            with anyio.fail_after(5):
                assert await subscription.__anext__() == ToolsListChanged()


@MODES
async def test_the_sdk_client_over_stdio(mode: str, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    notifications: list[object] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        notifications.append(message)

    with open(tmp_path / "stderr.txt", "w") as errlog:
        transport = stdio_client(serve("tests.mcp_app:audited", **{AUDIT_FILE: str(audit)}), errlog=errlog)
        async with mcp.Client(transport, mode=mode, message_handler=handler) as client:
            expected_version = "2025-11-25" if mode == "legacy" else "2026-07-28"
            assert client.protocol_version == expected_version

            tools = [tool.name for tool in (await client.list_tools()).tools]
            assert tools == ["add", "select", "wait", "stall", "explode", "break", "fragile"]

            assert text(await client.call_tool("add", {"title": "milk"})) == "Dispatched Added"
            refused = await client.call_tool("add", {"title": 1})
            assert refused.is_error and refused.structured_content is not None
            assert refused.structured_content["_tag"] == "AgentInvalidInputError"
            unavailable = await client.call_tool("remove_selected", {})
            assert text(unavailable) == 'Capability "remove_selected" is not available right now'
            with pytest.raises(mcp.MCPError) as unknown:
                await client.call_tool("nope", {})
            assert unknown.value.error.code == types.INVALID_PARAMS
            assert text(await client.call_tool("stall", {})).startswith('"stall" was dispatched but did not complete')

            exploded = await client.call_tool("explode", {})
            assert text(exploded) == 'Capability "explode" failed unexpectedly'
            assert SECRET not in exploded.model_dump_json()

            await call_changing_tools(client, mode, notifications, "select", {"item": "milk"})
            assert "remove_selected" in [tool.name for tool in (await client.list_tools()).tools]
            completed = await client.call_tool("remove_selected", {})
            assert text(completed).splitlines()[0] == "Completed: Removed"

            items = await client.read_resource("app://items")
            assert [getattr(c, "text", None) for c in items.contents] == ["[]"]
            with pytest.raises(mcp.MCPError) as missing:
                await client.read_resource("app://nope")
            assert missing.value.error.code == types.INVALID_PARAMS

            # Cancel a call that waits for its completion: the server aborts the
            # invocation's signal and records a cancellation of a dispatched Message.
            before = len(read_audit(audit))
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(client.call_tool, "wait", None)
                with anyio.fail_after(5):
                    while '"waiting":true' not in await context(client):
                        await anyio.sleep(0.02)
                task_group.cancel_scope.cancel()
            cancelled = (await audited_entries(audit, before + 1))[-1]
            assert (cancelled.capability, cancelled.decision, cancelled.outcome) == (
                "wait",
                "dispatched",
                "AgentCancelledError",
            )
            assert text(await client.call_tool("add", {"title": "still serving"})) == "Dispatched Added"

    outcomes = [(e.capability, e.outcome) for e in read_audit(audit)]
    assert ("explode", "AgentDefect") in outcomes
    assert all(e.transport == "mcp" for e in read_audit(audit))


# --- the todo example ----------------------------------------------------------------


@MODES
async def test_the_todo_example_served_by_agentfx_serve(mode: str) -> None:
    notifications: list[object] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        notifications.append(message)

    async with mcp.Client(serve("examples.todo.app:app"), mode=mode, message_handler=handler) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["create_todo", "select_todo"]
        created = await client.call_tool("create_todo", {"title": "Try agentfx"})
        assert created.structured_content is not None
        made = created.structured_content["completion"]["message"]
        assert made["title"] == "Try agentfx"
        # A model reading only the text learns the new id too.
        summary, data = text(created).split("\n")
        assert summary == "Completed: CreatedTodo"
        assert json.loads(data) == created.structured_content
        assert f'"id":"{made["id"]}"' in data
        invalid = await client.call_tool("create_todo", {"title": 42})
        assert invalid.is_error and text(invalid) == 'Invalid input for "create_todo": "title" must be a string'
        unavailable = await client.call_tool("delete_selected_todo", {})
        assert text(unavailable) == 'Capability "delete_selected_todo" is not available right now'

        await call_changing_tools(client, mode, notifications, "select_todo", {"id": "todo-1"})
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert listed == ["create_todo", "delete_selected_todo", "select_todo", "cleared_selection"]

        todos = json.loads(
            "".join(getattr(c, "text", "") for c in (await client.read_resource("app://todos")).contents)
        )
        assert [todo["title"] for todo in todos] == ["Buy milk", "Write the report", "Try agentfx"]
        context = json.loads(
            "".join(getattr(c, "text", "") for c in (await client.read_resource("app://context")).contents)
        )
        assert context["selected_todo_id"] == "todo-1"


# --- raw lines ----------------------------------------------------------------------


class Lines:
    """A subprocess spoken to one JSON-RPC line at a time."""

    def __init__(self, process: Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self._process = process
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self.received: list[bytes] = []

    async def send(self, line: str | bytes) -> None:
        data = line.encode() if isinstance(line, str) else line
        await self._stdin.send(data + b"\n")

    async def request(self, message: dict[str, Any]) -> None:
        await self.send(json.dumps(message))

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(10):
            line = await self._stdout.receive_until(b"\n", 16 * 1024 * 1024)
        self.received.append(line)
        return json.loads(line)


@asynccontextmanager
async def raw(target: str) -> AsyncGenerator[Lines]:
    command = [sys.executable, "-m", "agentfx", "serve", target, "--transport", "stdio"]
    async with await anyio.open_process(command, cwd=ROOT, stderr=None) as process:
        lines = Lines(process)
        try:
            await lines.request(INITIALIZE)
            assert (await lines.receive())["result"]["protocolVersion"] == "2025-11-25"
            await lines.request({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield lines
        finally:
            assert process.stdin is not None
            await process.stdin.aclose()
            with anyio.fail_after(10):
                await process.wait()


async def test_bad_input_on_the_wire_gets_the_right_answer_and_the_server_keeps_serving() -> None:
    async with raw("tests.mcp_app:app") as lines:
        # Blank lines are no messages: nothing answers them, so the next answer is the parse error's.
        for blank in (b"", b"  ", b"\r", b"\t \r"):
            await lines.send(blank)
        await lines.send(b"{this is not json")
        answer = await lines.receive()
        assert (answer["id"], answer["error"]["code"]) == (None, types.PARSE_ERROR)

        await lines.send(b'"a string, not a message"')
        assert (await lines.receive())["error"]["code"] == types.INVALID_REQUEST

        await lines.request({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]})
        answer = await lines.receive()
        assert (answer["id"], answer["error"]["code"]) == (1, types.INVALID_REQUEST)

        await lines.request({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
        answer = await lines.receive()
        assert (answer["id"], answer["error"]["code"]) == (2, types.METHOD_NOT_FOUND)

        for request_id, arguments in ((3, [1, 2]), (4, "title"), (5, 7)):
            await lines.request(call(request_id, "add", arguments))
            answer = await lines.receive()
            assert (answer["id"], answer["error"]["code"]) == (request_id, types.INVALID_PARAMS)

        await lines.request(call(6, "add", {"title": nested(400)}))
        assert (await lines.receive())["error"]["code"] == types.PARSE_ERROR

        await lines.request(call(7, "add", {"title": nested(60)}))
        answer = await lines.receive()
        assert answer["id"] == 7 and answer["result"]["isError"] is True
        assert answer["result"]["structuredContent"]["path"] == "$.title"

        await lines.request(call(8, "add", {"title": "x" * 2_000_000}))
        answer = await lines.receive()
        assert answer["id"] == 8 and answer["result"]["content"][0]["text"] == "Dispatched Added"

        await lines.request(call(9, "add", {"title": "t", f"k{'y' * 10_000}": nested(50)}))
        answer = await lines.receive()
        assert answer["result"]["structuredContent"]["_tag"] == "AgentInvalidInputError"

        await lines.request({"jsonrpc": "2.0", "id": 10, "method": "resources/read", "params": {"uri": "app://nope"}})
        answer = await lines.receive()
        assert (answer["id"], answer["error"]["code"]) == (10, types.INVALID_PARAMS)

        await lines.request(call(11, "explode", {}))
        answer = await lines.receive()
        assert answer["result"]["content"][0]["text"] == 'Capability "explode" failed unexpectedly'

        await lines.request(call(12, "no_such_tool", {}))
        answer = await lines.receive()
        assert (answer["id"], answer["error"]["code"]) == (12, types.INVALID_PARAMS)

        await lines.request(call(13, "add", {"title": "still serving"}))
        assert (await lines.receive())["result"]["content"][0]["text"] == "Dispatched Added"

        assert SECRET.encode() not in b"".join(lines.received)


async def test_serve_refuses_a_target_it_cannot_serve() -> None:
    command = [sys.executable, "-m", "agentfx", "serve", "tests.mcp_app:definition"]
    done = await anyio.run_process(command, cwd=ROOT, check=False)
    assert done.returncode == 2
    assert b"serve accepts an App" in done.stderr


# --- what the agent sees, over stdio (§9) ---------------------------------------------------


@MODES
async def test_over_stdio_changes_progress_and_resources_are_told_in_order(mode: str) -> None:
    events: list[object] = []
    reported: list[str | None] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        events.append(message)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append(message)

    async with mcp.Client(serve("tests.mcp_app:app"), mode=mode, message_handler=handler) as client:
        listed = (await client.list_tools()).tools
        assert all(tool.output_schema is not None for tool in listed)
        await client.call_tool("add", {"title": "milk"})
        if mode == "legacy":
            subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri="app://items"))
            await client.session.send_request(subscribe, types.EmptyResult)
            await client.call_tool("select", {"item": "milk"})
            # Over one pipe, in order: the list change was read before the answer.
            assert any(isinstance(e, types.ToolListChangedNotification) for e in events)
            await client.call_tool("add", {"title": "tea"})
            with anyio.fail_after(5):
                while not any(isinstance(e, types.ResourceUpdatedNotification) for e in events):
                    await anyio.sleep(0.02)
            [update] = [e for e in events if isinstance(e, types.ResourceUpdatedNotification)]
            assert str(update.params.uri) == "app://items"
        else:
            async with client.listen(tools_list_changed=True, resource_subscriptions=["app://items"]) as subscription:
                await client.call_tool("select", {"item": "milk"})
                event: object = None
                with anyio.CancelScope() as scope:
                    scope.cancel()
                    event = await subscription.__anext__()
                assert event == ToolsListChanged()
                await client.call_tool("add", {"title": "tea"})
                with anyio.fail_after(5):
                    assert await subscription.__anext__() == ResourceUpdated(uri="app://items")
        # stall waits 0.05 s for a completion that never comes: one progress, then the timeout.
        result = await client.call_tool("stall", {}, progress_callback=on_progress)
        answered = len(reported)
        await anyio.sleep(0.2)
    assert result.is_error and text(result).startswith('"stall" was dispatched but did not complete within 0.05s')
    assert reported == ["Dispatched Stalled; waiting for Finished"]
    assert answered == 1, "no progress after the answer"
