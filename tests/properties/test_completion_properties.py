"""Completion under concurrency: every invocation settles with its own result, whatever the order."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from returns.result import Result, Success

import agentfx
from agentfx import Completion, DispatchError, DispatchResult, Invocation
from agentfx.testing.recording import RecordingHost
from tests.completion_support import (
    A,
    Create,
    Created,
    CreateFailed,
    Model,
    TitleInput,
    by_request,
    create_variant,
    request_key,
    result_key,
)
from tests.support import outcome_of

Message = Create | Created | CreateFailed


def definition(keyed: bool) -> agentfx.Definition[Model, None]:
    completion: Completion[TitleInput, Any] = (
        Completion(success=Created, failure=CreateFailed, correlate_key=(request_key, result_key), timeout=30)
        if keyed
        else Completion(success=Created, failure=CreateFailed, correlate=by_request, timeout=30)
    )
    # Every call has the same input: only the invocation id tells them apart.
    return A.define(A.expose(Message, create_variant(completion)))


@st.composite
def schedules(draw: st.DrawFn) -> tuple[list[int], list[bool], list[int]]:
    """How many calls, the order their results arrive in, which fail, and stray results."""
    n = draw(st.integers(min_value=1, max_value=300))
    order = draw(st.permutations(range(n)))
    failed = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    strays = draw(st.lists(st.integers(min_value=n, max_value=2 * n), max_size=5))
    return list(order), failed, strays


@pytest.mark.parametrize("keyed", [False, True], ids=["correlate", "keyed"])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@settings(max_examples=12, deadline=None)
@given(schedule=schedules())
@example(schedule=(list(range(300))[::-1], [i % 3 == 0 for i in range(300)], [300, 301]))
def test_every_invocation_settles_with_its_own_result(
    backend: str, keyed: bool, schedule: tuple[list[int], list[bool], list[int]]
) -> None:
    order, failed, strays = schedule
    n = len(order)
    outcomes: dict[int, Result[DispatchResult, DispatchError]] = {}
    recorder: RecordingHost[Model, Any, None] = RecordingHost(Model())
    runtime = A.bind(definition(keyed), host=recorder.host)

    async def call(i: int) -> None:
        outcomes[i] = outcome_of(await runtime.messages.dispatch(Create, {"title": "milk"}, Invocation(id=f"call-{i}")))

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for i in range(n):
                tasks.start_soon(call, i)
            while len(recorder.dispatched) < n:
                await anyio.sleep(0)
            for stray in strays:  # results for calls that are not pending are ignored
                recorder.emit(Created("milk", f"call-{stray}"))
            for i in order:
                result = CreateFailed if failed[i] else Created
                recorder.emit(result("milk", f"call-{i}"))

    anyio.run(main, backend=backend)
    assert len(outcomes) == n
    for i, outcome in outcomes.items():
        assert isinstance(outcome, Success)
        settled = outcome.unwrap().completion
        assert settled is not None
        assert settled.status == ("failed" if failed[i] else "completed")
        assert settled.message.request == f"call-{i}"
    assert recorder.listener_count == 0
