"""What a pending completion waits on: the right primitive for the task that waits.

A wait that must suspend is a bare asyncio future on asyncio and an
anyio.Event elsewhere; which one is decided by the task that waits, not by
whichever event loop happens to run in the thread (trio in guest mode runs
on top of a running asyncio loop).
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
import trio
import trio.lowlevel
from returns.result import Success

import agentfx
from agentfx import Completion, when
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

