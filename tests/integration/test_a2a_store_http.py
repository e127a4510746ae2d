"""A2A's bounded task store over HTTP: a real uvicorn server, the SDK's own clients (1.0 and 0.3), asyncio and trio.

Each test gets a server of its own whose default store keeps three tasks, so
the bound is reached in a few calls. The application, the server harness and
the wire-validating client are ``tests/integration/test_a2a_http.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError

from agentfx.a2a._store import AT_CAPACITY
from tests.integration.test_a2a_http import (
    PROTOCOLS,
    Caller,
    Served,
    caller,
    counter_served,
    erase_waiting,
)

pytestmark = pytest.mark.anyio

BOUND = 3


@pytest.fixture
def served() -> Iterator[Served]:
    with counter_served(max_tasks=BOUND) as state:
        yield state


def take_errors(a2a: Caller) -> list[int]:
    """The JSON-RPC error codes answered so far, taken off the wire (which is then validated as results only)."""
    codes = [answer["error"]["code"] for _, answer in a2a.wire if "error" in answer]
    a2a.wire[:] = [(request, answer) for request, answer in a2a.wire if "error" not in answer]
    return codes


async def state_of(a2a: Caller, task_id: str) -> TaskState | None:
    try:
        return (await a2a.get(task_id)).status.state
    except TaskNotFoundError:
        return None


@PROTOCOLS
async def test_past_the_bound_the_oldest_finished_tasks_go_and_their_get_is_not_found(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        tasks = [await a2a.call("ping", {}) for _ in range(BOUND + 2)]
        states = [await state_of(a2a, task.id) for task in tasks]
        assert take_errors(a2a) == [-32001, -32001]  # TaskNotFoundError, as for an id that never existed
    assert states == [None, None] + [TaskState.TASK_STATE_COMPLETED] * BOUND
    # Every call was made; eviction forgets a task, never the call.
    assert all(served.audited(task.id) for task in tasks)


@PROTOCOLS
async def test_a_task_waiting_for_confirmation_outlives_eviction_pressure_and_is_still_answered(
    served: Served, protocol: str
) -> None:
    async with caller(served, protocol) as a2a:
        waiting = await erase_waiting(a2a, served)
        pings = [await a2a.call("ping", {}) for _ in range(BOUND + 1)]
        assert await state_of(a2a, waiting.id) == TaskState.TASK_STATE_INPUT_REQUIRED
        done = await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
        states = [await state_of(a2a, ping.id) for ping in pings]
        take_errors(a2a)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    # The waiting task and the most recent pings were kept all along.
    assert states == [None] * (BOUND - 1) + [TaskState.TASK_STATE_COMPLETED] * 2
    assert [(r.outcome, r.confirmed) for r in served.audited(waiting.id)] == [
        ("AgentConfirmationRequiredError", False),
        ("dispatched", True),
    ]


@PROTOCOLS
async def test_a_store_full_of_waiting_tasks_refuses_a_new_one_with_a_typed_error(served: Served, protocol: str) -> None:
    async with caller(served, protocol) as a2a:
        waiting = [await erase_waiting(a2a, served) for _ in range(BOUND)]
        before = len(served.records)
        with pytest.raises(UnsupportedOperationError) as refused:
            await a2a.call("ping", {})
        assert take_errors(a2a) == [-32004]
        assert len(served.records) == before  # nothing was dispatched, or even audited
        # Every waiting task is still there; cancelling one makes room.
        assert [await state_of(a2a, task.id) for task in waiting] == [TaskState.TASK_STATE_INPUT_REQUIRED] * BOUND
        cancelled = await a2a.cancel(waiting[0].id)
        after = await a2a.call("ping", {})
        gone = await state_of(a2a, waiting[0].id)
        assert take_errors(a2a) == [-32001]
    assert AT_CAPACITY in str(refused.value)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert after.status.state == TaskState.TASK_STATE_COMPLETED
    assert gone is None
