"""Confirming a delete of the todo example over ``agentfx serve --transport stdio``, on both revisions.

The SDK's stdio client drives a real subprocess; its elicitation callback
plays the person. ``legacy`` is asked in band over the session, ``auto``
answers through ``InputRequiredResult`` and the client's retry. Runs on
asyncio and trio.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import mcp
import mcp_types as types
import msgspec
import pytest
from mcp.client.session import ClientRequestContext

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])
APPROVE: types.InputResponses = {"confirm": types.ElicitResult(action="accept", content={"confirm": True})}


def serve(target: str, **env: str) -> mcp.StdioServerParameters:
    return mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentfx", "serve", target, "--transport", "stdio"],
        cwd=str(ROOT),
        env={**os.environ, **env},
    )


def text(result: types.CallToolResult) -> str:
    """The reply's first line: the summary or the refusal (a success's data follows on the next line)."""
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent)).split("\n")[0]


class Person:
    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": self.answers.pop(0)})


async def todo_titles(client: mcp.Client) -> list[str]:
    read = await client.read_resource("app://todos")
    return [todo["title"] for todo in msgspec.json.decode("".join(getattr(c, "text", "") for c in read.contents))]


@MODES
async def test_deleting_a_todo_asks_the_person_and_does_what_they_say(mode: str) -> None:
    person = Person(False, True)
    async with mcp.Client(serve("examples.todo.app:app"), mode=mode, elicitation_callback=person) as client:
        await client.call_tool("select_todo", {"id": "todo-1"})
        declined = await client.call_tool("delete_selected_todo", {})
        assert declined.is_error
        assert text(declined) == 'Declined: Delete the todo "Buy milk" (todo-1)?'
        assert await todo_titles(client) == ["Buy milk", "Write the report"]
        approved = await client.call_tool("delete_selected_todo", {})
        assert text(approved) == "Completed: DeletedTodo"
        assert await todo_titles(client) == ["Write the report"]
    assert person.asked == ['Delete the todo "Buy milk" (todo-1)?'] * 2


@MODES
async def test_a_client_that_cannot_ask_is_told_and_nothing_is_deleted(mode: str) -> None:
    async with mcp.Client(serve("examples.todo.app:app"), mode=mode) as client:
        await client.call_tool("select_todo", {"id": "todo-1"})
        result = await client.call_tool("delete_selected_todo", {})
        assert result.is_error
        assert text(result) == '"delete_selected_todo" needs a person to confirm: Delete the todo "Buy milk" (todo-1)?'
        assert result.structured_content is not None
        assert result.structured_content["_tag"] == "AgentConfirmationRequiredError"
        assert await todo_titles(client) == ["Buy milk", "Write the report"]


async def test_over_stdio_a_replayed_or_forged_request_state_deletes_nothing() -> None:
    async with mcp.Client(serve("examples.todo.app:app"), mode="auto", elicitation_callback=Person()) as client:
        session = client.session
        await client.call_tool("select_todo", {"id": "todo-1"})
        first = await session.call_tool("delete_selected_todo", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        state = first.request_state

        async def retry(request_state: str, arguments: dict[str, Any] | None = None) -> object:
            return await session.call_tool(
                "delete_selected_todo",
                arguments if arguments is not None else {},
                input_responses=APPROVE,
                request_state=request_state,
                allow_input_required=True,
            )

        for forged in (state[:-2] + ("AA" if not state.endswith("AA") else "BB"), "v1.AAAA"):
            with pytest.raises(mcp.MCPError) as refused:
                await retry(forged)
            assert refused.value.error.message == "Invalid or expired requestState"
        # The payload-free capability, approved for {} and retried with another payload.
        with pytest.raises(mcp.MCPError):
            await retry(state, {"sneaky": True})
        assert await todo_titles(client) == ["Buy milk", "Write the report"]

        done = await retry(state)
        assert isinstance(done, types.CallToolResult) and text(done) == "Completed: DeletedTodo"
        await client.call_tool("select_todo", {"id": "todo-2"})
        with pytest.raises(mcp.MCPError) as replayed:
            await retry(state)
        assert replayed.value.error.message == "Invalid or expired requestState"
        assert await todo_titles(client) == ["Write the report"]
