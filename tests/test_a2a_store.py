"""agentfx.a2a.BoundedTaskStore: the bounds (tasks, bytes, per owner), the eviction order, owners and timeouts, on the store itself.

The store is plain async code over the SDK's ``InMemoryTaskStore`` and an
anyio lock, so these run on asyncio and on trio; the same rules over HTTP,
through the SDK's clients, are in ``tests/integration/test_a2a_store_http.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import ListTasksRequest, Message, Part, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfx.a2a import MAX_LIVE_TASK_BYTES_PER_OWNER, MAX_LIVE_TASKS_PER_OWNER, MAX_TASK_BYTES, MAX_TASKS, BoundedTaskStore
from agentfx.a2a import _store as store_module  # pyright: ignore[reportPrivateUsage]
from agentfx.a2a._app import _Owner  # pyright: ignore[reportPrivateUsage]
from agentfx.errors import ContractError

pytestmark = pytest.mark.anyio

WORKING = TaskState.TASK_STATE_WORKING
WAITING = TaskState.TASK_STATE_INPUT_REQUIRED
FINISHED = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
)


def as_user(name: str) -> ServerCallContext:
    return ServerCallContext(user=_Owner(name))


ANN, GUS = as_user("ann"), as_user("gus")


def task(task_id: str, state: TaskState, pad: int = 0) -> Task:
    """A task; ``pad`` characters of history make it that many bytes (and a few more) larger."""
    made = Task(id=task_id, context_id="c", status=TaskStatus(state=state))
    if pad:
        made.history.append(Message(message_id="m", parts=[Part(text="x" * pad)]))
    return made


def size_of(task_id: str, state: TaskState = WORKING, pad: int = 0) -> int:
    return task(task_id, state, pad).ByteSize()


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Driver:
    """The store as :func:`agentfx.a2a.a2a_app` uses it: a new task is admitted, then saved."""

    store: BoundedTaskStore
    clock: Clock = field(default_factory=Clock)

    async def create(
        self, task_id: str, state: TaskState = WORKING, context: ServerCallContext = ANN, *, request: int = 0, pad: int = 0
    ) -> None:
        await self.store.admit(task_id, context, request)
        await self.store.save(task(task_id, state, pad), context)

    async def move(self, task_id: str, state: TaskState, context: ServerCallContext = ANN, *, pad: int = 0) -> None:
        await self.store.save(task(task_id, state, pad), context)

    async def kept(self, task_id: str, context: ServerCallContext = ANN) -> TaskState | None:
        found = await self.store.get(task_id, context)
        return None if found is None else found.status.state


def driver(max_tasks: int, **options: Any) -> Driver:
    clock = Clock()
    return Driver(BoundedTaskStore(max_tasks, timer=clock, **options), clock)


# --- Examples -----------------------------------------------------------------------


async def test_the_oldest_finished_tasks_go_first_whatever_order_they_started_in() -> None:
    d = driver(3)
    for name in ("a", "b", "c"):
        await d.create(name)
    # They finish in another order than they started: c, a, b.
    await d.move("c", TaskState.TASK_STATE_COMPLETED)
    await d.move("a", TaskState.TASK_STATE_FAILED)
    await d.move("b", TaskState.TASK_STATE_REJECTED)
    await d.create("d")
    assert [await d.kept(n) for n in "abcd"] == [TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED, None, WORKING]
    await d.create("e")
    assert [await d.kept(n) for n in "abcde"] == [None, TaskState.TASK_STATE_REJECTED, None, WORKING, WORKING]
    assert d.store.size == 3


async def test_a_store_full_of_live_tasks_refuses_a_new_one_and_changes_nothing() -> None:
    d = driver(2)
    await d.create("working")
    await d.create("waiting", WAITING)
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("new", ANN)
    assert refused.value.message == store_module.AT_CAPACITY
    assert [await d.kept(n) for n in ("working", "waiting", "new")] == [WORKING, WAITING, None]
    assert d.store.size == 2
    # Once one finishes, its room is the next task's.
    await d.move("working", TaskState.TASK_STATE_COMPLETED)
    await d.create("new")
    assert [await d.kept(n) for n in ("working", "waiting", "new")] == [None, WAITING, WORKING]


async def test_a_task_not_admitted_first_is_refused_at_save_when_there_is_no_room() -> None:
    d = driver(1)
    await d.create("a")
    with pytest.raises(UnsupportedOperationError):
        await d.store.save(task("b", WORKING), ANN)
    assert (await d.kept("a"), await d.kept("b"), d.store.size) == (WORKING, None, 1)
    # With a finished task to evict, such a save makes its own room.
    await d.move("a", TaskState.TASK_STATE_COMPLETED)
    await d.store.save(task("b", WORKING), ANN)
    assert (await d.kept("a"), await d.kept("b"), d.store.size) == (None, WORKING, 1)


async def test_a_task_waiting_past_the_waiting_timeout_goes_after_the_finished_ones() -> None:
    d = driver(3, waiting_timeout=10.0)
    await d.create("old-wait", WAITING)
    await d.create("young-wait", WAITING)
    await d.create("done", TaskState.TASK_STATE_COMPLETED)
    d.clock.now = 5.0
    await d.create("x")  # the finished one goes; both waiting ones are young
    assert [await d.kept(n) for n in ("old-wait", "young-wait", "done", "x")] == [WAITING, WAITING, None, WORKING]
    with pytest.raises(UnsupportedOperationError):
        await d.store.admit("y", ANN)
    d.clock.now = 10.0  # "old-wait" and "young-wait" have both waited 10s now: the longer waiting goes first
    await d.create("y")
    assert [await d.kept(n) for n in ("old-wait", "young-wait", "x", "y")] == [None, WAITING, WORKING, WORKING]


async def test_asking_again_restarts_the_waiting_time() -> None:
    d = driver(2, waiting_timeout=10.0)
    await d.create("w", WAITING)
    await d.create("x")
    d.clock.now = 9.0
    await d.move("w", WAITING)  # asked again: the person has a fresh 10s
    d.clock.now = 15.0
    with pytest.raises(UnsupportedOperationError):
        await d.store.admit("y", ANN)
    assert await d.kept("w") == WAITING


async def test_without_a_waiting_timeout_a_waiting_task_is_never_evicted() -> None:
    d = driver(1, waiting_timeout=None)
    await d.create("w", WAITING)
    d.clock.now = 1e9
    with pytest.raises(UnsupportedOperationError):
        await d.store.admit("x", ANN)
    assert await d.kept("w") == WAITING


async def test_a_finished_task_is_kept_at_most_terminal_ttl() -> None:
    d = driver(10, terminal_ttl=60.0)
    await d.create("done", TaskState.TASK_STATE_COMPLETED)
    await d.create("waiting", WAITING)
    d.clock.now = 59.0
    assert await d.kept("done") == TaskState.TASK_STATE_COMPLETED
    d.clock.now = 60.0
    assert await d.kept("done") is None
    listed = await d.store.list(ListTasksRequest(), ANN)
    assert [t.id for t in listed.tasks] == ["waiting"]
    assert d.store.size == 1
    # A live task has no time to live.
    d.clock.now = 1e6
    assert await d.kept("waiting") == WAITING


async def test_the_bound_is_over_every_owner_and_each_reads_only_its_own() -> None:
    d = driver(2)
    await d.create("a", TaskState.TASK_STATE_COMPLETED, ANN)
    await d.create("b", TaskState.TASK_STATE_COMPLETED, GUS)
    assert await d.kept("a", GUS) is None and await d.kept("b", ANN) is None
    await d.create("c", WORKING, GUS)
    assert (await d.kept("a", ANN), await d.kept("b", GUS), await d.kept("c", GUS)) == (
        None,
        TaskState.TASK_STATE_COMPLETED,
        WORKING,
    )
    # The same id under another owner is another task.
    await d.create("c", TaskState.TASK_STATE_COMPLETED, ANN)
    assert (await d.kept("b", GUS), await d.kept("c", GUS), await d.kept("c", ANN)) == (
        None,
        WORKING,
        TaskState.TASK_STATE_COMPLETED,
    )
    assert [t.id for t in (await d.store.list(ListTasksRequest(), GUS)).tasks] == ["c"]


async def test_a_room_held_for_a_task_never_saved_is_taken_back_after_a_while() -> None:
    d = driver(1)
    await d.store.admit("gone", ANN)  # its request went away before the task was created
    with pytest.raises(UnsupportedOperationError):
        await d.store.admit("next", ANN)
    d.clock.now = store_module._PENDING_TIMEOUT  # pyright: ignore[reportPrivateUsage]
    await d.create("next")
    assert (await d.kept("next"), d.store.size) == (WORKING, 1)


async def test_a_deleted_task_gives_back_its_room() -> None:
    d = driver(1)
    await d.create("a")
    await d.store.delete("a", ANN)
    await d.create("b")
    assert (await d.kept("a"), await d.kept("b"), d.store.size) == (None, WORKING, 1)


async def test_tasks_are_copied_in_and_out_as_by_the_sdk_store() -> None:
    d = driver(2)
    original = task("a", WORKING)
    await d.store.admit("a", ANN)
    await d.store.save(original, ANN)
    original.status.state = TaskState.TASK_STATE_COMPLETED
    read = await d.store.get("a", ANN)
    assert read is not None and read.status.state == WORKING
    read.status.state = TaskState.TASK_STATE_FAILED
    assert await d.kept("a") == WORKING


async def test_admitting_concurrently_never_passes_the_bound() -> None:
    d = driver(3)
    refused: list[str] = []

    async def one(task_id: str) -> None:
        try:
            await d.create(task_id, WAITING)
        except UnsupportedOperationError:
            refused.append(task_id)

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(one, f"t{n}")
    assert d.store.size == 3 and len(refused) == 5
    assert sorted([n for n in (f"t{i}" for i in range(8)) if await d.kept(n) == WAITING] + refused) == sorted(
        f"t{i}" for i in range(8)
    )


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"max_tasks": 0}, id="zero"),
        pytest.param({"max_tasks": -1}, id="negative"),
        pytest.param({"max_tasks": 2.5}, id="fraction"),
        pytest.param({"max_tasks": True}, id="bool"),
        pytest.param({"waiting_timeout": 0}, id="waiting-zero"),
        pytest.param({"terminal_ttl": -1.0}, id="ttl-negative"),
        pytest.param({"terminal_ttl": float("nan")}, id="ttl-nan"),
        pytest.param({"max_bytes": 0}, id="bytes-zero"),
        pytest.param({"max_bytes": -5}, id="bytes-negative"),
        pytest.param({"max_bytes": 1.5e9}, id="bytes-float"),
        pytest.param({"max_bytes": True}, id="bytes-bool"),
        pytest.param({"max_bytes": "256MiB"}, id="bytes-str"),
        pytest.param({"max_live_per_owner": 0}, id="per-owner-zero"),
        pytest.param({"max_live_per_owner": 2.0}, id="per-owner-float"),
        pytest.param({"max_live_per_owner": True}, id="per-owner-bool"),
    ],
)
def test_a_bad_bound_or_timeout_is_a_contract_error(options: dict[str, Any]) -> None:
    with pytest.raises(ContractError, match="BoundedTaskStore"):
        BoundedTaskStore(**options)


def test_the_default_bound_is_max_tasks() -> None:
    assert BoundedTaskStore().max_tasks == MAX_TASKS == 10_000


async def test_has_live_counts_each_owners_working_and_waiting_tasks_until_they_end_or_go() -> None:
    d = driver(3, waiting_timeout=5.0)
    assert not d.store.has_live(ANN) and not d.store.has_live(GUS)
    await d.store.admit("a", ANN)
    assert not d.store.has_live(ANN)  # admitted, not saved: its request still holds its caller
    await d.store.save(task("a", WORKING), ANN)
    await d.create("b", WAITING, GUS)
    assert d.store.has_live(ANN) and d.store.has_live(GUS)
    await d.move("a", WAITING)
    await d.move("a", TaskState.TASK_STATE_COMPLETED)
    assert not d.store.has_live(ANN) and d.store.has_live(GUS)
    d.clock.now += 6.0  # gus's task may be evicted now; it is, once room is needed
    await d.create("c", WORKING)
    await d.create("d", WORKING)  # the finished "a" goes first
    assert await d.kept("b", GUS) == WAITING and d.store.has_live(GUS)
    await d.create("e", WORKING)
    assert await d.kept("b", GUS) is None and not d.store.has_live(GUS)
    for name in ("c", "d"):
        await d.store.delete(name, ANN)
        assert d.store.has_live(ANN)
    await d.store.delete("e", ANN)
    assert not d.store.has_live(ANN)


# --- The byte budget ----------------------------------------------------------------


async def test_a_task_counts_its_encoded_size_at_each_save_and_a_new_one_reserves_its_request() -> None:
    d = driver(5, max_bytes=10_000)
    await d.store.admit("a", ANN, 300)
    assert (d.store.size, d.store.bytes) == (1, 300)  # the request's bytes, until its first save
    await d.store.save(task("a", WORKING, pad=100), ANN)
    assert d.store.bytes == size_of("a", pad=100)
    await d.move("a", TaskState.TASK_STATE_COMPLETED, pad=400)
    await d.create("b", pad=50)
    assert d.store.bytes == size_of("a", TaskState.TASK_STATE_COMPLETED, 400) + size_of("b", pad=50)
    await d.store.delete("a", ANN)
    assert (d.store.size, d.store.bytes) == (1, size_of("b", pad=50))


async def test_past_the_byte_budget_the_oldest_finished_tasks_go_until_the_request_fits() -> None:
    done = TaskState.TASK_STATE_COMPLETED
    budget = size_of("w", pad=200) + 3 * size_of("f0", done, 200)
    d = driver(10, max_bytes=budget)
    await d.create("w", pad=200)  # working: never evicted
    for name in ("f0", "f1", "f2"):
        await d.create(name, done, pad=200)
    assert d.store.bytes == budget
    # Room for a request larger than one finished task but not two: the two that finished longest ago go.
    await d.store.admit("new", ANN, size_of("f0", done, 200) + 1)
    assert [await d.kept(n) for n in ("w", "f0", "f1", "f2")] == [WORKING, None, None, done]
    assert d.store.bytes <= budget and d.store.size == 3


async def test_a_request_that_no_eviction_can_make_room_for_is_refused_and_changes_nothing() -> None:
    waiting_task = size_of("w", WAITING, 100)
    d = driver(10, max_bytes=waiting_task + size_of("f", TaskState.TASK_STATE_COMPLETED, 100) + 10)
    await d.create("w", WAITING, pad=100)
    await d.create("f", TaskState.TASK_STATE_COMPLETED, pad=100)
    before = (d.store.size, d.store.bytes)
    # Even with the finished task gone, the young waiting task leaves no room for it.
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("big", ANN, d.store.max_bytes or 0)
    assert refused.value.message == store_module.AT_CAPACITY
    assert (d.store.size, d.store.bytes) == before
    assert [await d.kept(n) for n in ("w", "f", "big")] == [WAITING, TaskState.TASK_STATE_COMPLETED, None]
    # A request that fits is admitted (the finished task making its room).
    await d.store.admit("fits", ANN, 50)
    assert await d.kept("f") is None


async def test_a_follow_up_reserves_its_request_on_its_task_until_the_next_save_counts_the_task() -> None:
    d = driver(5, max_bytes=10_000)
    await d.create("w", WAITING, pad=100)
    await d.create("other")
    kept = d.store.bytes
    await d.store.admit_follow_up("w", ANN, 700)
    assert (d.store.size, d.store.bytes) == (2, kept + 700)
    await d.store.admit_follow_up("w", ANN, 20)  # another message before the save: both are reserved
    assert d.store.bytes == kept + 720
    await d.move("w", TaskState.TASK_STATE_COMPLETED, pad=800)  # the save replaces the reservation
    assert d.store.bytes == size_of("w", TaskState.TASK_STATE_COMPLETED, 800) + size_of("other")


async def test_a_follow_up_that_is_not_run_gives_its_room_back_and_one_that_ran_has_nothing_to_give() -> None:
    d = driver(5, max_bytes=10_000)
    await d.create("w", WAITING, pad=100)
    kept = d.store.bytes
    await d.store.admit_follow_up("w", ANN, 700)
    await d.store.admit_follow_up("w", ANN, 20)
    await d.store.release_follow_up("w", ANN, 700)  # refused after admission: never saved
    assert d.store.bytes == kept + 20
    await d.store.release_follow_up("w", GUS, 20)  # another owner's task of that id: there is none
    assert d.store.bytes == kept + 20
    await d.move("w", WAITING, pad=150)  # the other one ran: the save counts the task as it is
    saved = d.store.bytes
    await d.store.release_follow_up("w", ANN, 20)
    await d.store.release_follow_up("nothing", ANN, 20)
    assert saved == d.store.bytes == size_of("w", WAITING, 150)
    await d.store.admit_follow_up("w", ANN, 30)
    await d.store.release_follow_up("w", ANN, 1_000)  # never more than was reserved
    assert d.store.bytes == saved


async def test_a_follow_up_is_made_room_for_by_the_rule_or_refused_changing_nothing() -> None:
    done = TaskState.TASK_STATE_COMPLETED
    d = driver(10, max_bytes=size_of("w", WAITING, 100) + size_of("f", done, 100) + 100)
    await d.create("w", WAITING, pad=100)
    await d.create("f", done, pad=100)
    await d.store.admit_follow_up("w", ANN, 150)  # the finished task's room is needed: it goes
    assert (await d.kept("f"), await d.kept("w"), d.store.size) == (None, WAITING, 1)
    before = d.store.bytes
    with pytest.raises(UnsupportedOperationError) as refused:
        # Its task plus the message could never fit: waiting would not help, and the agent says so.
        await d.store.admit_follow_up("w", ANN, d.store.max_bytes or 0)
    assert refused.value.message == store_module.TOO_LARGE
    assert (await d.kept("w"), d.store.size, d.store.bytes) == (WAITING, 1, before)


async def test_a_follow_up_that_would_fit_but_for_tasks_in_progress_is_refused_as_busy() -> None:
    d = driver(10, max_bytes=1_000)
    await d.create("w", WAITING, pad=100)
    await d.create("x", WORKING, pad=600)
    before = d.store.bytes
    with pytest.raises(UnsupportedOperationError) as busy:
        # Its task and the message fit the budget, but the working task's room is not the store's to take.
        await d.store.admit_follow_up("w", ANN, 1_000 - before + 1)
    assert busy.value.message == store_module.AT_CAPACITY
    assert [await d.kept(n) for n in ("w", "x")] == [WAITING, WORKING] and d.store.bytes == before


async def test_a_new_task_larger_than_the_whole_budget_is_too_large_whatever_could_be_evicted() -> None:
    d = driver(10, max_bytes=1_000)
    await d.create("f", TaskState.TASK_STATE_COMPLETED, pad=100)
    before = (d.store.size, d.store.bytes)
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("huge", ANN, 1_001)
    assert refused.value.message == store_module.TOO_LARGE
    assert (d.store.size, d.store.bytes) == before and await d.kept("f") == TaskState.TASK_STATE_COMPLETED
    await d.store.admit("whole", ANN, 1_000)  # the whole budget is not too large: the finished task makes room
    assert await d.kept("f") is None


async def test_a_follow_up_never_evicts_its_own_task_even_one_waiting_past_its_timeout() -> None:
    waiting, working = size_of("w", WAITING, 100), size_of("x", WORKING, 100)
    d = driver(10, max_bytes=waiting + working + 10, waiting_timeout=10.0)
    await d.create("w", WAITING, pad=100)
    await d.create("x", WORKING, pad=100)
    d.clock.now = 10.0  # "w" is evictable now, but not to make room for a message to itself
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit_follow_up("w", ANN, 11)  # would fit alone: only evicting "w" itself makes room
    assert refused.value.message == store_module.AT_CAPACITY
    assert (await d.kept("w"), await d.kept("x"), d.store.bytes) == (WAITING, WORKING, waiting + working)
    await d.store.admit_follow_up("w", ANN, 10)
    assert d.store.bytes == waiting + working + 10


async def test_a_follow_up_to_a_task_not_kept_is_not_found_and_makes_no_record() -> None:
    d = driver(3, max_bytes=10_000)
    await d.create("a", WAITING, GUS)
    await d.store.admit("held", ANN)  # admitted, not saved: nothing stored to follow up
    before = (d.store.size, d.store.bytes)
    for task_id, context in (("never", ANN), ("a", ANN), ("held", ANN)):
        with pytest.raises(TaskNotFoundError):
            await d.store.admit_follow_up(task_id, context, 10)
    assert (d.store.size, d.store.bytes) == before
    assert (await d.kept("a", ANN), await d.kept("never", ANN), await d.kept("a", GUS)) == (None, None, WAITING)
    # No room was taken by those: the one left is the next new task's.
    await d.store.admit("b", ANN)
    with pytest.raises(UnsupportedOperationError):
        await d.store.admit("c", ANN)


async def test_a_follow_up_to_a_waiting_task_restarts_its_waiting_time_so_its_room_stays() -> None:
    d = driver(2, waiting_timeout=10.0)
    await d.create("w", WAITING)
    await d.create("x")
    d.clock.now = 10.0  # "w" may be evicted now ...
    await d.store.admit_follow_up("w", ANN, 5)  # ... until it is answered: its answer is being run
    with pytest.raises(UnsupportedOperationError):
        await d.store.admit("y", ANN)
    assert await d.kept("w") == WAITING
    d.clock.now = 20.0
    await d.create("y")  # unanswered for another 10s, it goes
    assert (await d.kept("w"), await d.kept("y")) == (None, WORKING)


async def test_a_new_task_saved_without_admission_is_refused_past_the_byte_budget() -> None:
    d = driver(10, max_bytes=size_of("a", pad=100) + 50)
    await d.create("a", pad=100)
    with pytest.raises(UnsupportedOperationError):
        await d.store.save(task("b", WORKING, pad=100), ANN)
    assert (await d.kept("b"), d.store.size, d.store.bytes) == (None, 1, size_of("a", pad=100))


async def test_admitting_concurrently_never_passes_the_byte_budget() -> None:
    d = driver(100, max_bytes=1000)
    refused: list[str] = []

    async def one(task_id: str) -> None:
        try:
            await d.store.admit(task_id, ANN, 300)
        except UnsupportedOperationError:
            refused.append(task_id)
        await anyio.sleep(0)
        if task_id not in refused:
            await d.store.save(task(task_id, WAITING), ANN)

    async with anyio.create_task_group() as tg:
        for n in range(8):
            tg.start_soon(one, f"t{n}")
    assert len(refused) == 5 and d.store.size == 3
    assert d.store.bytes == sum(size_of(f"t{n}", WAITING) for n in range(8) if f"t{n}" not in refused)


async def test_a_bad_request_size_is_a_value_error_and_changes_nothing() -> None:
    d = driver(2)
    await d.create("a")
    with pytest.raises(ValueError, match="request_bytes"):
        await d.store.admit("b", ANN, -1)
    with pytest.raises(ValueError, match="request_bytes"):
        await d.store.admit_follow_up("a", ANN, -1)
    assert (d.store.size, d.store.bytes) == (1, size_of("a"))


# --- Tasks in progress per owner -------------------------------------------------


async def test_an_owner_at_its_bound_is_refused_a_new_task_while_other_owners_proceed() -> None:
    d = driver(10, max_live_per_owner=2)
    await d.create("done", TaskState.TASK_STATE_COMPLETED, ANN)  # finished tasks do not count
    await d.create("a", WORKING, ANN)
    await d.create("b", WAITING, ANN)
    before = (d.store.size, d.store.bytes)
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("c", ANN)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    assert (d.store.size, d.store.bytes) == before and await d.kept("c") is None
    await d.create("g0", WORKING, GUS)
    await d.create("g1", WAITING, GUS)
    assert (await d.kept("g0", GUS), await d.kept("g1", GUS)) == (WORKING, WAITING)
    # Once one of ann's tasks ends, she may start another.
    await d.move("a", TaskState.TASK_STATE_COMPLETED)
    await d.create("c", WORKING, ANN)
    assert await d.kept("c") == WORKING


async def test_a_task_admitted_but_not_saved_counts_toward_its_owners_bound_until_it_is() -> None:
    d = driver(10, max_live_per_owner=2)
    await d.store.admit("a", ANN)
    await d.store.admit("b", ANN)
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("c", ANN)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    await d.store.save(task("a", TaskState.TASK_STATE_COMPLETED), ANN)  # it ended at once
    await d.store.admit("c", ANN)
    # A room never saved stops counting once it is taken back.
    d.clock.now = store_module._PENDING_TIMEOUT  # pyright: ignore[reportPrivateUsage]
    await d.create("d", WORKING, ANN)
    await d.create("e", WORKING, ANN)
    assert d.store.size == 3  # "a" (finished), "d", "e"


async def test_a_new_task_saved_without_admission_is_refused_at_its_owners_bound_unless_finished() -> None:
    d = driver(10, max_live_per_owner=1)
    await d.create("a", WORKING, ANN)
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.save(task("b", WAITING), ANN)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    assert (await d.kept("b"), d.store.size) == (None, 1)
    await d.store.save(task("c", TaskState.TASK_STATE_COMPLETED), ANN)
    await d.move("a", WAITING)  # a task already kept moves on whatever the bound
    assert (await d.kept("a"), await d.kept("c")) == (WAITING, TaskState.TASK_STATE_COMPLETED)


async def test_a_room_abandoned_long_ago_no_longer_counts_when_a_task_is_saved_without_admission() -> None:
    d = driver(10, max_live_per_owner=1)
    await d.store.admit("gone", ANN)  # its request went away before the task was created
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.save(task("b", WORKING), ANN)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    d.clock.now = store_module._PENDING_TIMEOUT  # pyright: ignore[reportPrivateUsage]
    await d.store.save(task("b", WORKING), ANN)
    assert (await d.kept("b"), d.store.size) == (WORKING, 1)


async def test_an_owners_tasks_in_progress_take_at_most_its_share_of_the_bytes_while_other_owners_proceed() -> None:
    # A few large requests left waiting must not take the whole budget from everyone else.
    d = driver(10, max_bytes=1000, max_live_bytes_per_owner=100)
    await d.store.admit("big", ANN, 100)  # exactly ann's share
    before = (d.store.size, d.store.bytes)
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("more", GUS, 101)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    assert (d.store.size, d.store.bytes) == before
    d = driver(10, max_bytes=1000, max_live_bytes_per_owner=200)
    await d.store.admit("a", ANN, 150)
    await d.store.save(task("a", WAITING, 120), ANN)  # its size, saved, replaces the 150 reserved
    held = d.store.bytes
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit("b", ANN, 200 - held + 1)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    # A follow-up to the waiting task counts the same way; gus is served meanwhile.
    with pytest.raises(UnsupportedOperationError) as refused:
        await d.store.admit_follow_up("a", ANN, 200 - held + 1)
    assert refused.value.message == store_module.OWNER_AT_CAPACITY
    await d.store.admit("g", GUS, 199)
    await d.store.admit_follow_up("a", ANN, 200 - held)
    # A finished task is not in progress: its bytes stop counting toward the share.
    await d.store.save(task("a", TaskState.TASK_STATE_COMPLETED, 120), ANN)
    await d.store.admit("b", ANN, 200)
    assert d.store.size == 3


async def test_without_a_per_owner_bound_one_owner_may_fill_the_store() -> None:
    d = driver(3, max_live_per_owner=None)
    for name in "abc":
        await d.create(name, WAITING)
    assert d.store.size == 3 and d.store.max_live_per_owner is None


def test_the_default_bounds_are_the_constants() -> None:
    store = BoundedTaskStore()
    assert (store.max_bytes, store.max_live_per_owner) == (MAX_TASK_BYTES, MAX_LIVE_TASKS_PER_OWNER)
    assert store.max_live_bytes_per_owner == MAX_LIVE_TASK_BYTES_PER_OWNER == MAX_TASK_BYTES // 10
    assert (MAX_TASK_BYTES, MAX_LIVE_TASKS_PER_OWNER) == (256 * 1024 * 1024, MAX_TASKS // 10)
    assert BoundedTaskStore(max_bytes=None).max_bytes is None


# --- The property ------------------------------------------------------------------


OWNERS: tuple[ServerCallContext, ...] = (ANN, GUS)


@dataclass
class Model:
    """The rule, kept by hand: which tasks the store must still hold, and the bytes it counts for them."""

    bound: int
    max_bytes: int | None
    per_owner: int | None
    per_owner_bytes: int | None
    waiting_timeout: float
    working: set[str] = field(default_factory=lambda: set())
    waiting: dict[str, float] = field(default_factory=lambda: {})  # since, in the order they started waiting
    finished: list[str] = field(default_factory=lambda: [])  # oldest first
    states: dict[str, TaskState] = field(default_factory=lambda: {})
    sizes: dict[str, int] = field(default_factory=lambda: {})
    owners: dict[str, int] = field(default_factory=lambda: {})  # index into OWNERS

    def size(self) -> int:
        return len(self.working) + len(self.waiting) + len(self.finished)

    def total(self) -> int:
        return sum(self.sizes.values())

    def live(self, owner: int) -> int:
        return sum(1 for name in (*self.working, *self.waiting) if self.owners[name] == owner)

    def live_bytes(self, owner: int) -> int:
        return sum(self.sizes[name] for name in (*self.working, *self.waiting) if self.owners[name] == owner)

    def past_share(self, owner: int, request: int) -> bool:
        """Whether ``request`` more bytes take ``owner``'s tasks in progress past ``per_owner_bytes``."""
        share = self.per_owner_bytes
        if share is None or (self.max_bytes is not None and share >= self.max_bytes):
            return False
        return self.live_bytes(owner) + request > share

    def forget(self, name: str) -> None:
        self.working.discard(name)
        self.waiting.pop(name, None)
        if name in self.finished:
            self.finished.remove(name)
        self.states.pop(name, None)
        self.sizes.pop(name, None)

    def room(self, now: float, keep: str | None, tasks: int, extra: int) -> bool:
        """Whether at most ``tasks`` can be kept with ``extra`` more bytes, making the room the rule's way."""
        stale = [n for n, since in self.waiting.items() if now - since >= self.waiting_timeout]
        order = [n for n in self.finished + stale if n != keep]
        victims: list[str] = []
        count, total = self.size(), self.total() + extra
        while count > tasks or (self.max_bytes is not None and total > self.max_bytes):
            if not order:
                return False
            victims.append(order.pop(0))
            count, total = count - 1, total - self.sizes[victims[-1]]
        for victim in victims:
            self.forget(victim)
        return True

    def put(self, name: str, state: TaskState, size: int, now: float) -> None:
        self.forget(name)
        self.states[name] = state
        self.sizes[name] = size
        if state in FINISHED:
            self.finished.append(name)
        elif state == WAITING:
            self.waiting[name] = now
        else:
            self.working.add(name)


_STATES = st.sampled_from([WORKING, WAITING, *FINISHED])
_BYTES = st.integers(0, 60)
_OPS = st.lists(
    st.one_of(
        # A new task: its state, owner, request size and (through its history) its saved size.
        st.tuples(st.just("create"), _STATES, st.integers(0, 1), _BYTES, _BYTES),
        # A follow-up to a task: its request size, then the state and size it is saved with.
        st.tuples(st.just("follow"), st.integers(0, 30), _BYTES, _STATES, _BYTES),
        # A follow-up admitted and then not run (the SDK refused it): its room is given back.
        st.tuples(st.just("unrun"), st.integers(0, 30), _BYTES),
        st.tuples(st.just("move"), st.integers(0, 30), _STATES, _BYTES),
        st.tuples(st.just("get"), st.integers(0, 30)),
        st.tuples(st.just("tick"), st.sampled_from([1.0, 5.0, 10.0])),
    ),
    max_size=40,
)


async def _run_ops(
    bound: int, max_bytes: int | None, per_owner: int | None, per_owner_bytes: int | None, ops: list[tuple[Any, ...]]
) -> None:
    timeout = 8.0
    d = driver(
        bound,
        max_bytes=max_bytes,
        max_live_per_owner=per_owner,
        max_live_bytes_per_owner=per_owner_bytes,
        waiting_timeout=timeout,
    )
    model = Model(bound, max_bytes, per_owner, per_owner_bytes, timeout)
    created = 0

    def admitted_within_bounds() -> None:
        # Right after an admission both bounds hold (a save may then pass
        # the byte budget by what the task grew past its reservation).
        assert d.store.size <= bound
        assert max_bytes is None or d.store.bytes <= max_bytes

    for op in ops:
        if op[0] == "create":
            state, owner, request, pad = cast("tuple[TaskState, int, int, int]", op[1:])
            name = f"t{created}"
            created += 1
            context = OWNERS[owner]
            if per_owner is not None and model.live(owner) >= per_owner:
                with pytest.raises(UnsupportedOperationError) as refused:
                    await d.store.admit(name, context, request)
                assert refused.value.message == store_module.OWNER_AT_CAPACITY
            elif max_bytes is not None and request > max_bytes:
                with pytest.raises(UnsupportedOperationError) as refused:
                    await d.store.admit(name, context, request)
                assert refused.value.message == store_module.TOO_LARGE
            elif model.past_share(owner, request):
                with pytest.raises(UnsupportedOperationError) as refused:
                    await d.store.admit(name, context, request)
                assert refused.value.message == store_module.OWNER_AT_CAPACITY
            elif not model.room(d.clock.now, None, bound - 1, request):
                with pytest.raises(UnsupportedOperationError) as refused:
                    await d.store.admit(name, context, request)
                assert refused.value.message == store_module.AT_CAPACITY
            else:
                await d.store.admit(name, context, request)
                admitted_within_bounds()
                assert d.store.bytes == model.total() + request
                model.owners[name] = owner
                await d.store.save(task(name, state, pad), context)
                model.put(name, state, size_of(name, state, pad), d.clock.now)
        elif op[0] in ("follow", "move", "unrun"):
            name = f"t{op[1] % max(created, 1)}"  # most often a task that was created
            # Only a live task the store still holds takes a message or moves on, as the SDK has it.
            if name not in model.working and name not in model.waiting:
                continue
            context = OWNERS[model.owners[name]]
            if op[0] in ("follow", "unrun"):
                request = op[2]
                if max_bytes is not None and model.sizes[name] + request > max_bytes:
                    # No eviction could ever make room: its own task is never evicted for it.
                    with pytest.raises(UnsupportedOperationError) as refused:
                        await d.store.admit_follow_up(name, context, request)
                    assert refused.value.message == store_module.TOO_LARGE
                    continue
                if model.past_share(model.owners[name], request):
                    with pytest.raises(UnsupportedOperationError) as refused:
                        await d.store.admit_follow_up(name, context, request)
                    assert refused.value.message == store_module.OWNER_AT_CAPACITY
                    continue
                if not model.room(d.clock.now, name, bound, request):
                    with pytest.raises(UnsupportedOperationError) as refused:
                        await d.store.admit_follow_up(name, context, request)
                    assert refused.value.message == store_module.AT_CAPACITY
                    continue
                await d.store.admit_follow_up(name, context, request)
                admitted_within_bounds()
                model.sizes[name] += request
                if name in model.waiting:  # answered: it waits afresh
                    del model.waiting[name]
                    model.waiting[name] = d.clock.now
                assert d.store.bytes == model.total()
            if op[0] == "unrun":
                await d.store.release_follow_up(name, context, op[2])
                model.sizes[name] -= op[2]
            else:
                state, pad = op[-2], op[-1]
                await d.store.save(task(name, state, pad), context)
                model.put(name, state, size_of(name, state, pad), d.clock.now)
        elif op[0] == "tick":
            d.clock.now += op[1]
        # After every step: the bound holds, and the store holds exactly what
        # the rule keeps (so no live task was evicted, and the finished ones
        # kept are the most recent), counting exactly their bytes.
        assert d.store.size == model.size() <= bound
        assert d.store.bytes == model.total()
        for owner, context in enumerate(OWNERS):
            # The live count (what keeps a principal held) follows the records exactly.
            assert d.store.has_live(context) == bool(model.live(owner))
        for n in range(created):
            name = f"t{n}"
            owner = OWNERS[model.owners[name]] if name in model.owners else ANN
            assert await d.kept(name, owner) == model.states.get(name), (name, model)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bound=st.integers(1, 5),
    max_bytes=st.one_of(st.none(), st.integers(1, 300)),
    per_owner=st.one_of(st.none(), st.integers(1, 3)),
    per_owner_bytes=st.one_of(st.none(), st.integers(1, 200)),
    ops=_OPS,
)
def test_the_store_keeps_exactly_what_the_eviction_rule_keeps(
    backend: str,
    bound: int,
    max_bytes: int | None,
    per_owner: int | None,
    per_owner_bytes: int | None,
    ops: list[tuple[Any, ...]],
) -> None:
    run: Callable[..., Awaitable[None]] = _run_ops
    anyio.run(run, bound, max_bytes, per_owner, per_owner_bytes, ops, backend=backend)
