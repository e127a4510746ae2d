"""What a pending completion waits on: the right primitive for the task that waits.

A wait that must suspend is a bare asyncio future on asyncio and an
anyio.Event elsewhere; which one is decided by the task that waits, not by
whichever event loop happens to run in the thread (trio in guest mode runs
on top of a running asyncio loop).
"""
# pyright: reportPrivateUsage=false
# (the last test looks at what a pending invocation holds, on purpose)

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
import trio
import trio.lowlevel
from returns.result import Success

import agentfx
from agentfx import CallInfo, Completion, CompletionOutcome, when
from agentfx.completion import Pending
from agentfx.testing.recording import RecordingHost
from tests.completion_support import (
    A,
    Create,
    Created,
    CreateFailed,
    Model,
    Rename,
    by_request,
    create_variant,
    until,
)
from tests.support import run

Message = Create | Created | CreateFailed | Rename


def _name(model: Model) -> str:
    return model.name


def _renamed(name: str, request: Rename) -> bool:
    return name == request.name


def _runtime(recorder: RecordingHost[Model, Any, None], log: agentfx.AuditLog) -> agentfx.AgentRuntime[Model, None]:
    renamed = when(projection=_name, predicate=_renamed, timeout=5)
    definition = A.define(
        A.expose(
            Message,
            create_variant(Completion(success=Created, correlate=by_request, timeout=5), name="create"),
            A.variant(Rename, "Rename the project", completion=renamed),
        )
    )
    return A.bind(definition, host=recorder.host, audit=log)


async def _waiting_calls(runtime: agentfx.AgentRuntime[Model, None], recorder: RecordingHost[Model, Any, None]) -> list[str]:
    """A Message completion and a state completion, each met only after its wait has suspended."""
    statuses: list[str] = []

    async def create() -> None:
        outcome = await run(runtime, Create, {"title": "milk"}, agentfx.Invocation(id="c1"))
        assert isinstance(outcome, Success), outcome
        statuses.append(f"create {outcome.unwrap().completion}")

    async def rename() -> None:
        outcome = await run(runtime, Rename, {"name": "new"})
        assert isinstance(outcome, Success), outcome
        statuses.append(f"rename {outcome.unwrap().completion}")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(create)
            tasks.start_soon(rename)
            await until(lambda: len(recorder.dispatched) == 2)
            await anyio.wait_all_tasks_blocked()
            recorder.emit(Created("milk", "c1"))
            recorder.set_model(Model(name="new"))
    return sorted(statuses)


_MET = [
    "create CompletionOutcome(status='completed', message=Created(title='milk', request='c1'))",
    "rename CompletionOutcome(status='completed', message=None)",
]


def test_trio_in_guest_mode_on_asyncio_waits_on_trio_and_the_host_loop_on_asyncio() -> None:
    # Trio's tasks run on top of the running asyncio loop: an asyncio future
    # handed to one of them would be refused by trio ("unrecognized yield
    # message"), after its Message was sent. The host loop's own tasks, in
    # the same thread at the same time, still wait on asyncio's.
    got: dict[str, list[str]] = {}
    logs = {"trio": agentfx.audit_log(), "asyncio": agentfx.audit_log()}
    recorders = {side: RecordingHost[Model, Any, None](Model()) for side in logs}

    async def as_guest() -> None:
        assert trio.lowlevel.in_trio_task()
        got["trio"] = await _waiting_calls(_runtime(recorders["trio"], logs["trio"]), recorders["trio"])

    async def on_the_host_loop() -> None:
        loop = asyncio.get_running_loop()
        finished: asyncio.Future[object] = loop.create_future()
        trio.lowlevel.start_guest_run(
            as_guest, run_sync_soon_threadsafe=loop.call_soon_threadsafe, done_callback=finished.set_result
        )
        got["asyncio"] = await _waiting_calls(_runtime(recorders["asyncio"], logs["asyncio"]), recorders["asyncio"])
        outcome: Any = await finished
        outcome.unwrap()  # re-raises whatever the guest run raised

    asyncio.run(on_the_host_loop())
    assert got == {"trio": _MET, "asyncio": _MET}
    for side, log in logs.items():
        assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "completed")] * 2, side
        assert recorders[side].listener_count == 0, side


@pytest.mark.anyio
async def test_a_waiting_completion_is_met_on_each_backend(anyio_backend: str) -> None:
    recorder = RecordingHost[Model, Any, None](Model())
    log = agentfx.audit_log()
    assert await _waiting_calls(_runtime(recorder, log), recorder) == _MET
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "completed")] * 2




# --- several waits on one pending invocation ------------------------------------------------------


def _pending() -> Pending:
    return Pending(None, CallInfo(agentfx.Invocation("p1"), None))


@pytest.mark.anyio
@pytest.mark.parametrize("ending", ["settle", "fail"])
async def test_every_wait_on_a_pending_invocation_is_woken(anyio_backend: str, ending: str) -> None:
    # Each waiter() used to replace the one before: only the last wait heard the
    # settlement, and every earlier one hung until its own deadline.
    pending = _pending()
    defect = LookupError("a hook failed while matching")
    got: dict[int, object] = {}

    async def wait(index: int) -> None:
        try:
            got[index] = await pending.wait()
        except LookupError as raised:
            got[index] = raised

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            for index in range(3):
                tasks.start_soon(wait, index)
            await anyio.wait_all_tasks_blocked()
            assert got == {}
            if ending == "settle":
                pending.settle(CompletionOutcome("completed"))
            else:
                pending.fail(defect)
    expected = CompletionOutcome("completed") if ending == "settle" else defect
    assert got == {0: expected, 1: expected, 2: expected}


@pytest.mark.anyio
@pytest.mark.parametrize("cancelled", [0, 1], ids=["first-cancelled", "second-cancelled"])
async def test_one_cancelled_wait_leaves_the_other_waiting(anyio_backend: str, cancelled: int) -> None:
    # A future two tasks await is cancelled for both when one of them is:
    # each wait needs its own, or one caller's deadline would end the other's.
    pending = _pending()
    got: dict[int, object] = {}
    scopes = [anyio.CancelScope(), anyio.CancelScope()]

    async def wait(index: int) -> None:
        with scopes[index]:
            got[index] = await pending.wait()
        if scopes[index].cancelled_caught:
            got[index] = "cancelled"

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait, 0)
            await anyio.wait_all_tasks_blocked()
            tasks.start_soon(wait, 1)
            await anyio.wait_all_tasks_blocked()
            scopes[cancelled].cancel()
            await anyio.wait_all_tasks_blocked()
            assert got == {cancelled: "cancelled"}
            pending.settle(CompletionOutcome("completed"))
    assert got == {cancelled: "cancelled", 1 - cancelled: CompletionOutcome("completed")}


@pytest.mark.anyio
async def test_waiting_again_after_a_cancelled_wait_keeps_one_waiter(anyio_backend: str) -> None:
    # The first wait of a pending invocation is one bare future on asyncio
    # (its memory is measured); a wait that was cancelled leaves nothing
    # behind for the next one to carry.
    pending = _pending()
    for _ in range(3):
        with anyio.move_on_after(0.01):
            await pending.wait()
    assert not isinstance(pending._event, list)
    if anyio_backend == "asyncio":
        assert type(pending._event) is asyncio.Future
    waiting = pending.waiter()
    assert waiting is not None and not isinstance(pending._event, list)
    pending.settle(CompletionOutcome("completed"))
    await waiting
    assert pending.waiter() is None
