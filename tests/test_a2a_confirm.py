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
from typing import Any, cast

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


async def test_what_a_task_asked_is_read_back_from_a_store_that_keeps_the_0_3_shape() -> None:
    # The SDK's 0.3 conversion (a DatabaseTaskStore's 0.3 rows) drops every part's media type.
    from a2a.compat.v0_3.conversions import to_compat_task, to_core_task
    from a2a.types.a2a_pb2 import Message as A2AMessage
    from a2a.types.a2a_pb2 import Role, TaskStatus

    from agentfx.a2a import _executor  # pyright: ignore[reportPrivateUsage]

    asked = agentfx.AgentConfirmationRequiredError.of("delete_selected", "DeleteSelected", 'Delete "milk"?')
    parts = [_executor._text_part(asked.message), *_executor._data_parts(msgspec.to_builtins(asked))]  # pyright: ignore[reportPrivateUsage]
    status = TaskStatus(
        state=TaskState.TASK_STATE_INPUT_REQUIRED, message=A2AMessage(message_id="m", role=Role.ROLE_AGENT, parts=parts)
    )
    task = Task(id="t", context_id="c", status=status)
    stored = to_core_task(to_compat_task(task))
    assert {part.media_type for part in stored.status.message.parts} == {""}
    assert _executor._asked(stored) == asked  # pyright: ignore[reportPrivateUsage]
    # Without the text part, the data part still says it.
    del stored.status.message.parts[2]
    assert _executor._asked(stored) == asked  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("answer", [True, False])
async def test_an_answer_to_a_task_whose_prompt_cannot_be_read_approves_nothing(answer: bool) -> None:
    # Whatever the store lost, a "yes" is not taken for a prompt nobody can name,
    # and a "no" never lets the call through.
    from agentfx.a2a import _executor  # pyright: ignore[reportPrivateUsage]

    for selected, asks in (("report", True), ("", False)):
        host: RecordingHost[Model, Message, None] = RecordingHost(Model(selected=selected), update=update)
        executor = _executor.AgentfxExecutor(agentfx.bind(CONTRACT, host=host.host))
        running = _executor._Running()  # pyright: ignore[reportPrivateUsage]
        state, said_back, _ = await executor._dispatch(  # pyright: ignore[reportPrivateUsage]
            cast(Any, None), "t", "delete_selected", {}, running, answer, None
        )
        if asks:
            # Asked again, in the words it would now use; nothing sent.
            assert state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert said_back.text == '"delete_selected" needs a person to confirm: Delete "report"?'
            assert host.dispatched == []
        elif answer:
            # Nobody needs asking any more: the call goes on, as it would have anyway.
            assert state == TaskState.TASK_STATE_COMPLETED and host.dispatched == [DeleteSelected()]
        else:
            assert state == TaskState.TASK_STATE_REJECTED and host.dispatched == []
            assert said_back.text == "Declined: what this task asked"
