"""A person's answer to an A2A task waiting on confirmation approves, or declines, exactly what it was asked.

The task keeps the prompt it showed; its answer is read against it, on the
Model as it is when the answer comes (DESIGN §10: a later Model change does not
retarget the call, so an approval covers the prompt the person saw, and nothing
else). The SDK's server runs on asyncio only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import msgspec
import pytest
from a2a.types.a2a_pb2 import SendMessageResponse, Task, TaskState
from google.protobuf import json_format
from starlette.applications import Starlette

import agentfx
from agentfx.a2a import a2a_app, agent_card
from agentfx.testing import RecordingHost

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


class Model(msgspec.Struct, frozen=True):
    selected: str = "milk"


class Select(msgspec.Struct, frozen=True, tag=True):
    item: str


class DeleteSelected(msgspec.Struct, frozen=True, tag=True):
    pass


Message = Select | DeleteSelected


def update(model: Model, message: Message) -> Model:
    if isinstance(message, Select):
        return msgspec.structs.replace(model, selected=message.item)
    return model


def delete_prompt(request: agentfx.AuthorizationRequest[Any, Any, Model]) -> bool | agentfx.Confirm:
    if request.model.selected == "":
        return True  # nothing selected: nothing to lose, nobody is asked
    return agentfx.Confirm(f'Delete "{request.model.selected}"?')


Agent = agentfx.for_model(Model)
CONTRACT = Agent.define(
    Agent.expose(
        Message,
        Agent.variant(Select, "Select an item", name="select"),
        Agent.variant(DeleteSelected, "Delete the selected item", name="delete_selected", authorize=delete_prompt),
    )
)
CARD = agent_card(CONTRACT, name="t", description="t", url="http://127.0.0.1/a2a", version="1")


@asynccontextmanager
async def served() -> AsyncGenerator[tuple[httpx.AsyncClient, RecordingHost[Model, Message, None], agentfx.AuditLog]]:
    host: RecordingHost[Model, Message, None] = RecordingHost(Model(), update=update)
    log = agentfx.audit_log()
    asgi: Starlette = a2a_app(agentfx.bind(CONTRACT, host=host.host, audit=log), CARD)
    async with asgi.router.lifespan_context(asgi):
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers={"A2A-Version": "1.0"}) as http:
            yield http, host, log


async def send(http: httpx.AsyncClient, data: dict[str, object], task_id: str | None = None) -> Task:
    message: dict[str, object] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": data}]}
    if task_id is not None:
        message["taskId"] = task_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = (await http.post("/a2a", json=body)).json()
    return json_format.ParseDict(answer["result"], SendMessageResponse()).task


def said(task: Task) -> str:
    return task.status.message.parts[0].text.splitlines()[0]


async def test_a_yes_approves_only_the_prompt_it_answered_and_a_changed_call_asks_again() -> None:
    async with served() as (http, host, _):
        waiting = await send(http, {"skill": "delete_selected", "input": {}})
        assert said(waiting) == '"delete_selected" needs a person to confirm: Delete "milk"?'
        await send(http, {"skill": "select", "input": {"item": "report"}})  # meanwhile, another selection
        again = await send(http, {"confirm": True}, waiting.id)
        # Approving "milk" does not approve deleting "report": asked again, in the new words.
        assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert said(again) == '"delete_selected" needs a person to confirm: Delete "report"?'
        assert DeleteSelected() not in host.dispatched
        done = await send(http, {"confirm": True}, waiting.id)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert host.dispatched.count(DeleteSelected()) == 1


async def test_a_yes_to_an_unchanged_prompt_dispatches_once_confirmed() -> None:
    async with served() as (http, host, log):
        waiting = await send(http, {"skill": "delete_selected", "input": {}})
        done = await send(http, {"confirm": True}, waiting.id)
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert host.dispatched == [DeleteSelected()]
        assert [(e.outcome, e.confirmed) for e in log.entries()][-1] == ("dispatched", True)
        # A second yes to the finished task dispatches nothing more.
        await http.post("/a2a", json={"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": {
            "messageId": "again", "role": "ROLE_USER", "taskId": waiting.id, "parts": [{"data": {"confirm": True}}]}}})
        assert host.dispatched == [DeleteSelected()]


async def test_a_no_declines_even_when_the_call_would_no_longer_ask() -> None:
    async with served() as (http, host, log):
        waiting = await send(http, {"skill": "delete_selected", "input": {}})
        assert said(waiting) == '"delete_selected" needs a person to confirm: Delete "milk"?'
        # Meanwhile the Model moved on so that authorize would now allow the call outright.
        await send(http, {"skill": "select", "input": {"item": ""}})
        declined = await send(http, {"confirm": False}, waiting.id)
        assert declined.status.state == TaskState.TASK_STATE_REJECTED
        assert said(declined) == 'Declined: Delete "milk"?'
        assert DeleteSelected() not in host.dispatched
        # The "no" is audited as the call it answered, a refusal.
        last = log.entries()[-1]
        assert (last.capability, last.decision, last.outcome) == ("delete_selected", "refused", "AgentAuthorizationError")
        # And the same call, asked now, is allowed outright: only the person's "no" stopped it.
        allowed = await send(http, {"skill": "delete_selected", "input": {}})
        assert allowed.status.state == TaskState.TASK_STATE_COMPLETED
        assert host.dispatched.count(DeleteSelected()) == 1


async def test_a_no_to_an_unchanged_prompt_declines_it() -> None:
    async with served() as (http, host, log):
        waiting = await send(http, {"skill": "delete_selected", "input": {}})
        declined = await send(http, {"confirm": False}, waiting.id)
        assert declined.status.state == TaskState.TASK_STATE_REJECTED
        assert said(declined) == 'Declined: Delete "milk"?'
        assert DeleteSelected() not in host.dispatched
        assert [e.outcome for e in log.entries()] == ["AgentConfirmationRequiredError", "AgentAuthorizationError"]
