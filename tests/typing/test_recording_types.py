"""What pyright infers for a ``RecordingHost``, and the principal-less recorders it refuses.

Checked by pyright in strict mode with the rest of ``tests`` and run under
pytest. Negative checks are pinned with ``# pyright: ignore[<rule>]`` under
``reportUnnecessaryTypeIgnoreComment``, so an expected error that disappears
fails the type check.

- The Message type is inferred from ``update``, else it is ``Any``: never
  unknown, so an unannotated recorder passes strict.
- A recorder given no principal gives every invocation ``None``; it is a
  ``RecordingHost[M, Msg, None]``, so a contract whose hooks read a ``User``
  refuses its host where it is bound rather than with an ``AttributeError``
  at the first call. An untyped contract (principal ``Any``) takes it.
"""

from __future__ import annotations

import inspect
from typing import Any, assert_type

import msgspec
import pytest

import agentfx
from agentfx import AgentRuntime, Host, Invocation
from agentfx.testing import RecordingHost

pytestmark = pytest.mark.anyio


class Model(msgspec.Struct, frozen=True):
    todos: tuple[str, ...] = ()


class User(msgspec.Struct, frozen=True):
    name: str
    can_create: bool = True


class CreatedTodo(msgspec.Struct, frozen=True, tag=True):
    title: str


class ClearedTodos(msgspec.Struct, frozen=True, tag=True):
    pass


Message = CreatedTodo | ClearedTodos


def update(model: Model, message: Message) -> Model:
    match message:
        case CreatedTodo(title=title):
            return Model(todos=(*model.todos, title))
        case ClearedTodos():
            return Model()


TodoAgent = agentfx.for_model(Model, principal=User)
AppAgent = TodoAgent.define(
    TodoAgent.expose(Message, TodoAgent.variant(CreatedTodo, "Create a todo", authorize=lambda req: req.principal.can_create))
)
Untyped = agentfx.define(agentfx.expose(Message, agentfx.variant(CreatedTodo, "Create a todo")))


def test_the_message_type_is_any_without_an_update_and_inferred_from_one() -> None:
    constant = RecordingHost(Model(), principal=User("ada"))
    assert_type(constant, RecordingHost[Model, Any, User])
    assert_type(constant.host, Host[Model, Any, User])
    assert_type(constant.dispatched, list[Any])
    resolved = RecordingHost(Model(), principal=lambda invocation: User(invocation.transport))
    assert_type(resolved, RecordingHost[Model, Any, User])
    updating = RecordingHost(Model(), principal=User("ada"), update=update)
    assert_type(updating, RecordingHost[Model, Message, User])
    assert_type(updating.dispatched, list[Message])
    anonymous = RecordingHost(Model(), update=update)
    assert_type(anonymous, RecordingHost[Model, Message, None])
    assert_type(RecordingHost(0), RecordingHost[int, Any, None])
    annotated: RecordingHost[Model, Message, User] = RecordingHost(Model(), principal=User("ada"))
    assert_type(annotated, RecordingHost[Model, Message, User])
    lambdas: RecordingHost[int, int, None] = RecordingHost(0, update=lambda model, message: model + message)
    assert lambdas.model() == 0 and anonymous.model() == Model()


def test_a_recorder_without_a_principal_is_refused_for_a_contract_wanting_one() -> None:
    anonymous = RecordingHost(Model())
    assert_type(anonymous, RecordingHost[Model, Any, None])
    TodoAgent.bind(AppAgent, host=anonymous.host)  # pyright: ignore[reportArgumentType]
    agentfx.bind(AppAgent, host=anonymous.host)  # pyright: ignore[reportArgumentType]
    wrong: RecordingHost[Model, Message, User] = RecordingHost(Model())  # pyright: ignore[reportAssignmentType]
    # ``None`` spelt out is no principal either.
    explicit: RecordingHost[Model, Message, User] = RecordingHost(Model(), principal=None)  # pyright: ignore[reportAssignmentType]
    # An untyped contract takes any principal, ``None`` included.
    untyped = agentfx.bind(Untyped, host=anonymous.host)
    assert_type(untyped, AgentRuntime[Any, Any])
    assert (wrong.model(), explicit.model()) == (Model(), Model())


async def test_every_invocation_gets_the_principal_it_was_given() -> None:
    seen: list[object] = []

    def resolve(invocation: Invocation) -> User:
        seen.append(invocation.id)
        return User(f"{invocation.id}")

    for recorder in (RecordingHost(Model(), principal=User("ada"), update=update), RecordingHost(Model(), principal=resolve)):
        runtime = TodoAgent.bind(AppAgent, host=recorder.host)
        await runtime.messages.call(CreatedTodo, {"title": "milk"}, Invocation(id="i1"))
        assert recorder.dispatched == [CreatedTodo("milk")]
        assert recorder.principal_calls == 1
    assert seen == ["i1"]
    anonymous = RecordingHost(Model(), update=update)
    await agentfx.bind(Untyped, host=anonymous.host).messages.call(CreatedTodo, {"title": "bread"})
    assert anonymous.principal(Invocation()) is None
    assert anonymous.model() == Model(todos=("bread",))


def test_the_constructor_signature_is_unchanged_at_run_time() -> None:
    assert list(inspect.signature(RecordingHost).parameters) == ["model", "principal", "responses", "update", "async_dispatch"]
    recorder = RecordingHost(Model(), principal=User("ada"), responses={CreatedTodo: [ClearedTodos()]}, async_dispatch=True)
    assert isinstance(recorder, RecordingHost) and recorder.dispatched == []


def test_a_principal_type_admitting_none_takes_none_spelt_out() -> None:
    optional: RecordingHost[Model, Any, User | None] = RecordingHost(Model(), principal=None)
    assert_type(optional, RecordingHost[Model, Any, User | None])
    # Omitted, the principal is ``None`` exactly: annotate the class to widen it.
    RecordingHost[Model, Any, User | None](Model())
    omitted: RecordingHost[Model, Any, User | None] = RecordingHost(Model())  # pyright: ignore[reportAssignmentType]
    assert optional.principal(Invocation()) is None and omitted.principal(Invocation()) is None
