"""``agentfx.as_result``, the typed, public way to consume an awaited dispatch, and the containers a dispatch is answered in."""

# pyright: reportPrivateUsage=false
# (the containers' tests look at the bridge's internals on purpose)

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any, assert_type

import pytest
from returns.future import FutureResult
from returns.io import IOFailure, IOResult, IOSuccess
from returns.primitives.tracing import collect_traces
from returns.result import Failure, Result, Success

import agentfx
from agentfx import _returns
from agentfx.pipeline import DispatchResult
from tests.support import AppAgent, RequestedCreateTodo, User, recorder


def _describe(outcome: IOResult[DispatchResult, agentfx.DispatchError]) -> str:
    # No ``case _``: pyright strict proves this match exhaustive, and types both bindings.
    match agentfx.as_result(outcome):
        case Success(result):
            return f"ok {assert_type(result, DispatchResult).tag}"
        case Failure(error):
            return f"refused {assert_type(error, agentfx.DispatchError).message}"


@pytest.mark.anyio
async def test_an_awaited_dispatch_matches_as_success_or_failure() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    created = await runtime.messages.dispatch(RequestedCreateTodo, {"title": "Milk"})
    assert _describe(created) == "ok RequestedCreateTodo"
    invalid = await runtime.messages.dispatch(RequestedCreateTodo, {"title": 3})
    assert _describe(invalid) == 'refused Invalid input for "requested_create_todo"'
    refused = await agentfx.bind(AppAgent, host=recorder(principal=User("bob", can_delete=False)).host).messages.dispatch(
        "delete_selected_todo", {}
    )
    assert agentfx.as_result(refused) == Failure(
        agentfx.AgentAuthorizationError(
            capability="delete_selected_todo",
            tag="RequestedDeleteTodo",
            message='Not authorized to invoke "delete_selected_todo"',
        )
    )


def test_it_unwraps_the_io_and_keeps_the_result() -> None:
    assert agentfx.as_result(IOSuccess(1)) == Success(1)
    assert agentfx.as_result(IOFailure("no")) == Failure("no")
    assert_type(agentfx.as_result(IOSuccess(1)), Success[int] | Failure[Any])


def test_a_result_is_narrowed_the_same_way() -> None:
    read: Result[object, agentfx.AgentResourceError] = agentfx.bind(AppAgent, host=recorder().host).resources.read("nope")
    narrowed = agentfx.as_result(read)
    assert_type(narrowed, Success[object] | Failure[agentfx.AgentResourceError])
    assert narrowed is read
    assert isinstance(narrowed, Failure)
    assert narrowed.failure().message == 'Cannot read resource "nope": no such resource'


class _NotYetAwaited:
    def __await__(self) -> Generator[None, None, None]:
        yield


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ok", "as_result() takes an IOResult or a Result, got str"),
        (_NotYetAwaited(), "as_result() takes an IOResult or a Result, got _NotYetAwaited; await the dispatch first"),
    ],
)
def test_anything_else_is_a_type_error(value: object, message: str) -> None:
    untyped: Any = value
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        agentfx.as_result(untyped)


# --- the containers the runtime builds without their constructors ----------------------------


def test_the_containers_are_the_ones_their_constructors_build() -> None:
    assert _returns.success is _returns._fast_success
    made = _returns.success([1])
    assert type(made) is Success
    assert made == Success([1])
    assert made.map(len) == Success(1)
    assert repr(made) == "<Success: [1]>"
    refused = _returns.failure("no")
    assert type(refused) is Failure
    assert refused == Failure("no")
    assert refused.failure() == "no"
    assert refused.trace is None
    assert hash(_returns.success(1)) == hash(Success(1))


def test_a_failure_records_the_same_trace_as_its_constructor() -> None:
    # returns' collect_traces skips the frames of the constructor: the helper must sit at the same depth.
    with collect_traces():
        built = _returns.failure("no")
        constructed = Failure("no")
    assert built.trace is not None
    assert constructed.trace is not None
    assert [(f.function, f.filename) for f in built.trace] == [(f.function, f.filename) for f in constructed.trace]
    assert built.trace[0].function == "test_a_failure_records_the_same_trace_as_its_constructor"


@pytest.mark.anyio
async def test_a_future_result_runs_nothing_until_awaited_and_can_be_awaited_again() -> None:
    ran: list[int] = []

    async def work() -> Result[int, str]:
        ran.append(1)
        return Success(len(ran))

    future = _returns.future_result(work())
    assert isinstance(future, FutureResult)
    assert repr(future).startswith("<FutureResult: <coroutine object ")
    assert ran == []
    assert await future == IOSuccess(1)
    assert await future == IOSuccess(1)
    assert await future.awaitable() == IOSuccess(1)
    assert await future.map(lambda n: n + 1) == IOSuccess(2)
    assert await future.alt(lambda error: error + "!") == IOSuccess(1)
    assert ran == [1]


@pytest.mark.anyio
@pytest.mark.parametrize("result", [Success(1), Failure("no")], ids=["success", "failure"])
async def test_an_awaited_future_result_is_the_io_container_returns_itself_would_give(result: Result[int, str]) -> None:
    async def work() -> Result[int, str]:
        return result

    ours = await _returns.future_result(work())
    theirs = await FutureResult(work())
    assert type(ours) is type(theirs)
    assert ours == theirs
    assert repr(ours) == repr(theirs)
    assert hash(ours) == hash(theirs)
    assert type(agentfx.as_result(ours)) is type(result)
    assert agentfx.as_result(ours) == result


def test_the_import_time_check_refuses_containers_built_otherwise_than_by_their_constructors(monkeypatch: pytest.MonkeyPatch) -> None:
    # The import-time check refuses containers that differ from what the constructors build.
    assert _returns._builds_containers()
    def stores_nothing(container: object, value: object) -> None:
        return None

    monkeypatch.setattr(_returns, "_set_inner", stores_nothing)
    assert not _returns._builds_containers()
    monkeypatch.setattr(_returns, "_slot", None)
    assert not _returns._builds_containers()
