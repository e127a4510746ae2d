"""agentfx.a2a.BoundedTaskStore: the bound, the eviction order, owners and timeouts, on the store itself.

The store is plain async code over the SDK's ``InMemoryTaskStore`` and an
anyio lock, so these run on asyncio and on trio; the same rules over HTTP,
through the SDK's clients, are in ``tests/integration/test_a2a_store_http.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import ListTasksRequest, Task, TaskState, TaskStatus
from a2a.utils.errors import UnsupportedOperationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfx.a2a import MAX_TASKS, BoundedTaskStore
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


def task(task_id: str, state: TaskState) -> Task:
    return Task(id=task_id, context_id="c", status=TaskStatus(state=state))


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

    async def create(self, task_id: str, state: TaskState = WORKING, context: ServerCallContext = ANN) -> None:
        await self.store.admit(task_id, context)
        await self.store.save(task(task_id, state), context)

    async def move(self, task_id: str, state: TaskState, context: ServerCallContext = ANN) -> None:
        await self.store.save(task(task_id, state), context)

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


# --- The property ------------------------------------------------------------------


@dataclass
class Model:
    """The rule, kept by hand: which tasks the store must still hold."""

    bound: int
    waiting_timeout: float
    working: set[str] = field(default_factory=lambda: set())
    waiting: dict[str, float] = field(default_factory=lambda: {})  # since, in the order they started waiting
    finished: list[str] = field(default_factory=lambda: [])  # oldest first
    states: dict[str, TaskState] = field(default_factory=lambda: {})

    def size(self) -> int:
        return len(self.working) + len(self.waiting) + len(self.finished)

    def forget(self, name: str) -> None:
        self.working.discard(name)
        self.waiting.pop(name, None)
        if name in self.finished:
            self.finished.remove(name)

    def room(self, now: float) -> bool:
        """Whether a new task fits, making its room the rule's way."""
        if self.size() < self.bound:
            return True
        if self.finished:
            self.states.pop(self.finished.pop(0))
            return True
        stale = [n for n, since in self.waiting.items() if now - since >= self.waiting_timeout]
        if stale:
            self.waiting.pop(stale[0])
            self.states.pop(stale[0])
            return True
        return False

    def put(self, name: str, state: TaskState, now: float) -> None:
        self.forget(name)
        self.states[name] = state
        if state in FINISHED:
            self.finished.append(name)
        elif state == WAITING:
            self.waiting[name] = now
        else:
            self.working.add(name)


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("create"), st.sampled_from([WORKING, WAITING, *FINISHED])),
        st.tuples(st.just("move"), st.integers(0, 30), st.sampled_from([WORKING, WAITING, *FINISHED])),
        st.tuples(st.just("get"), st.integers(0, 30)),
        st.tuples(st.just("tick"), st.sampled_from([1.0, 5.0])),
    ),
    max_size=40,
)


async def _run_ops(bound: int, ops: list[tuple[Any, ...]]) -> None:
    timeout = 8.0
    d = driver(bound, waiting_timeout=timeout)
    model = Model(bound, timeout)
    created = 0
    for op in ops:
        if op[0] == "create":
            name = f"t{created}"
            created += 1
            fits = model.room(d.clock.now)
            if fits:
                await d.create(name, op[1])
                model.put(name, op[1], d.clock.now)
            else:
                with pytest.raises(UnsupportedOperationError):
                    await d.create(name, op[1])
        elif op[0] == "move":
            name = f"t{op[1]}"
            # Only a live task the store still holds moves on, as the SDK has it.
            if name in model.working or name in model.waiting:
                await d.move(name, op[2])
                model.put(name, op[2], d.clock.now)
        elif op[0] == "tick":
            d.clock.now += op[1]
        # After every step: the bound holds, and the store holds exactly what
        # the rule keeps (so no live task was evicted, and the finished ones
        # kept are the most recent).
        assert d.store.size <= bound
        # The live count (what keeps a principal held) follows the records exactly.
        assert d.store.has_live(ANN) == bool(model.working or model.waiting)
        for n in range(created):
            assert await d.kept(f"t{n}") == model.states.get(f"t{n}"), (f"t{n}", model)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bound=st.integers(1, 5), ops=_OPS)
def test_the_store_keeps_exactly_what_the_eviction_rule_keeps(backend: str, bound: int, ops: list[tuple[Any, ...]]) -> None:
    run: Callable[..., Awaitable[None]] = _run_ops
    anyio.run(run, bound, ops, backend=backend)
