"""A2A's byte budget and per-owner bound over HTTP: a real uvicorn server, the SDK's own clients (1.0 and 0.3), asyncio and trio.

Each test gets a server of its own whose default store may hold
:data:`BUDGET` bytes and one principal's :data:`PER_OWNER` tasks in
progress, so both are reached in a few calls. Messages are made large with
message metadata, which the executor does not read but a task's history
keeps. The application, the server harness and the wire-validating client
are ``tests/integration/test_a2a_http.py``'s.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf.struct_pb2 import Struct

from agentfx.a2a._store import AT_CAPACITY, OWNER_AT_CAPACITY, TOO_LARGE
from tests.integration.test_a2a_http import (
    PROTOCOLS,
    Caller,
    Served,
    caller,
    counter_served,
    erase_waiting,
    valid_task,
)
from tests.integration.test_a2a_store_http import state_of, take_errors

pytestmark = pytest.mark.anyio

BUDGET = 100_000
"""Bytes the server's store keeps: two tasks padded with :data:`PAD` fit, three do not."""

PAD = 40_000
PER_OWNER = 2


@pytest.fixture
def served() -> Iterator[Served]:
    with counter_served(max_task_bytes=BUDGET, max_live_tasks_per_owner=PER_OWNER) as state:
        yield state


async def send_padded(a2a: Caller, data: dict[str, Any], pad: int, task_id: str = "") -> Task:
    """One data part, in a message carrying ``pad`` more bytes of metadata."""
    metadata = Struct()
    metadata.update({"pad": "x" * pad})
    message = Message(
        message_id=uuid.uuid4().hex, role=Role.ROLE_USER, task_id=task_id, parts=[new_data_part(data)], metadata=metadata
    )
    (task,) = [response.task async for response in a2a.client.send_message(SendMessageRequest(message=message))]
    return valid_task(task)


async def padded_waiting(a2a: Caller) -> Task:
    task = await send_padded(a2a, {"skill": "erase", "input": {}}, PAD)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    return task


@PROTOCOLS
async def test_a_follow_up_too_large_for_the_byte_budget_is_refused_typed_and_nothing_runs(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        history = len((await a2a.get(waiting.id)).history)
        before = len(served.records)
        with pytest.raises(UnsupportedOperationError) as refused:
            await send_padded(a2a, {"confirm": True}, BUDGET, task_id=waiting.id)
        assert take_errors(a2a) == [-32004]
        assert len(served.records) == before  # the answer was not taken: nothing dispatched, nothing audited
        kept = await a2a.get(waiting.id)
        # An answer that fits is still taken.
        done = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
    assert TOO_LARGE in str(refused.value)
    assert (kept.status.state, len(kept.history)) == (TaskState.TASK_STATE_INPUT_REQUIRED, history)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [(r.outcome, r.confirmed) for r in served.audited(waiting.id)] == [
        ("AgentConfirmationRequiredError", False),
        ("dispatched", True),
    ]


@PROTOCOLS
async def test_a_byte_budget_full_of_waiting_tasks_refuses_a_large_new_one_and_serves_a_small_one(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        first = await padded_waiting(a2a)
        async with caller(served, protocol, token="gus") as gus:
            second = await padded_waiting(gus)  # another owner: the budget is over every owner
        before = len(served.records)
        with pytest.raises(UnsupportedOperationError) as refused:
            await send_padded(a2a, {"skill": "ping", "input": {}}, PAD)
        assert take_errors(a2a) == [-32004]
        assert len(served.records) == before  # nothing dispatched
        small = await a2a.call("ping", {})  # the budget is bytes: a small task still fits
        cancelled = await a2a.cancel(first.id)
        # The cancelled task is finished: its room goes to the large task, the first to finish going first.
        large = await send_padded(a2a, {"skill": "ping", "input": {}}, PAD)
        gone = await state_of(a2a, first.id)
        take_errors(a2a)
        async with caller(served, protocol, token="gus") as gus:
            still = await state_of(gus, second.id)
    assert AT_CAPACITY in str(refused.value)
    assert small.status.state == large.status.state == TaskState.TASK_STATE_COMPLETED
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert (gone, still) == (None, TaskState.TASK_STATE_INPUT_REQUIRED)


@PROTOCOLS
async def test_an_owner_at_its_bound_is_refused_a_new_task_while_another_owners_tasks_run(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as ann:
        waiting = [await erase_waiting(ann, served) for _ in range(PER_OWNER)]
        before = len(served.records)
        with pytest.raises(UnsupportedOperationError) as refused:
            await ann.call("ping", {})
        assert [answer["error"]["message"] for _, answer in ann.wire if "error" in answer] == [OWNER_AT_CAPACITY]
        assert take_errors(ann) == [-32004]
        assert len(served.records) == before  # nothing dispatched, nothing audited
        # Another principal is served as before, up to its own bound.
        async with caller(served, protocol, token="gus") as gus:
            theirs = [await erase_waiting(gus, served), await gus.call("ping", {})]
        # Once one of ann's tasks is answered, she may start another.
        await ann.send(new_data_part({"confirm": False}), task_id=waiting[0].id)
        again = await ann.call("ping", {})
    assert OWNER_AT_CAPACITY in str(refused.value)
    assert [task.status.state for task in theirs] == [TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_COMPLETED]
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
