"""Declaring a contract: every definition-time check, with its exact message."""

from __future__ import annotations

import functools
import inspect
import re
import typing
from collections.abc import Callable
from typing import Any, cast

import msgspec
import pytest

import agentfx
from agentfx import Action, AgentBuilder, Completion, ContractError, Variant
from agentfx.contract import Declarations
from tests.support import (
    ClearedSelection,
    DeletedTodo,
    FailedDeleteTodo,
    Model,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    Todo,
    TodoAgent,
    User,
)


class Renamed(msgspec.Struct, frozen=True, tag="todo_renamed"):
    title: str


class NotInUnion(msgspec.Struct, frozen=True, tag=True):
    pass


class DeleteInput(msgspec.Struct, frozen=True):
    id: str


class NotAStruct:
    id: str = ""


Message = RequestedCreateTodo | RequestedDeleteTodo | ClearedSelection | DeletedTodo | FailedDeleteTodo | Renamed


def make_delete(i: DeleteInput, ctx: agentfx.InvocationContext[Any, Any]) -> RequestedDeleteTodo:
    return RequestedDeleteTodo(id=i.id)


def raises(message: str) -> pytest.RaisesExc[ContractError]:
    """Expect a ContractError whose message is exactly ``message``."""
    return pytest.raises(ContractError, match=f"^{re.escape(message)}$")


# --- the Message union -----------------------------------------------------------------------


def test_contract_error_is_a_value_error() -> None:
    assert issubclass(ContractError, ValueError)


def test_a_class_outside_the_union_is_refused_with_its_tag() -> None:
    with raises('Cannot expose "NotInUnion": it is not a variant of this Message union'):
        agentfx.expose(Message, agentfx.variant(NotInUnion, "Not a member"))


def test_the_not_a_variant_message_names_the_msgspec_tag_not_the_class() -> None:
    class Other(msgspec.Struct, tag="other_tag"):
        pass

    with raises('Cannot expose "other_tag": it is not a variant of this Message union'):
        agentfx.expose(Message, agentfx.variant(Other, "Not a member"))


@pytest.mark.parametrize(
    "union",
    [
        pytest.param(RequestedCreateTodo | ClearedSelection, id="pipe"),
        pytest.param(typing.Union[RequestedCreateTodo, ClearedSelection], id="typing.Union"),
    ],
)
def test_a_union_may_be_written_either_way(union: object) -> None:
    exposed = agentfx.expose(
        union,
        agentfx.variant(ClearedSelection, "Clear"),
        agentfx.variant(RequestedCreateTodo, "Create"),
    )
    assert [c.message for c in exposed.capabilities] == [ClearedSelection, RequestedCreateTodo]
    assert exposed.union is union
    with raises('Cannot expose "RequestedDeleteTodo": it is not a variant of this Message union'):
        agentfx.expose(union, agentfx.variant(RequestedDeleteTodo, "Delete"))


def test_a_single_class_is_a_union_of_one() -> None:
    exposed = agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, "Clear"))
    assert [c.name for c in exposed.capabilities] == ["cleared_selection"]
    with raises('Cannot expose "RequestedCreateTodo": it is not a variant of this Message union'):
        agentfx.expose(ClearedSelection, agentfx.variant(RequestedCreateTodo, "Create"))


def test_a_type_alias_of_a_union_is_unwrapped() -> None:
    typing_extensions = pytest.importorskip("typing_extensions")
    alias: object = typing_extensions.TypeAliasType("Alias", RequestedCreateTodo | ClearedSelection)
    exposed = agentfx.expose(alias, agentfx.variant(ClearedSelection, "Clear"))
    assert [c.message for c in exposed.capabilities] == [ClearedSelection]
    with raises('Cannot expose "RequestedDeleteTodo": it is not a variant of this Message union'):
        agentfx.expose(alias, agentfx.variant(RequestedDeleteTodo, "Delete"))


def test_a_type_alias_of_one_class_or_of_another_alias_is_unwrapped() -> None:
    typing_extensions = pytest.importorskip("typing_extensions")
    single: object = typing_extensions.TypeAliasType("Single", ClearedSelection)
    exposed = agentfx.expose(single, agentfx.variant(ClearedSelection, "Clear"))
    assert [c.message for c in exposed.capabilities] == [ClearedSelection]
    with raises('Cannot expose "RequestedCreateTodo": it is not a variant of this Message union'):
        agentfx.expose(single, agentfx.variant(RequestedCreateTodo, "Create"))
    renamed: object = typing_extensions.TypeAliasType("Renamed", single)
    assert [c.message for c in agentfx.expose(renamed, agentfx.variant(ClearedSelection, "Clear")).capabilities] == [
        ClearedSelection
    ]


def test_something_that_is_not_a_union_is_refused() -> None:
    with pytest.raises(ContractError, match="expose\\(\\) needs a Message class or a union of Message classes"):
        agentfx.expose("Message", agentfx.variant(ClearedSelection, "Clear"))


def test_a_message_that_is_not_a_class_is_refused() -> None:
    untyped: Any = "ClearedSelection"
    with raises("Cannot expose 'ClearedSelection': it is not a Message class"):
        declared: Variant[Any, Any, Any, Any] = Variant(untyped, "Not a class")
        agentfx.expose(Message, declared)


def test_something_that_is_not_a_variant_is_refused() -> None:
    untyped: Any = ClearedSelection
    with raises(f"expose() takes variants made by variant() or action(), got {ClearedSelection!r}"):
        agentfx.expose(Message, untyped)


def test_a_message_class_is_exposed_once() -> None:
    with raises('Cannot expose "RequestedDeleteTodo": it is already exposed as "requested_delete_todo"'):
        agentfx.expose(
            Message,
            agentfx.variant(RequestedDeleteTodo, "Delete by id"),
            agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo"),
        )


# --- names -----------------------------------------------------------------------------------


def test_the_default_name_is_the_snake_cased_tag() -> None:
    exposed = agentfx.expose(
        Message,
        agentfx.variant(RequestedDeleteTodo, "Delete"),
        agentfx.variant(ClearedSelection, "Clear"),
    )
    assert [(c.name, c.tag) for c in exposed.capabilities] == [
        ("requested_delete_todo", "RequestedDeleteTodo"),
        ("cleared_selection", "ClearedSelection"),
    ]


def test_an_explicit_msgspec_tag_is_the_tag_and_the_source_of_the_name() -> None:
    [capability] = agentfx.expose(Message, agentfx.variant(Renamed, "Rename")).capabilities
    assert (capability.tag, capability.name) == ("todo_renamed", "todo_renamed")

    class PascalTagged(msgspec.Struct, tag="TodoWasRenamed"):
        pass

    [capability] = agentfx.expose(PascalTagged, agentfx.variant(PascalTagged, "Rename")).capabilities
    assert (capability.tag, capability.name) == ("TodoWasRenamed", "todo_was_renamed")


def test_an_explicit_name_wins_and_the_tag_is_kept() -> None:
    [capability] = agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo")).capabilities
    assert (capability.name, capability.tag) == ("delete_todo", "RequestedDeleteTodo")


@pytest.mark.parametrize(
    ("name", "named"),
    [("create todo",) * 2, ("",) * 2, ("x" * 129, "x" * 128 + "…"), ("créer",) * 2, ("a.b",) * 2, ("a/b",) * 2],
)
def test_an_invalid_explicit_name_is_refused_at_expose(name: str, named: str) -> None:
    declared = agentfx.variant(RequestedCreateTodo, "Create", name=name)  # declaring is not exposing
    with raises(
        f'Cannot expose "RequestedCreateTodo": "{named}" is not a valid capability name. '
        "Use 1-128 characters of [a-zA-Z0-9_-]."
    ):
        agentfx.expose(Message, declared)


def test_an_explicit_name_that_is_not_a_string_is_refused_at_expose() -> None:
    declared = agentfx.variant(RequestedCreateTodo, "Create", name=cast(Any, 1))
    with raises(
        'Cannot expose "RequestedCreateTodo": 1 is not a valid capability name. '
        "Use a string of 1-128 characters of [a-zA-Z0-9_-]."
    ):
        agentfx.expose(Message, declared)


def test_the_longest_valid_name_is_accepted() -> None:
    [capability] = agentfx.expose(Message, agentfx.variant(RequestedCreateTodo, "Create", name="x" * 128)).capabilities
    assert capability.name == "x" * 128


def test_an_invalid_default_name_is_refused_with_the_tag() -> None:
    class Spaced(msgspec.Struct, tag="spaced tag"):
        pass

    with raises(
        'Cannot expose "spaced tag": "spaced tag" is not a valid capability name. Use 1-128 characters of [a-zA-Z0-9_-].'
    ):
        agentfx.expose(Spaced, agentfx.variant(Spaced, "Spaced"))


def test_two_explicit_names_may_not_collide() -> None:
    with raises('Duplicate exposed capability name "todo"'):
        agentfx.expose(
            Message,
            agentfx.variant(RequestedCreateTodo, "Create", name="todo"),
            agentfx.variant(RequestedDeleteTodo, "Delete", name="todo"),
        )


def test_an_explicit_name_may_not_collide_with_a_default_one() -> None:
    with raises('Duplicate exposed capability name "cleared_selection"'):
        agentfx.expose(
            Message,
            agentfx.variant(ClearedSelection, "Clear"),
            agentfx.variant(RequestedDeleteTodo, "Delete", name="cleared_selection"),
        )


def test_declaration_order_is_kept() -> None:
    order = [ClearedSelection, RequestedCreateTodo, Renamed, RequestedDeleteTodo]
    exposed = agentfx.expose(Message, *(agentfx.variant(cls, cls.__name__) for cls in order))
    definition = agentfx.define(messages=exposed)
    assert [c.message for c in definition.capabilities] == order
    assert [c.name for c in definition.capabilities] == [
        "cleared_selection",
        "requested_create_todo",
        "todo_renamed",
        "requested_delete_todo",
    ]


# --- direct and mapped variants --------------------------------------------------------------


def test_a_direct_variant_decodes_the_message_itself() -> None:
    [capability] = agentfx.expose(Message, agentfx.variant(RequestedCreateTodo, "Create")).capabilities
    assert capability.direct
    assert capability.input_type is RequestedCreateTodo
    assert capability.to_message is None
    assert capability.codec.decode({"title": "Buy milk"}) == RequestedCreateTodo(title="Buy milk")


def test_a_mapped_variant_decodes_its_input() -> None:
    [capability] = agentfx.expose(
        Message, agentfx.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=make_delete)
    ).capabilities
    assert not capability.direct
    assert capability.input_type is DeleteInput
    assert capability.to_message is make_delete
    assert capability.codec.decode({"id": "t1"}) == DeleteInput(id="t1")


def test_the_declared_hooks_are_carried_to_the_capability() -> None:
    def available(model: Model) -> bool:
        return model.selected is not None

    def authorize(req: agentfx.AuthorizationRequest[User, DeleteInput, Model]) -> bool:
        return req.principal.can_delete

    completion: Completion[DeleteInput, DeletedTodo | FailedDeleteTodo]
    completion = Completion(success=DeletedTodo, failure=FailedDeleteTodo)
    variant = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete the selected todo",
        name="delete_selected_todo",
        available=available,
        input=DeleteInput,
        to_message=make_delete,
        authorize=authorize,
        completion=completion,
    )
    [capability] = TodoAgent.expose(Message, variant).capabilities
    assert capability.description == "Delete the selected todo"
    assert capability.available is available
    assert capability.authorize is authorize
    assert capability.completion is completion


def test_input_without_to_message_is_refused() -> None:
    with raises('Cannot expose "RequestedDeleteTodo": "input" was provided without "to_message"'):
        agentfx.expose(Message, Variant(RequestedDeleteTodo, "Delete", input=DeleteInput))


def test_to_message_without_input_is_refused() -> None:
    with raises('Cannot expose "RequestedDeleteTodo": "to_message" was provided without "input"'):
        agentfx.expose(Message, Variant(RequestedDeleteTodo, "Delete", to_message=make_delete))


def test_the_variant_overloads_are_only_a_static_guard() -> None:
    # An untyped caller reaches the same runtime checks through ``variant`` itself.
    untyped: Any = agentfx.variant
    with raises('Cannot expose "RequestedDeleteTodo": "input" was provided without "to_message"'):
        agentfx.expose(Message, untyped(RequestedDeleteTodo, "Delete", input=DeleteInput))
    with raises('Cannot expose "RequestedDeleteTodo": "to_message" was provided without "input"'):
        agentfx.expose(Message, untyped(RequestedDeleteTodo, "Delete", to_message=make_delete))


def test_an_input_that_is_not_a_struct_is_refused() -> None:
    def to_message(i: NotAStruct, ctx: object) -> RequestedDeleteTodo:
        return RequestedDeleteTodo(id=i.id)

    with raises('Cannot expose "RequestedDeleteTodo": its input must be a msgspec Struct type'):
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", input=NotAStruct, to_message=to_message))


def test_a_direct_message_that_is_not_a_struct_is_refused() -> None:
    with raises('Cannot expose "NotAStruct": its input must be a msgspec Struct type'):
        agentfx.expose(NotAStruct, agentfx.variant(NotAStruct, "Plain"))


# --- completion ------------------------------------------------------------------------------


def test_a_completion_naming_no_success_is_refused_under_the_capability_name() -> None:
    with raises('Cannot expose "delete_todo": its completion contract names no success Message'):
        agentfx.expose(
            Message,
            agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo", completion=Completion(success=())),
        )


def test_a_class_both_success_and_failure_is_refused() -> None:
    completion: Completion[Any, Any] = Completion(success=(DeletedTodo, FailedDeleteTodo), failure=FailedDeleteTodo)
    with raises('Cannot expose "delete_todo": "FailedDeleteTodo" is both a success and a failure Message'):
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo", completion=completion))


def test_a_completion_message_outside_the_union_is_refused() -> None:
    completion: Completion[Any, Any] = Completion(success=NotInUnion)
    with raises(
        'Cannot expose "requested_delete_todo": its completion Message "NotInUnion" is not a variant of this Message union'
    ):
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", completion=completion))


@pytest.mark.parametrize("role", ["success", "failure"])
def test_a_completion_on_the_capability_s_own_message_is_refused(role: str) -> None:
    # The dispatched Message is observed like any other: it would "complete" its own call at once.
    own: Completion[Any, Any] = (
        Completion(success=RequestedDeleteTodo)
        if role == "success"
        else Completion(success=DeletedTodo, failure=(FailedDeleteTodo, RequestedDeleteTodo))
    )
    with raises(
        f'Cannot expose "delete_todo": "RequestedDeleteTodo" is both the Message it dispatches and a {role} Message'
    ):
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo", completion=own))


def test_correlate_and_correlate_key_are_exclusive() -> None:
    with raises('Give a completion either "correlate" or "correlate_key", not both'):
        Completion(
            success=DeletedTodo,
            correlate=lambda request, result, call: True,
            correlate_key=(lambda request, call: 1, lambda result: 1),
        )


def test_a_well_formed_completion_is_accepted() -> None:
    completion: Completion[Any, Any] = Completion(success=DeletedTodo, failure=FailedDeleteTodo, timeout=10)
    [capability] = agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", completion=completion)).capabilities
    assert capability.completion is completion


def test_a_state_completion_is_not_checked_against_the_union() -> None:
    done: agentfx.StateCompletion[Model, Model, ClearedSelection]
    done = agentfx.when(projection=lambda model: model, predicate=lambda value, request: True)
    [capability] = agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear", completion=done)).capabilities
    assert capability.completion is done


# --- actions ---------------------------------------------------------------------------------


DeleteAction = Action("delete_todo_by_id", "Delete a todo by id", DeleteInput, make_delete, message=RequestedDeleteTodo)


def test_an_action_is_exposed_under_its_own_name() -> None:
    def available(model: Model) -> bool:
        return bool(model.todos)

    def authorize(req: agentfx.AuthorizationRequest[User, DeleteInput, Model]) -> bool:
        return req.principal.can_delete

    [capability] = TodoAgent.expose(Message, TodoAgent.action(DeleteAction, available=available, authorize=authorize)).capabilities
    assert (capability.name, capability.tag) == ("delete_todo_by_id", "RequestedDeleteTodo")
    assert capability.description == "Delete a todo by id"
    assert capability.message is RequestedDeleteTodo
    assert capability.input_type is DeleteInput
    assert capability.to_message is make_delete
    assert (capability.available, capability.authorize) == (available, authorize)


def test_an_action_whose_message_is_outside_the_union_is_refused_with_that_tag() -> None:
    def to_message(i: DeleteInput, ctx: object) -> NotInUnion:
        return NotInUnion()

    outside = Action("outside", "Outside", DeleteInput, to_message, message=NotInUnion)
    with raises('Cannot expose "NotInUnion": it is not a variant of this Message union'):
        agentfx.expose(Message, agentfx.action(outside))


def test_action_takes_only_an_action() -> None:
    with raises(
        "action() takes an agentfx.Action(name, description, input, to_message, message=...), got 'delete_todo'"
    ):
        agentfx.action(cast(Any, "delete_todo"))
    # A Message class is what variant takes; the typed builder's action is the same check.
    with raises(
        "action() takes an agentfx.Action(name, description, input, to_message, message=...), "
        f'got {RequestedDeleteTodo!r}; to expose a Message class, write variant(RequestedDeleteTodo, "...")'
    ):
        TodoAgent.action(cast(Any, RequestedDeleteTodo))


def test_an_action_name_is_checked_like_any_other() -> None:
    bad = Action("delete todo", "Delete", DeleteInput, make_delete, message=RequestedDeleteTodo)
    with raises(
        'Cannot expose "RequestedDeleteTodo": "delete todo" is not a valid capability name. '
        "Use 1-128 characters of [a-zA-Z0-9_-]."
    ):
        agentfx.expose(Message, agentfx.action(bad))


def test_an_action_name_collides_like_any_other() -> None:
    with raises('Duplicate exposed capability name "delete_todo_by_id"'):
        agentfx.expose(
            Message,
            agentfx.action(DeleteAction),
            agentfx.variant(ClearedSelection, "Clear", name="delete_todo_by_id"),
        )


# --- resources and define --------------------------------------------------------------------


def test_duplicate_resource_names_are_refused() -> None:
    todos = agentfx.resource("todos", "The todos", schema=list[Todo], read=lambda m: m.todos)
    again = agentfx.resource("todos", "The todos again", schema=list[Todo], read=lambda m: m.todos)
    with raises('Duplicate agent resource name "todos"'):
        agentfx.define(messages=agentfx.expose(Message), resources=[todos, again])


@pytest.mark.parametrize("name", ["", "has space", "todos/open", "app://todos", "ü", "x" * 129])
def test_a_resource_name_a_client_cannot_address_is_refused(name: str) -> None:
    # Listed as app://<name>: the capability-name alphabet keeps that one URI segment.
    with raises(
        f'Cannot define the resource "{name}": it is not a valid resource name. Use 1-128 characters of [a-zA-Z0-9_-].'
    ):
        agentfx.resource(name, "The todos", schema=list[Todo], read=lambda m: m.todos)


def test_a_resource_name_must_be_a_string() -> None:
    with raises("A resource's name must be a string, got 3"):
        agentfx.resource(cast(Any, 3), "The todos", schema=list[Todo], read=lambda m: m.todos)


@pytest.mark.parametrize("name", ["todos", "open-todos", "Todos_2", "x" * 128])
def test_a_valid_resource_name_is_kept(name: str) -> None:
    assert agentfx.resource(name, "The todos", schema=list[Todo], read=lambda m: m.todos).name == name


@pytest.mark.parametrize("description", ["", "   ", 3, None])
def test_a_blank_or_non_string_resource_description_is_refused(description: Any) -> None:
    with raises('Cannot define the resource "todos": its description must be a non-empty string telling the agent what it holds'):
        agentfx.resource("todos", description, schema=list[Todo], read=lambda m: m.todos)


def test_the_resource_list_is_copied() -> None:
    todos = TodoAgent.resource("todos", "The todos", schema=list[Todo], read=lambda m: m.todos)
    selected = TodoAgent.resource("selected", "The selection", schema=str | None, read=lambda m: m.selected)
    given = [todos, selected]
    definition = TodoAgent.define(messages=TodoAgent.expose(Message), resources=given)
    given.append(TodoAgent.resource("late", "Added later", schema=int, read=lambda m: 0))
    given.reverse()
    assert definition.resources == (todos, selected)


def test_resources_may_be_any_iterable_and_keep_their_order() -> None:
    names = ["b", "a", "c"]
    resources = (agentfx.resource(n, n, schema=int, read=lambda m: 0) for n in names)
    definition = agentfx.define(messages=agentfx.expose(Message), resources=resources)
    assert [r.name for r in definition.resources] == names


def test_define_carries_the_union_capabilities_and_context() -> None:
    exposed = agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear"))
    context = agentfx.projection(Model, lambda m: m)
    definition = agentfx.define(messages=exposed, context=context)
    assert definition.union is Message
    assert definition.capabilities == exposed.capabilities
    assert definition.context is context
    assert definition.resources == ()


def test_an_empty_contract_is_allowed() -> None:
    definition = agentfx.define(messages=agentfx.expose(Message))
    assert (definition.capabilities, definition.resources, definition.context) == ((), (), None)


def test_resource_and_projection_keep_their_declaration() -> None:
    def read(m: Model) -> tuple[Todo, ...]:
        return m.todos

    resource = agentfx.resource("todos", "The todos", schema=list[Todo], read=read)
    assert (resource.name, resource.description, resource.schema, resource.read) == (
        "todos",
        "The todos",
        list[Todo],
        read,
    )
    model = Model(todos=(Todo(id="t1", title="Buy milk"),))
    assert resource.encode(model) == [{"id": "t1", "title": "Buy milk"}]
    context = agentfx.projection(list[Todo], read)
    assert context.encode(model) == [{"id": "t1", "title": "Buy milk"}]


# --- the typed builder -----------------------------------------------------------------------


def test_the_module_functions_are_plain_functions() -> None:
    # Not bound methods of a hidden builder: their repr and help name them.
    for function in (agentfx.variant, agentfx.action, agentfx.expose, agentfx.resource, agentfx.projection, agentfx.define):
        assert inspect.isfunction(function)
        assert function.__doc__


def test_for_model_returns_a_builder_with_or_without_a_principal() -> None:
    assert isinstance(agentfx.for_model(Model, principal=User), AgentBuilder)
    assert isinstance(agentfx.for_model(Model), AgentBuilder)


def test_the_builder_runs_the_same_checks_as_the_module_functions() -> None:
    with raises('Cannot expose "NotInUnion": it is not a variant of this Message union'):
        TodoAgent.expose(Message, TodoAgent.variant(NotInUnion, "Not a member"))
    with raises('Duplicate agent resource name "x"'):
        TodoAgent.define(
            messages=TodoAgent.expose(Message),
            resources=[
                TodoAgent.resource("x", "x", schema=int, read=lambda m: 0),
                TodoAgent.resource("x", "x", schema=int, read=lambda m: 1),
            ],
        )


def test_the_builder_binds_a_host() -> None:
    definition = TodoAgent.define(messages=TodoAgent.expose(Message, TodoAgent.variant(ClearedSelection, "Clear")))
    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=Model, dispatch=lambda message: None)
    runtime = TodoAgent.bind(definition, host=host)
    assert isinstance(runtime, agentfx.AgentRuntime)
    assert runtime.definition is definition


# --- definition-time checks found in review ---------------------------------------------------


def test_a_completion_naming_something_other_than_classes_is_refused() -> None:
    with raises("A completion's success must be a Message class or a tuple of them, got [<class 'tests.support.DeletedTodo'>]"):
        Completion(success=[DeletedTodo])  # pyright: ignore[reportArgumentType]
    with raises("A completion's failure must be a Message class or a tuple of them, got 'FailedDeleteTodo'"):
        Completion(success=DeletedTodo, failure="FailedDeleteTodo")  # pyright: ignore[reportArgumentType]


def test_a_completion_takes_its_timeout_as_the_fourth_positional_argument() -> None:
    assert Completion(DeletedTodo, FailedDeleteTodo, None, 10.0).timeout == 10.0


async def _yes(*_: object) -> bool:
    return True


# Typed as Any: pyright already rejects an async hook; this checks the runtime guard
# that protects untyped callers.
_async_yes: Any = _yes


def _identity(model: Any) -> Any:
    return model


def _anything(*_: Any) -> Any:
    return True


def test_asynchronous_predicates_are_refused_where_they_are_declared() -> None:
    # A coroutine object is truthy: an async `available` would let every call through.
    with raises('Cannot expose "RequestedCreateTodo": "available" must answer synchronously; it is a coroutine function'):
        agentfx.expose(Message, agentfx.variant(RequestedCreateTodo, "Create", available=_async_yes))
    with raises('"correlate" must answer synchronously; it is a coroutine function'):
        Completion(success=DeletedTodo, correlate=_async_yes)
    with raises('"correlate_key" must answer synchronously; it is a coroutine function'):
        Completion(success=DeletedTodo, correlate_key=(_async_yes, _identity))
    with raises('"correlate_key" must answer synchronously; it is a coroutine function'):
        Completion(success=DeletedTodo, correlate_key=(_anything, _async_yes))
    with raises('"predicate" must answer synchronously; it is a coroutine function'):
        agentfx.when(projection=_identity, predicate=_async_yes)
    with raises('"projection" must answer synchronously; it is a coroutine function'):
        agentfx.when(projection=_async_yes, predicate=_anything)


class Opaque:
    pass


def test_a_resource_or_context_schema_msgspec_cannot_describe_is_refused_at_definition() -> None:
    with pytest.raises(ContractError, match=r'^Cannot define the resource "r": its schema cannot be described \('):
        agentfx.resource("r", "R", schema=Opaque, read=lambda model: model)
    with pytest.raises(ContractError, match=r"^Cannot define the context projection: its schema cannot be described \("):
        agentfx.projection(Opaque, lambda model: model)


class Packed(msgspec.Struct, frozen=True, array_like=True):
    id: str


def test_a_struct_input_the_codec_cannot_take_is_refused_with_the_reason() -> None:
    def to_message(packed: Packed, ctx: object) -> RequestedDeleteTodo:
        return RequestedDeleteTodo(id=packed.id)

    with raises('Cannot expose "RequestedDeleteTodo": Packed is array_like; an input must encode as an object'):
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", input=Packed, to_message=to_message))


class _AsyncGate:
    """A callable object whose ``__call__`` is async: its class shows it, so definition refuses it."""

    async def __call__(self, *_: object) -> bool:
        return False


def test_a_callable_object_with_an_async_call_is_refused_where_it_is_declared() -> None:
    gate: Any = _AsyncGate()
    why = "must answer synchronously; its __call__ is a coroutine function"
    with raises(f'Cannot expose "ClearedSelection": "available" {why}'):
        agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear", available=gate))
    with raises(f'Cannot expose "RequestedDeleteTodo": "to_message" {why}'):
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=gate))
    with raises(f'"correlate" {why}'):
        Completion(success=DeletedTodo, correlate=gate)
    with raises(f'"correlate_key" {why}'):
        Completion(success=DeletedTodo, correlate_key=(gate, _identity))
    with raises(f'"predicate" {why}'):
        agentfx.when(projection=_identity, predicate=gate)
    with raises(f'Cannot define the resource "todos": "read" {why}'):
        agentfx.resource("todos", "The todos", schema=int, read=gate)
    with raises(f'Cannot define the context projection: "read" {why}'):
        agentfx.projection(int, gate)
    # authorize may be async: an async __call__ is an async authorize, and allowed.
    assert agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear", authorize=gate)).capabilities


def _later(model: Any) -> Any:
    """A plain function that returns a coroutine: nothing before the call can tell."""
    return _yes(model)


@pytest.mark.anyio
async def test_an_awaitable_answer_from_available_is_a_defect_not_a_pass() -> None:
    from agentfx.testing.recording import RecordingHost

    gate: Any = _later
    contract = agentfx.define(agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear", available=gate)))
    recorder: RecordingHost[object, Any, None] = RecordingHost(object())
    runtime = agentfx.bind(contract, host=recorder.host)
    with raises('"available" returned an awaitable; it must answer synchronously'):
        runtime.messages.available()
    with raises('"available" returned an awaitable; it must answer synchronously'):
        await runtime.messages.call(ClearedSelection, {})
    assert recorder.dispatched == []


def test_an_awaitable_answer_from_correlate_or_a_predicate_is_refused() -> None:
    from agentfx.completion import truth

    async def later() -> bool:
        return True

    with raises('"correlate" returned an awaitable; it must answer synchronously'):
        truth(later(), "correlate")
    assert truth("non-empty", "predicate") is True and truth(None, "predicate") is False


class Unresolvable(msgspec.Struct):
    when: "NoSuchType"  # type: ignore[name-defined]  # noqa: F821


def test_a_resource_schema_with_an_unresolvable_annotation_is_refused_at_definition() -> None:
    with pytest.raises(ContractError, match=r'^Cannot define the resource "r": its schema cannot be described \('):
        agentfx.resource("r", "R", schema=Unresolvable, read=lambda model: model)


# Titles and hints


def test_title_and_hints_reach_the_capability_from_every_declaration() -> None:
    hints = agentfx.Hints(destructive=True)
    add = Action("add_todo", "Add a todo", DeleteInput, lambda i, ctx: RequestedCreateTodo(title=i.id), message=RequestedCreateTodo)
    exposed = agentfx.expose(
        RequestedCreateTodo | RequestedDeleteTodo | ClearedSelection,
        TodoAgent.variant(RequestedDeleteTodo, "Delete", title="Delete todo", hints=hints),
        agentfx.variant(ClearedSelection, "Clear", title="Clear selection", hints=agentfx.Hints(idempotent=True)),
        agentfx.action(add, title="Add todo", hints=agentfx.Hints(read_only=False)),
    )
    assert [(c.title, c.hints) for c in exposed.capabilities] == [
        ("Delete todo", hints),
        ("Clear selection", agentfx.Hints(idempotent=True)),
        ("Add todo", agentfx.Hints(read_only=False)),
    ]
    built = TodoAgent.action(add, title="Add", hints=hints)
    assert (built.title, built.hints) == ("Add", hints)


def test_without_title_or_hints_there_are_none() -> None:
    [capability] = agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, "Clear")).capabilities
    assert (capability.title, capability.hints) == (None, None)


def test_hints_that_say_nothing_are_no_hints() -> None:
    [capability] = agentfx.expose(
        ClearedSelection, agentfx.variant(ClearedSelection, "Clear", hints=agentfx.Hints())
    ).capabilities
    assert capability.hints is None


@pytest.mark.parametrize("title", ["", "   ", 3])
def test_a_blank_or_non_string_title_is_refused(title: Any) -> None:
    with pytest.raises(ContractError, match=re.escape('Cannot expose "ClearedSelection": its title must be a non-empty string')):
        agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, "Clear", title=title))


@pytest.mark.parametrize("description", ["", "  \n", 3, None])
def test_a_blank_or_non_string_description_is_refused(description: Any) -> None:
    # The description is all an agent is told about the tool (DESIGN §9's ToolView).
    message = 'Cannot expose "ClearedSelection": its description must be a non-empty string telling the agent what the capability does'
    with raises(message):
        agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, description))
    with raises(message):
        agentfx.expose(ClearedSelection, TodoAgent.variant(ClearedSelection, description))
    with raises(message):
        action = Action("clear", description, DeleteInput, lambda i, ctx: ClearedSelection(), message=ClearedSelection)
        agentfx.expose(ClearedSelection, agentfx.action(action))


SURROGATE_REFUSED = "holds a surrogate code point (U+DCE9 at index 5), which no JSON or UTF-8 text can carry; was it read from bytes that are not UTF-8?"


def test_a_description_or_title_with_a_surrogate_is_refused() -> None:
    # Text read with errors="surrogateescape" looks like this; no manifest,
    # tool list or generated document could carry it, so it fails here, not in the CLI.
    text = "Clear\udce9 it"
    with raises(f'Cannot expose "ClearedSelection": its description {SURROGATE_REFUSED}'):
        agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, text))
    with raises(f'Cannot expose "ClearedSelection": its title {SURROGATE_REFUSED}'):
        agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, "Clear", title=text))
    with raises(f'Cannot define the resource "todos": its description {SURROGATE_REFUSED}'):
        agentfx.resource("todos", text, schema=list[Todo], read=lambda m: m.todos)
    # A character past the BMP, written as itself, is fine.
    agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, "Clear \U0001f9f9", title="\U0001f9f9"))


def test_hints_must_be_hints() -> None:
    with pytest.raises(ContractError, match=re.escape('Cannot expose "ClearedSelection": its hints must be an agentfx.Hints')):
        agentfx.expose(ClearedSelection, agentfx.variant(ClearedSelection, "Clear", hints=cast(Any, {"destructive": True})))


def test_a_hint_is_a_bool_or_unsaid() -> None:
    with pytest.raises(ContractError, match=re.escape('The hint "destructive" must be True, False or None, got str')):
        agentfx.Hints(destructive="yes")  # pyright: ignore[reportArgumentType]
    assert agentfx.Hints(read_only=True, open_world=False).said() == {"read_only": True, "open_world": False}


@pytest.mark.parametrize("name", ["variant", "action", "expose", "resource", "projection", "define"])
def test_the_module_functions_carry_the_full_documentation(name: str) -> None:
    function = getattr(agentfx, name)
    own = inspect.getdoc(function)  # what help() shows
    assert own is not None and own == inspect.getdoc(getattr(Declarations, name))
    # Every parameter is described, and there is a worked example.
    for parameter in inspect.signature(function).parameters:
        assert re.search(rf"^    {parameter}: \S", own, re.MULTILINE), parameter
    assert "\n>>> " in own and "Returns:\n" in own


# --- hooks that cannot be called as they will be: refused where they are declared ----------


def _loose(hook: Callable[..., object]) -> Any:
    """A hook of the wrong shape, as an untyped caller would write it (pyright rightly rejects them)."""
    return hook


def _variant(**hooks: Any) -> Callable[[], object]:
    def declare() -> object:
        return agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", **hooks))

    return declare


def _mapped(**hooks: Any) -> Callable[[], object]:
    def declare() -> object:
        return agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, **hooks))

    return declare


def _completed(completion: Any) -> Callable[[], object]:
    return _variant(completion=completion)


def _two_arguments(model: Any, principal: Any) -> bool:
    return True


def _principal_request(principal: Any, request: Any) -> bool:
    return True


def _i(i: Any) -> Any:
    return RequestedDeleteTodo(id="x")


def _request_result(request: Any, result: Any) -> bool:
    return True


def _request(request: Any) -> int:
    return 1


def _result(result: Any) -> int:
    return 1


def _request_call(request: Any, call: Any) -> int:
    return 1


def _result_call(result: Any, call: Any) -> int:
    return 1


def _value(value: Any) -> bool:
    return True


def _keyword_principal(model: Any, *, principal: Any) -> bool:
    return True


class _NoArguments:
    def __call__(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        pytest.param(
            _variant(available=_loose(lambda: True)),
            'Cannot expose "RequestedDeleteTodo": "available" must take one argument (the Model); it takes no arguments',
            id="available-none",
        ),
        pytest.param(
            _variant(available=_two_arguments),
            'Cannot expose "RequestedDeleteTodo": "available" must take one argument (the Model); it takes (model, principal)',
            id="available-two",
        ),
        pytest.param(
            _variant(available=True),
            'Cannot expose "RequestedDeleteTodo": "available" must be a function taking one argument (the Model); it is a bool',
            id="available-not-callable",
        ),
        pytest.param(
            _variant(available=_NoArguments()),
            'Cannot expose "RequestedDeleteTodo": "available" must take one argument (the Model); it takes no arguments',
            id="available-callable-object",
        ),
        pytest.param(
            _variant(available=_loose(_keyword_principal)),
            'Cannot expose "RequestedDeleteTodo": "available" must take one argument (the Model); it takes (model, *, principal)',
            id="available-required-keyword",
        ),
        pytest.param(
            _variant(authorize=_loose(lambda: True)),
            'Cannot expose "RequestedDeleteTodo": "authorize" must take one argument (an AuthorizationRequest); it takes no arguments',
            id="authorize-none",
        ),
        pytest.param(
            _variant(authorize=_loose(_principal_request)),
            'Cannot expose "RequestedDeleteTodo": "authorize" must take one argument (an AuthorizationRequest); it takes (principal, request)',
            id="authorize-two",
        ),
        pytest.param(
            _variant(authorize="admin"),
            'Cannot expose "RequestedDeleteTodo": "authorize" must be a function taking one argument (an AuthorizationRequest); it is a str',
            id="authorize-not-callable",
        ),
        pytest.param(
            _mapped(to_message=_loose(_i)),
            'Cannot expose "RequestedDeleteTodo": "to_message" must take two arguments (the input, an InvocationContext); it takes (i)',
            id="to_message-one",
        ),
        pytest.param(
            _mapped(to_message=RequestedDeleteTodo(id="x")),
            'Cannot expose "RequestedDeleteTodo": "to_message" must be a function taking two arguments (the input, an InvocationContext); it is a RequestedDeleteTodo',
            id="to_message-not-callable",
        ),
        pytest.param(
            _mapped(to_message=_async_yes),
            'Cannot expose "RequestedDeleteTodo": "to_message" must answer synchronously; it is a coroutine function',
            id="to_message-async",
        ),
        pytest.param(
            _completed(Completion(success=DeletedTodo, correlate=_loose(_request_result))),
            'Cannot expose "requested_delete_todo": "correlate" must take three arguments (request, result, call); it takes (request, result)',
            id="correlate-two",
        ),
        pytest.param(
            _completed(Completion(success=DeletedTodo, correlate=cast(Any, "id"))),
            'Cannot expose "requested_delete_todo": "correlate" must be a function taking three arguments (request, result, call); it is a str',
            id="correlate-not-callable",
        ),
        pytest.param(
            _completed(Completion(success=DeletedTodo, correlate_key=(_loose(_request), _loose(_result)))),
            'Cannot expose "requested_delete_todo": "correlate_key[0]" must take two arguments (request, call); it takes (request)',
            id="request_key-one",
        ),
        pytest.param(
            _completed(Completion(success=DeletedTodo, correlate_key=(_loose(_request_call), _loose(_result_call)))),
            'Cannot expose "requested_delete_todo": "correlate_key[1]" must take one argument (result); it takes (result, call)',
            id="result_key-two",
        ),
        pytest.param(
            _completed(agentfx.when(projection=_identity, predicate=_loose(_value))),
            'Cannot expose "requested_delete_todo": "predicate" must take two arguments (value, request); it takes (value)',
            id="predicate-one",
        ),
        pytest.param(
            _completed(agentfx.when(projection=_loose(lambda: 1), predicate=_anything)),
            'Cannot expose "requested_delete_todo": "projection" must take one argument (the Model); it takes no arguments',
            id="projection-none",
        ),
        pytest.param(
            _completed(agentfx.when(source=agentfx.Source(_loose(_identity), _anything), predicate=_anything)),
            'Cannot expose "requested_delete_todo": "Source.get" must take no arguments; it takes (model)',
            id="source-get-one",
        ),
        pytest.param(
            _completed(agentfx.when(source=agentfx.Source(_anything, _loose(lambda: None)), predicate=_anything)),
            'Cannot expose "requested_delete_todo": "Source.subscribe" must take one argument (listener); it takes no arguments',
            id="source-subscribe-none",
        ),
        pytest.param(
            _completed(agentfx.when(source=cast(Any, _anything), predicate=_anything)),
            "Cannot expose \"requested_delete_todo\": its completion's source must be an agentfx.Source",
            id="source-not-a-source",
        ),
        pytest.param(
            _completed(DeletedTodo),
            'Cannot expose "requested_delete_todo": its completion must be an agentfx.Completion(...) or '
            f"agentfx.when(...), got {DeletedTodo!r}",
            id="completion-a-class",
        ),
        pytest.param(
            lambda: agentfx.resource("todos", "Todos", schema=int, read=_loose(lambda: 0)),
            'Cannot define the resource "todos": "read" must take one argument (the Model); it takes no arguments',
            id="resource-read-none",
        ),
        pytest.param(
            lambda: agentfx.resource("todos", "Todos", schema=int, read=_async_yes),
            'Cannot define the resource "todos": "read" must answer synchronously; it is a coroutine function',
            id="resource-read-async",
        ),
        pytest.param(
            lambda: agentfx.projection(int, _loose(_two_arguments)),
            'Cannot define the context projection: "read" must take one argument (the Model); it takes (model, principal)',
            id="projection-read-two",
        ),
        pytest.param(
            lambda: agentfx.projection(int, _async_yes),
            'Cannot define the context projection: "read" must answer synchronously; it is a coroutine function',
            id="projection-read-async",
        ),
    ],
)
def test_a_hook_that_cannot_take_its_arguments_is_refused_where_it_is_declared(
    declare: Callable[[], object], message: str
) -> None:
    with raises(message):
        declare()


class _Gate:
    def __init__(self) -> None:
        self.calls = 0

    def allows(self, model: Any) -> bool:
        self.calls += 1
        return True

    def __call__(self, model: Any, extra: int = 0) -> bool:
        self.calls += 1
        return True


def _with_options(model: Any, principal: Any = None, *, strict: bool = False) -> bool:
    return True


def _three(a: Any, b: Any, c: Any) -> bool:
    return True


def _with_flags(model: Any, flags: Any) -> bool:
    return True


def _flagged(check: Callable[[Any, Any], bool]) -> Callable[[Any], bool]:
    # A decorator that supplies an argument: what is called takes one.
    @functools.wraps(check)
    def with_flags(model: Any) -> bool:
        return check(model, {"beta": True})

    return with_flags


def test_hooks_that_can_take_their_arguments_are_accepted_as_they_are_and_not_called() -> None:
    import operator

    gate = _Gate()
    hooks: list[Any] = [
        gate,  # a callable object
        gate.allows,  # a bound method
        functools.partial(_three, "bound", "too"),  # a partial leaving one argument
        _with_options,  # defaults and a keyword-only parameter with one
        _anything,  # *args
        operator.attrgetter("todos"),  # no signature to read: calling it will tell
        bool,
        _flagged(_with_flags),  # judged by the wrapper, not by what it wraps
    ]
    for hook in hooks:
        exposed = agentfx.expose(
            Message,
            agentfx.variant(RequestedCreateTodo, "Create", available=hook, authorize=hook),
            agentfx.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=functools.partial(make_delete)),
            agentfx.variant(
                ClearedSelection,
                "Clear",
                completion=Completion(success=DeletedTodo, correlate=functools.partial(_three)),
            ),
        )
        # Kept as given: nothing wraps the hook, so the check costs nothing at dispatch.
        create = exposed.capabilities[0]
        assert create.available is hook and create.authorize is hook
        assert agentfx.resource("todos", "Todos", schema=list[Todo], read=hook).read is hook
        assert agentfx.projection(list[Todo], hook).read is hook
    assert gate.calls == 0


def test_define_takes_what_expose_resource_and_projection_made() -> None:
    exposed = agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear"))
    todos = agentfx.resource("todos", "Todos", schema=list[Todo], read=lambda model: model.todos)
    context = agentfx.projection(int, lambda model: 0)
    with raises(
        f'define() takes the result of expose(...) as "messages", got {Message!r}; '
        "write define(expose(Message, variant(...), ...))"
    ):
        agentfx.define(cast(Any, Message))
    with pytest.raises(ContractError, match=r'^define\(\) takes the result of expose\(\.\.\.\) as "messages", got Variant\('):
        agentfx.define(cast(Any, agentfx.variant(ClearedSelection, "Clear")))
    with raises(f'define() takes "resources" as a list of resource(...), got {todos!r}'):
        agentfx.define(exposed, cast(Any, todos))
    with raises('define() takes "resources" as a list of resource(...), got \'todos\''):
        agentfx.define(exposed, cast(Any, "todos"))
    with raises(f'define() takes "resources" as a list of resource(...), and one is {context!r}'):
        agentfx.define(exposed, cast(Any, [todos, context]))
    with raises(f'define() takes "context" as the result of projection(...), got {todos!r}'):
        agentfx.define(exposed, [todos], cast(Any, todos))
    # Any iterable of resources is still taken, and copied.
    assert agentfx.define(exposed, iter([todos]), context).resources == (todos,)
    # The typed builder's define is the same check.
    with raises(
        f'define() takes the result of expose(...) as "messages", got {Message!r}; '
        "write define(expose(Message, variant(...), ...))"
    ):
        TodoAgent.define(cast(Any, Message))


def test_a_constraint_msgspec_cannot_take_is_a_contract_error_naming_the_message() -> None:
    # An integer bound past int64: msgspec refuses it with a ValueError of its own.
    class Huge(msgspec.Struct, tag=True):
        n: typing.Annotated[int, msgspec.Meta(ge=2**70)]

    with pytest.raises(ContractError, match='^Cannot expose "Huge": msgspec cannot take the type of Huge: Integer bounds'):
        agentfx.expose(Huge, agentfx.variant(Huge, "Take a huge number"))


def test_a_state_completion_built_without_when_refuses_an_async_source_where_it_is_exposed() -> None:
    # when() refuses it too; expose must not rely on the completion having been built by when().
    class Renamed(msgspec.Struct, tag=True):
        name: str

    async def get() -> str:
        return "new"

    read: Any = get
    source: agentfx.Source[str] = agentfx.Source(get=read, subscribe=lambda listener: lambda: None)
    completion: agentfx.StateCompletion[Any, str, Any] = agentfx.StateCompletion(
        predicate=lambda value, request: value == "new", timeout=1.0, source=source
    )
    with pytest.raises(ContractError, match='^Cannot expose "renamed": "Source.get" must answer synchronously'):
        agentfx.expose(Renamed, agentfx.variant(Renamed, "Rename", completion=completion))
