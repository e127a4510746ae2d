"""``agentfx.as_result``: the typed, public way to consume an awaited dispatch."""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any, assert_type

import pytest
from returns.io import IOFailure, IOResult, IOSuccess
from returns.result import Failure, Result, Success

import agentfx
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
