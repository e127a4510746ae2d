"""A completion built outside ``variant(...)``: fully typed, and shareable between variants.

Checked by pyright in strict mode with the rest of ``tests`` (an Unknown in a
variable's type is an error there), and run under pytest. Built standalone, a
completion has nothing to infer its ``request`` type from, so it is ``Any``
(``Completion[Any, Res]``) rather than unknown; written inline, the variant
still infers it.
"""

from __future__ import annotations

from typing import Any, assert_type

import msgspec
import pytest

import agentfx
from agentfx import CallInfo, Completion, StateCompletion
from agentfx.testing import RecordingHost

pytestmark = pytest.mark.anyio


class Model(msgspec.Struct, frozen=True):
    todos: tuple[str, ...] = ()


class User(msgspec.Struct, frozen=True):
    name: str


class RequestedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class RequestedArchiveTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class DeletedTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class FailedDelete(msgspec.Struct, frozen=True, tag=True):
    id: str


Message = RequestedDeleteTodo | RequestedArchiveTodo | DeletedTodo | FailedDelete

TodoAgent = agentfx.for_model(Model, principal=User)

# Shared by two variants, so written once, outside either.
deleted = Completion(success=DeletedTodo, failure=FailedDelete, timeout=10.0)
assert_type(deleted, Completion[Any, DeletedTodo | FailedDelete, Any])
settled = agentfx.when(projection=lambda model: model, predicate=lambda value, request: True)
assert_type(settled, StateCompletion[Any, Any, Any])
# Annotated, a standalone completion's hooks are checked like inline ones.
emptied: StateCompletion[Model, Model, Any] = agentfx.when(
    projection=lambda model: model, predicate=lambda value, request: not assert_type(value, Model).todos
)

AppAgent = TodoAgent.define(
    TodoAgent.expose(
        Message,
        TodoAgent.variant(RequestedDeleteTodo, "Delete a todo by id", completion=deleted),
        TodoAgent.variant(RequestedArchiveTodo, "Archive a todo by id", completion=deleted),
    )
)


def test_inline_completions_still_infer_the_request_and_the_sent_message() -> None:
    def correlate(request: RequestedDeleteTodo, result: DeletedTodo, call: CallInfo[RequestedDeleteTodo]) -> bool:
        return request.id == result.id == call.message.id

    inline = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo by id",
        completion=Completion(
            success=DeletedTodo,
            correlate=lambda request, result, call: assert_type(request, RequestedDeleteTodo).id
            == assert_type(call.message, RequestedDeleteTodo).id
            == result.id,
        ),
    )
    typed = Completion(success=DeletedTodo, correlate=correlate)
    assert_type(typed, Completion[RequestedDeleteTodo, DeletedTodo, RequestedDeleteTodo])
    assert inline.completion is not None


async def test_a_shared_completion_completes_each_variant_it_is_given_to() -> None:
    def answer(message: RequestedDeleteTodo | RequestedArchiveTodo) -> list[DeletedTodo]:
        return [DeletedTodo(id=message.id)]

    recorder = RecordingHost(
        Model(),
        principal=User("ada"),
        responses={RequestedDeleteTodo: answer, RequestedArchiveTodo: answer},
    )
    runtime = TodoAgent.bind(AppAgent, host=recorder.host)
    for target in (RequestedDeleteTodo, RequestedArchiveTodo):
        result = await runtime.messages.call(target, {"id": "t1"})
        assert result.completion == agentfx.CompletionOutcome("completed", DeletedTodo(id="t1"))
    assert emptied.predicate(Model(), None) is True
    assert settled.predicate(Model(), None) is True
