"""A2A's bounds per principal and per task over HTTP: a real uvicorn server, the SDK's own clients (1.0 and 0.3), asyncio and trio.

Each test gets a server of its own that holds at most two principals
(``MAX_PRINCIPALS`` patched before the app is built), so the bound is reached
with a third caller. The application, the server harness and the
wire-validating client are ``tests/integration/test_a2a_http.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from starlette.requests import Request

from agentfx.a2a import MAX_CONFIRM_REASKS
from agentfx.a2a import _app as a2a_app_module  # pyright: ignore[reportPrivateUsage]
from agentfx.a2a._app import PRINCIPALS_AT_CAPACITY
from tests.integration.test_a2a_http import (
    PROTOCOLS,
    Caller,
    Served,
    User,
    caller,
    counter_served,
    data,
    erase_waiting,
    texts,
)
from tests.integration.test_a2a_store_http import take_errors
from tests.test_a2a_principals import principals_of

pytestmark = pytest.mark.anyio

BOUND = 2
USERS = {f"u{i}": User(f"u{i}") for i in range(BOUND + 2)}


def authenticate(request: Request) -> User | None:
    return USERS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@dataclass
class Bounded(Served):
    @property
    def principals(self) -> Any:
        """The app's ``_Principals``."""
        return principals_of(self.asgi)

    def held(self) -> set[str]:
        """Who is held now, by name."""
        return {name for name, user in USERS.items() if self.principals.held(user) is not None}


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[Bounded]:
    monkeypatch.setattr(a2a_app_module, "MAX_PRINCIPALS", BOUND)
    with counter_served(Bounded, authenticate=authenticate) as state:
        yield state


async def ping_as(served: Served, protocol: str, user: str) -> str:
    async with caller(served, protocol, token=user) as a2a:
        task = await a2a.call("ping", {})
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    return task.id


@PROTOCOLS
async def test_an_idle_principal_is_released_for_a_new_one_least_recently_seen_first(
    served: Bounded, protocol: str
) -> None:
    first = await ping_as(served, protocol, "u0")
    await ping_as(served, protocol, "u1")
    assert served.held() == {"u0", "u1"}
    third = await ping_as(served, protocol, "u2")
    assert served.held() == {"u1", "u2"}
    # Back again, u0 is a new principal (taking u1's room): what it owned went with it.
    async with caller(served, protocol, token="u0") as a2a:
        with pytest.raises(TaskNotFoundError):
            await a2a.get(first)
        assert take_errors(a2a) == [-32001]
        again = await a2a.call("ping", {})
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert served.held() == {"u2", "u0"}
    assert len(served.principals) <= BOUND
    assert [r.principal for r in served.audited(third)] == [USERS["u2"]]


@PROTOCOLS
async def test_a_principal_whose_task_waits_for_confirmation_is_kept_and_still_answers(
    served: Bounded, protocol: str
) -> None:
    async with caller(served, protocol, token="u0") as waiter:
        waiting = await erase_waiting(waiter, served)
        await ping_as(served, protocol, "u1")
        await ping_as(served, protocol, "u2")  # u1 is idle, u0 is not: u1 goes
        assert served.held() == {"u0", "u2"}
        done = await waiter.send(new_data_part({"confirm": True}), task_id=waiting.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [(r.outcome, r.confirmed, r.principal) for r in served.audited(waiting.id)] == [
        ("AgentConfirmationRequiredError", False, USERS["u0"]),
        ("dispatched", True, USERS["u0"]),
    ]
    # Both idle now: a new principal takes the room of the one seen least recently.
    await ping_as(served, protocol, "u3")
    assert served.held() == {"u0", "u3"}


async def two_waiting(served: Bounded, protocol: str) -> list[tuple[str, str]]:
    waiting: list[tuple[str, str]] = []
    for user in ("u0", "u1"):
        async with caller(served, protocol, token=user) as a2a:
            waiting.append((user, (await erase_waiting(a2a, served)).id))
    return waiting


@PROTOCOLS
async def test_with_every_principal_live_a_new_one_is_refused_typed_and_nothing_runs(
    served: Bounded, protocol: str
) -> None:
    waiting = await two_waiting(served, protocol)
    before = len(served.records)
    async with caller(served, protocol, token="u2") as a2a:
        with pytest.raises(UnsupportedOperationError) as refused:
            await a2a.call("ping", {})
        with pytest.raises(UnsupportedOperationError):
            await a2a.get(waiting[0][1])
        # The SDK's own error, in the request's protocol, saying only that.
        assert [answer["error"]["message"] for _, answer in a2a.wire] == [PRINCIPALS_AT_CAPACITY] * 2
        assert take_errors(a2a) == [-32004, -32004]
        assert len(served.records) == before  # nothing dispatched, nothing even audited
        assert served.held() == {"u0", "u1"}
        # Each waiting task is untouched; once one is answered, its principal is idle.
        async with caller(served, protocol, token="u0") as other:
            done = await other.send(new_data_part({"confirm": True}), task_id=waiting[0][1])
        served_now = await a2a.call("ping", {})
    assert PRINCIPALS_AT_CAPACITY in str(refused.value)
    assert done.status.state == served_now.status.state == TaskState.TASK_STATE_COMPLETED
    assert served.held() == {"u1", "u2"}
    async with caller(served, protocol, token="u1") as a2a:
        assert (await a2a.get(waiting[1][1])).status.state == TaskState.TASK_STATE_INPUT_REQUIRED


@PROTOCOLS
async def test_a_cancelled_waiting_task_frees_its_principal(served: Bounded, protocol: str) -> None:
    waiting = await two_waiting(served, protocol)
    async with caller(served, protocol, token="u1") as a2a:
        cancelled = await a2a.cancel(waiting[1][1])
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    await ping_as(served, protocol, "u2")
    assert served.held() == {"u0", "u2"}


GAVE_UP = f"No valid answer after {MAX_CONFIRM_REASKS + 1} tries: the call was not made. Start a new task to try again"


async def slip(a2a: Caller, task_id: str, n: int) -> TaskState:
    task = await a2a.send(new_data_part({"confirm": f"maybe {n}"}), task_id=task_id)
    return task.status.state


@PROTOCOLS
async def test_past_the_re_asks_a_malformed_answer_rejects_the_task_and_nothing_is_dispatched(
    served: Bounded, protocol: str
) -> None:
    async with caller(served, protocol, token="u0") as a2a:
        waiting = await erase_waiting(a2a, served)
        asked = [await slip(a2a, waiting.id, n) for n in range(MAX_CONFIRM_REASKS)]
        last = await a2a.send(new_data_part({"confirm": "no idea"}), task_id=waiting.id)
        fetched = await a2a.client.get_task(GetTaskRequest(id=waiting.id))
        # Over, the task takes no answer: not even a yes dispatches it now.
        with pytest.raises(Exception) as late:  # noqa: PT011 - the SDK's own error for a finished task
            await a2a.send(new_data_part({"confirm": True}), task_id=waiting.id)
        take_errors(a2a)
    assert asked == [TaskState.TASK_STATE_INPUT_REQUIRED] * MAX_CONFIRM_REASKS
    assert last.status.state == fetched.status.state == TaskState.TASK_STATE_REJECTED
    assert texts(last) == [GAVE_UP]
    assert data(last.status.message.parts) == [{"_tag": "MalformedMessage", "message": GAVE_UP}]
    assert "Traceback" not in str(late.value)
    # The call, then each prompt with the answer it got; the rejection is the status.
    assert len(fetched.history) == 2 * MAX_CONFIRM_REASKS + 3
    # Only the first call reached the pipeline: no answer was taken for a yes or a no.
    assert [r.outcome for r in served.audited(waiting.id)] == ["AgentConfirmationRequiredError"]
    assert served.held() == {"u0"}
