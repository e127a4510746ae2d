"""``agentfx serve MODULE:ATTR --transport a2a``: the todo example over A2A in a subprocess, driven by the SDK's client."""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.proto_utils import validate_proto_required_fields
from anyio.streams.buffered import BufferedByteReceiveStream
from google.protobuf import json_format

from agentfx.cli import ExitCode, main

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@asynccontextmanager
async def agentfx_serve_a2a(*options: str) -> AsyncGenerator[tuple[str, str]]:
    """The todo example served over A2A in a subprocess: what it printed first, and its JSON-RPC URL."""
    command = [sys.executable, "-m", "agentfx", "serve", "examples.todo.app:app", "--transport", "a2a", *options]
    async with await anyio.open_process(command, cwd=ROOT) as process:
        try:
            assert process.stderr is not None
            stderr = BufferedByteReceiveStream(process.stderr)
            before = ""
            with anyio.fail_after(20):
                while not (line := (await stderr.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    before += line + "\n"
            yield before, line.rsplit(" ", 1)[-1]
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(10):
                await process.wait()


async def _send(client: Any, *, task_id: str = "", **data: object) -> Task:
    request = SendMessageRequest(
        message=Message(message_id=f"m-{id(data)}", role=Role.ROLE_USER, task_id=task_id, parts=[new_data_part(data)])
    )
    (response,) = [response async for response in client.send_message(request)]
    task: Task = response.task
    validate_proto_required_fields(task)
    return task


def _artifact(task: Task) -> Any:
    return json_format.MessageToDict(task.artifacts[0].parts[0].data)


async def test_agentfx_serve_over_a2a_serves_the_todo_example_with_its_card_and_confirmation() -> None:
    async with (
        agentfx_serve_a2a("--port", "0", "--allowed-host", "agent.example:*") as (before, url),
        httpx.AsyncClient(timeout=20) as http,
    ):
        assert before == ""
        assert url.startswith("http://127.0.0.1:") and url.endswith("/a2a"), url
        base = url.removesuffix("/a2a")
        port = base.rsplit(":", 1)[1]
        card_path = f"{base}/.well-known/agent-card.json"
        listed = await http.get(card_path, headers={"Host": f"agent.example:{port}"})
        foreign = await http.get(card_path, headers={"Host": f"evil.example:{port}"})
        assert (listed.status_code, foreign.status_code) == (200, 421)
        # The card is resolved from the well-known path, and names the URL served.
        client = await create_client(base, ClientConfig(httpx_client=http, streaming=False))
        try:
            card = (await http.get(f"{base}/.well-known/agent-card.json")).json()
            assert [i["url"] for i in card["supportedInterfaces"]] == [url, url]
            assert [s["id"] for s in card["skills"]] == [
                "create_todo",
                "delete_selected_todo",
                "select_todo",
                "cleared_selection",
            ]
            created = await _send(client, skill="create_todo", input={"title": "Buy eggs"})
            assert created.status.state == TaskState.TASK_STATE_COMPLETED
            todo = _artifact(created)["completion"]["message"]
            assert todo["title"] == "Buy eggs"
            selected = await _send(client, skill="select_todo", input={"id": todo["id"]})
            assert selected.status.state == TaskState.TASK_STATE_COMPLETED
            waiting = await _send(client, skill="delete_selected_todo", input={})
            assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert 'needs a person to confirm: Delete the todo "Buy eggs" (todo-3)?' in waiting.status.message.parts[0].text
            deleted = await _send(client, task_id=waiting.id, confirm=True)
            assert deleted.status.state == TaskState.TASK_STATE_COMPLETED
            assert _artifact(deleted)["completion"]["message"] == {"type": "DeletedTodo", "id": todo["id"]}
        finally:
            await client.close()


async def test_agentfx_serve_over_a2a_on_a_public_address_warns_there_is_no_authentication() -> None:
    async with agentfx_serve_a2a("--host", "0.0.0.0", "--port", "0") as (before, url):
        assert before.startswith("agentfx: warning: serving 0.0.0.0 without authentication;"), before
        assert url.startswith("http://0.0.0.0:")


def test_a_target_that_is_not_servable_is_a_usage_error_over_a2a(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "examples.todo.app:AppAgent", "--transport", "a2a"]) == ExitCode.USAGE
    assert "serve accepts an App" in capsys.readouterr().err
