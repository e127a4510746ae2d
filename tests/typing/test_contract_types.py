"""What pyright infers for a contract declared inline, and what it refuses.

This file is checked by pyright in strict mode along with the rest of ``tests``
and also runs under pytest, which executes the hooks so the runtime agrees with
the static types. Positive checks use :func:`typing.assert_type`, which fails
if a lambda parameter were ``Any`` as much as if it were the wrong class.
Negative checks are pinned with ``# pyright: ignore[<rule>]``; because
``reportUnnecessaryTypeIgnoreComment`` is an error, an expected error that
disappears fails the type check.

Known limits, by design of the Python type system rather than of agentfx:

- ``expose`` checks that each variant's Message belongs to the union at
  runtime only (the ``ContractError`` is raised where the contract is
  written); the union is a value that pyright cannot relate to each variant.
- A :class:`~agentfx.Completion` or :func:`~agentfx.when` built outside the
  ``variant`` call has nothing to infer its ``request`` type from: annotate
  the variable (``Completion[DeleteInput, DeletedTodo]``) or write it inline.

Every hook is inferred the same inside ``expose(...)`` and ``define(...)`` as
outside them: ``expose`` takes :class:`~agentfx.contract.Exposable` variants,
which fix only the Model and principal, so nothing in the call hands ``Any``
to a lambda.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, assert_type, cast

import msgspec
import pytest

import agentfx
from agentfx import (
    Action,
    AuthorizationRequest,
    CallInfo,
    Completion,
    ContractError,
    Invocation,
    InvocationContext,
    Refusal,
    Variant,
)


class Todo(msgspec.Struct, frozen=True):
    id: str
    title: str


class Model(msgspec.Struct, frozen=True):
    todos: tuple[Todo, ...] = ()
    selected_todo_id: str | None = None


class User(msgspec.Struct, frozen=True):
    name: str
    can_delete: bool = False


class RequestedCreateTodo(msgspec.Struct, frozen=True, tag=True):
    title: str


class RequestedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class DeletedTodo(msgspec.Struct, frozen=True, tag=True):
    id: str


class FailedDeleteTodo(msgspec.Struct, frozen=True, tag=True):
    id: str
    reason: str


class DeleteInput(msgspec.Struct, frozen=True):
    id: str


class NoInput(msgspec.Struct, frozen=True):
    pass


class AgentView(msgspec.Struct, frozen=True):
    todos: tuple[Todo, ...]


Message = RequestedCreateTodo | RequestedDeleteTodo | DeletedTodo | FailedDeleteTodo

AnyVariant = Variant[Any, Any, Any, Any]

TodoAgent = agentfx.for_model(Model, principal=User)
OtherAgent = agentfx.for_model(User, principal=User)

MODEL = Model(todos=(Todo(id="t1", title="Buy milk"),), selected_todo_id="t1")
ALICE = User(name="alice", can_delete=True)
INVOCATION = Invocation(id="call-1")
CONTEXT: InvocationContext[Model, User] = InvocationContext(MODEL, ALICE, INVOCATION)


def _is_model(model: Model) -> bool:
    """Accepts only a Model, so calling it from a lambda proves the parameter's type."""
    return type(model) is Model


def make_delete(i: DeleteInput, ctx: InvocationContext[Model, User]) -> RequestedDeleteTodo:
    return RequestedDeleteTodo(id=i.id)


# --- positive: every inline lambda is inferred ----------------------------------------------


def test_for_model_binds_model_and_principal() -> None:
    assert_type(TodoAgent, agentfx.AgentBuilder[Model, User])
    assert_type(agentfx.for_model(Model), agentfx.AgentBuilder[Model, Any])


def test_a_direct_variant_infers_model_and_the_message_as_input() -> None:
    create = TodoAgent.variant(
        RequestedCreateTodo,
        "Create a new todo",
        available=lambda model: _is_model(assert_type(model, Model)),
        authorize=lambda req: assert_type(req, AuthorizationRequest[User, RequestedCreateTodo, Model]).principal.can_delete
        and req.input.title != "",
    )
    assert_type(create, Variant[Model, User, RequestedCreateTodo, RequestedCreateTodo])

    [capability] = TodoAgent.expose(Message, create).capabilities
    assert capability.available is not None and capability.available(MODEL)
    assert capability.authorize is not None
    assert capability.authorize(AuthorizationRequest(ALICE, RequestedCreateTodo(title="x"), MODEL, "in-app")) is True


def test_a_mapped_variant_infers_input_context_and_request() -> None:
    delete = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete the currently selected todo",
        name="delete_selected_todo",
        available=lambda model: assert_type(model, Model).selected_todo_id is not None,
        input=NoInput,
        to_message=lambda input, ctx: RequestedDeleteTodo(
            id=assert_type(ctx, InvocationContext[Model, User]).model.selected_todo_id or str(assert_type(input, NoInput))
        ),
        authorize=lambda req: assert_type(req, AuthorizationRequest[User, NoInput, Model]).principal.can_delete
        or Refusal(f"{req.principal.name} may not delete todos"),
        completion=Completion(
            success=DeletedTodo,
            failure=FailedDeleteTodo,
            correlate=lambda request, result, call: (
                assert_type(request, NoInput) == NoInput()
                and assert_type(result, DeletedTodo | FailedDeleteTodo).id == call.message.id
                and assert_type(call, CallInfo[RequestedDeleteTodo]).invocation.id is not None
            ),
            timeout=10.0,
        ),
    )
    assert_type(delete, Variant[Model, User, RequestedDeleteTodo, NoInput])

    [capability] = TodoAgent.expose(Message, delete).capabilities
    assert capability.to_message is not None
    sent = capability.to_message(NoInput(), CONTEXT)
    assert sent == RequestedDeleteTodo(id="t1")
    assert capability.authorize is not None
    bob = User(name="bob")
    refused = capability.authorize(AuthorizationRequest(bob, NoInput(), MODEL, "mcp"))
    assert refused == Refusal("bob may not delete todos")
    assert isinstance(capability.completion, Completion)
    correlate = capability.completion.correlate
    assert correlate is not None
    assert correlate(NoInput(), DeletedTodo(id="t1"), CallInfo(INVOCATION, sent))
    assert not correlate(NoInput(), FailedDeleteTodo(id="t2", reason="gone"), CallInfo(INVOCATION, sent))


def test_to_message_receives_the_input_and_the_invocation_context() -> None:
    delete = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo",
        input=DeleteInput,
        to_message=lambda input, ctx: RequestedDeleteTodo(
            id=assert_type(input, DeleteInput).id + assert_type(ctx.principal, User).name[:0]
        ),
    )
    assert delete.to_message is not None
    assert delete.to_message(DeleteInput(id="t9"), CONTEXT) == RequestedDeleteTodo(id="t9")


def test_a_direct_completion_correlates_against_the_message() -> None:
    delete = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo",
        completion=Completion(
            success=DeletedTodo,
            correlate=lambda request, result, call: assert_type(request, RequestedDeleteTodo).id
            == assert_type(result, DeletedTodo).id,
        ),
    )
    assert isinstance(delete.completion, Completion)
    assert delete.completion.correlate is not None


def test_a_keyed_completion_infers_both_keys() -> None:
    delete = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo",
        input=DeleteInput,
        to_message=make_delete,
        completion=Completion(
            success=DeletedTodo,
            failure=FailedDeleteTodo,
            correlate_key=(
                lambda request, call: assert_type(request, DeleteInput).id,
                lambda result: assert_type(result, DeletedTodo | FailedDeleteTodo).id,
            ),
        ),
    )
    assert isinstance(delete.completion, Completion)
    assert delete.completion.correlate_key is not None
    request_key, result_key = delete.completion.correlate_key
    assert request_key(DeleteInput(id="t1"), CallInfo(INVOCATION, None)) == result_key(DeletedTodo(id="t1"))


def test_a_state_completion_infers_projection_value_and_request() -> None:
    delete = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo",
        input=DeleteInput,
        to_message=make_delete,
        completion=agentfx.when(
            projection=lambda model: assert_type(model, Model).todos,
            predicate=lambda todos, request: all(
                t.id != assert_type(request, DeleteInput).id for t in assert_type(todos, tuple[Todo, ...])
            ),
        ),
    )
    assert isinstance(delete.completion, agentfx.StateCompletion)
    assert delete.completion.predicate((), DeleteInput(id="t1"))


def test_a_source_completion_infers_the_source_value() -> None:
    counter = [0]
    delete = TodoAgent.variant(
        RequestedDeleteTodo,
        "Delete a todo",
        completion=agentfx.when(
            source=agentfx.Source(get=lambda: counter[0], subscribe=lambda listener: lambda: None),
            predicate=lambda count, request: assert_type(count, int) > len(assert_type(request, RequestedDeleteTodo).id),
        ),
    )
    assert isinstance(delete.completion, agentfx.StateCompletion)
    assert not delete.completion.predicate(0, RequestedDeleteTodo(id="t1"))


def test_authorize_may_answer_with_an_awaitable() -> None:
    async def may_delete(req: AuthorizationRequest[User, DeleteInput, Model]) -> bool | Refusal:
        return req.principal.can_delete

    delete = TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=make_delete, authorize=may_delete)
    assert delete.authorize is may_delete


def test_resources_and_projection_read_the_model() -> None:
    definition = TodoAgent.define(
        messages=TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create")),
        resources=[
            TodoAgent.resource("todos", "The todos", schema=list[Todo], read=lambda m: assert_type(m, Model).todos),
        ],
        context=TodoAgent.projection(AgentView, lambda m: AgentView(todos=assert_type(m, Model).todos)),
    )
    assert_type(definition, agentfx.Definition[Model, User])
    assert definition.resources[0].encode(MODEL) == [{"id": "t1", "title": "Buy milk"}]


def test_an_action_is_typed_by_the_message_it_makes() -> None:
    add = Action(
        "delete_todo",
        "Delete a todo",
        DeleteInput,
        lambda input, ctx: RequestedDeleteTodo(id=assert_type(input, DeleteInput).id),
        message=RequestedDeleteTodo,
    )
    assert_type(add, Action[DeleteInput, RequestedDeleteTodo])
    exposed = TodoAgent.action(
        add,
        available=lambda model: _is_model(assert_type(model, Model)),
        authorize=lambda req: assert_type(req, AuthorizationRequest[User, DeleteInput, Model]).principal.can_delete,
    )
    assert_type(exposed, Variant[Model, User, RequestedDeleteTodo, DeleteInput])


def test_a_class_typed_as_a_union_still_declares_a_direct_variant() -> None:
    for cls in (RequestedCreateTodo, RequestedDeleteTodo):
        declared = TodoAgent.variant(cls, cls.__name__)
        assert_type(declared, Variant[Model, User, RequestedCreateTodo | RequestedDeleteTodo, RequestedCreateTodo | RequestedDeleteTodo])


def test_the_module_functions_are_untyped_in_model_and_principal() -> None:
    create = agentfx.variant(RequestedCreateTodo, "Create", available=lambda model: assert_type(model, Any) is not None)
    assert_type(create, Variant[Any, Any, RequestedCreateTodo, RequestedCreateTodo])
    # An untyped variant fits any typed contract.
    TodoAgent.expose(Message, create)


# --- positive: inside expose(...) and define(...), every hook is inferred as outside -----------


class OrderInput(msgspec.Struct, frozen=True):
    order_id: str


class RequestedCancelOrder(msgspec.Struct, frozen=True, tag=True):
    order_ref: str


class CancelledOrder(msgspec.Struct, frozen=True, tag=True):
    order_ref: str


class RefusedCancelOrder(msgspec.Struct, frozen=True, tag=True):
    order_ref: str
    reason: str


OrderMessage = RequestedCancelOrder | CancelledOrder | RefusedCancelOrder | Message


def test_every_hook_is_inferred_inside_define_and_expose() -> None:
    definition = TodoAgent.define(
        messages=TodoAgent.expose(
            OrderMessage,
            TodoAgent.variant(
                RequestedCancelOrder,
                "Cancel an order",
                available=lambda model: _is_model(assert_type(model, Model)),
                input=OrderInput,
                to_message=lambda input, ctx: RequestedCancelOrder(
                    order_ref=assert_type(input, OrderInput).order_id + assert_type(ctx, InvocationContext[Model, User]).principal.name[:0]
                ),
                authorize=lambda req: assert_type(req, AuthorizationRequest[User, OrderInput, Model]).input.order_id != ""
                and req.principal.can_delete,
                completion=Completion(
                    success=CancelledOrder,
                    failure=RefusedCancelOrder,
                    correlate=lambda request, result, call: (
                        assert_type(request, OrderInput).order_id
                        == assert_type(result, CancelledOrder | RefusedCancelOrder).order_ref
                        == assert_type(call, CallInfo[RequestedCancelOrder]).message.order_ref
                    ),
                ),
            ),
            TodoAgent.variant(
                RequestedDeleteTodo,
                "Delete a todo",
                input=DeleteInput,
                to_message=lambda input, ctx: RequestedDeleteTodo(id=assert_type(input, DeleteInput).id),
                completion=Completion(
                    success=DeletedTodo,
                    correlate_key=(
                        lambda request, call: (assert_type(request, DeleteInput).id, assert_type(call.message, RequestedDeleteTodo).id),
                        lambda result: (assert_type(result, DeletedTodo).id, result.id),
                    ),
                ),
            ),
            TodoAgent.variant(
                RequestedCreateTodo,
                "Create a todo",
                authorize=lambda req: assert_type(req.input, RequestedCreateTodo).title != "",
                completion=agentfx.when(
                    projection=lambda model: assert_type(model, Model).todos,
                    predicate=lambda todos, request: any(
                        t.title == assert_type(request, RequestedCreateTodo).title for t in assert_type(todos, tuple[Todo, ...])
                    ),
                ),
            ),
        ),
    )
    assert_type(definition, agentfx.Definition[Model, User])

    # The runtime runs each hook on the values its types promise.
    cancel, delete, create = definition.capabilities
    assert cancel.to_message is not None and delete.to_message is not None
    sent = cancel.to_message(OrderInput(order_id="o1"), CONTEXT)
    assert sent == RequestedCancelOrder(order_ref="o1")
    assert cancel.authorize is not None
    assert cancel.authorize(AuthorizationRequest(ALICE, OrderInput(order_id="o1"), MODEL, "mcp")) is True
    assert isinstance(cancel.completion, Completion)
    correlate = cancel.completion.correlate
    assert correlate is not None
    assert correlate(OrderInput(order_id="o1"), CancelledOrder(order_ref="o1"), CallInfo(INVOCATION, sent))
    assert not correlate(OrderInput(order_id="o1"), RefusedCancelOrder(order_ref="o2", reason="late"), CallInfo(INVOCATION, sent))
    assert isinstance(delete.completion, Completion) and delete.completion.correlate_key is not None
    request_key, result_key = delete.completion.correlate_key
    removal = delete.to_message(DeleteInput(id="t1"), CONTEXT)
    assert request_key(DeleteInput(id="t1"), CallInfo(INVOCATION, removal)) == result_key(DeletedTodo(id="t1"))
    assert isinstance(create.completion, agentfx.StateCompletion)
    assert create.completion.predicate(MODEL.todos, RequestedCreateTodo(title="Buy milk"))


def test_an_action_is_inferred_inside_expose() -> None:
    [capability] = TodoAgent.expose(
        Message,
        TodoAgent.action(
            Action("delete_by_id", "Delete by id", DeleteInput, make_delete, message=RequestedDeleteTodo),
            available=lambda model: _is_model(assert_type(model, Model)),
            authorize=lambda req: assert_type(req, AuthorizationRequest[User, DeleteInput, Model]).input.id != "",
        ),
    ).capabilities
    assert capability.authorize is not None
    assert capability.authorize(AuthorizationRequest(ALICE, DeleteInput(id="t1"), MODEL, "mcp")) is True


def test_the_module_functions_infer_inside_define_and_expose() -> None:
    definition = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo,
                "Delete a todo",
                input=DeleteInput,
                to_message=lambda input, ctx: RequestedDeleteTodo(id=assert_type(input, DeleteInput).id),
                authorize=lambda req: assert_type(req.input, DeleteInput).id != "",
                completion=Completion(
                    success=DeletedTodo,
                    correlate=lambda request, result, call: assert_type(request, DeleteInput).id
                    == assert_type(result, DeletedTodo).id
                    == assert_type(call.message, RequestedDeleteTodo).id,
                ),
            ),
        )
    )
    [capability] = definition.capabilities
    assert capability.to_message is not None
    assert capability.to_message(DeleteInput(id="t1"), CONTEXT) == RequestedDeleteTodo(id="t1")


# --- negative: each line below is a type error, and the runtime agrees where it can ----------


def test_input_without_to_message_is_a_type_error_and_a_contract_error() -> None:
    # No overload matches, so the result is unknown; the cast lets the runtime check run on it.
    declared = cast(AnyVariant, TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput))  # pyright: ignore[reportCallIssue, reportArgumentType]
    with pytest.raises(ContractError, match='"input" was provided without "to_message"'):
        TodoAgent.expose(Message, declared)


def test_to_message_without_input_is_a_type_error_and_a_contract_error() -> None:
    declared = cast(AnyVariant, TodoAgent.variant(RequestedDeleteTodo, "Delete", to_message=make_delete))  # pyright: ignore[reportCallIssue, reportArgumentType]
    with pytest.raises(ContractError, match='"to_message" was provided without "input"'):
        TodoAgent.expose(Message, declared)


def test_to_message_making_another_message_is_a_type_error() -> None:
    TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=lambda i, ctx: RequestedCreateTodo(title=i.id))  # pyright: ignore[reportCallIssue, reportArgumentType]


def test_an_action_making_another_message_is_a_type_error() -> None:
    Action("delete", "Delete", DeleteInput, lambda i, ctx: RequestedCreateTodo(title=i.id), message=RequestedDeleteTodo)  # pyright: ignore[reportArgumentType]


def test_a_missing_model_attribute_is_a_type_error() -> None:
    TodoAgent.variant(RequestedCreateTodo, "Create", available=lambda model: model.selected is None)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def test_a_missing_principal_attribute_is_a_type_error() -> None:
    TodoAgent.variant(RequestedCreateTodo, "Create", authorize=lambda req: req.principal.is_admin is True)  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def test_a_missing_input_attribute_is_a_type_error() -> None:
    TodoAgent.variant(RequestedDeleteTodo, "Delete", input=NoInput, to_message=lambda i, ctx: RequestedDeleteTodo(id=i.id))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]


def test_correlate_sees_only_the_messages_the_completion_names() -> None:
    TodoAgent.variant(RequestedDeleteTodo, "Delete", completion=Completion(success=DeletedTodo, correlate=lambda q, r, c: r.reason == ""))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownLambdaType]


def test_authorize_must_answer_a_bool_or_a_refusal() -> None:
    TodoAgent.variant(RequestedCreateTodo, "Create", authorize=lambda req: "yes")  # pyright: ignore[reportCallIssue, reportArgumentType]


def test_a_variant_of_another_model_does_not_fit() -> None:
    foreign = OtherAgent.variant(RequestedCreateTodo, "Create")
    TodoAgent.expose(Message, foreign)  # pyright: ignore[reportArgumentType]


def test_awaitable_authorize_must_still_answer_a_bool_or_a_refusal() -> None:
    async def answers_text(req: AuthorizationRequest[User, RequestedCreateTodo, Model]) -> str:
        return req.principal.name

    pending: Awaitable[str] | None = None
    assert pending is None
    TodoAgent.variant(RequestedCreateTodo, "Create", authorize=answers_text)  # pyright: ignore[reportCallIssue, reportArgumentType]


def test_the_module_functions_have_the_same_overloads() -> None:
    agentfx.variant(RequestedDeleteTodo, "Delete", input=DeleteInput)  # pyright: ignore[reportCallIssue, reportArgumentType]
    agentfx.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=lambda i, ctx: RequestedCreateTodo(title=i.id))  # pyright: ignore[reportCallIssue, reportArgumentType]


# --- negative, inside expose(...): a typo in each hook is a type error ----------------------
#
# Each line would pass with ``Any`` parameters and crash at run time; the pinned ignore fails
# the type check the day the error disappears.


def test_inside_expose_a_typo_in_to_message_input_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create", input=DeleteInput, to_message=lambda new, ctx: RequestedCreateTodo(title=new.titel)))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_to_message_context_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedDeleteTodo, "Delete", input=NoInput, to_message=lambda _, ctx: RequestedDeleteTodo(id=ctx.model.selected_id or "")))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownMemberType]


def test_inside_expose_to_message_making_another_message_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=lambda i, ctx: RequestedCreateTodo(title=i.id)))  # pyright: ignore[reportArgumentType, reportCallIssue, reportUnknownArgumentType]


def test_inside_expose_a_correlate_request_read_as_the_message_is_a_type_error() -> None:
    TodoAgent.expose(OrderMessage, TodoAgent.variant(RequestedCancelOrder, "Cancel", input=OrderInput, to_message=lambda i, ctx: RequestedCancelOrder(order_ref=i.order_id), completion=Completion(success=CancelledOrder, correlate=lambda request, result, call: request.order_ref == result.order_ref)))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_correlate_result_outside_the_completion_is_a_type_error() -> None:
    TodoAgent.expose(OrderMessage, TodoAgent.variant(RequestedCancelOrder, "Cancel", completion=Completion(success=CancelledOrder, correlate=lambda request, result, call: result.reason == "")))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_call_message_is_a_type_error() -> None:
    TodoAgent.expose(OrderMessage, TodoAgent.variant(RequestedCancelOrder, "Cancel", input=OrderInput, to_message=lambda i, ctx: RequestedCancelOrder(order_ref=i.order_id), completion=Completion(success=CancelledOrder, correlate=lambda request, result, call: call.message.order_id == result.order_ref)))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_a_request_key_is_a_type_error() -> None:
    TodoAgent.expose(OrderMessage, TodoAgent.variant(RequestedCancelOrder, "Cancel", input=OrderInput, to_message=lambda i, ctx: RequestedCancelOrder(order_ref=i.order_id), completion=Completion(success=CancelledOrder, correlate_key=(lambda request, call: request.order_ref, lambda result: result.order_ref))))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_authorize_input_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=make_delete, authorize=lambda req: req.input.todo_id != ""))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_a_direct_authorize_input_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create", authorize=lambda req: req.input.name != ""))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_available_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create", available=lambda model: model.selected is None))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def test_inside_expose_a_typo_in_a_state_predicate_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create", completion=agentfx.when(projection=lambda model: model.todos, predicate=lambda todos, request: len(todos.todos) > 0)))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_an_action_authorize_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.action(Action("delete", "Delete", DeleteInput, make_delete, message=RequestedDeleteTodo), authorize=lambda req: req.input.todo_id != ""))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_define_a_typo_is_a_type_error() -> None:
    TodoAgent.define(messages=TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create", input=DeleteInput, to_message=lambda new, ctx: RequestedCreateTodo(title=new.titel))))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownMemberType]


def test_inside_the_module_expose_a_typo_is_a_type_error() -> None:
    agentfx.define(agentfx.expose(Message, agentfx.variant(RequestedCreateTodo, "Create", input=DeleteInput, to_message=lambda new, ctx: RequestedCreateTodo(title=new.titel))))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_an_authorize_principal_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=make_delete, authorize=lambda req: req.principal.is_admin))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_a_state_projection_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedCreateTodo, "Create", completion=agentfx.when(projection=lambda model: model.todo_list, predicate=lambda todos, request: todos is not None)))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownArgumentType, reportUnknownLambdaType, reportUnknownMemberType]


def test_inside_expose_a_typo_in_a_state_request_is_a_type_error() -> None:
    TodoAgent.expose(Message, TodoAgent.variant(RequestedDeleteTodo, "Delete", input=DeleteInput, to_message=make_delete, completion=agentfx.when(projection=lambda model: model.todos, predicate=lambda todos, request: request.todo_id not in todos)))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def test_inside_define_a_typo_in_a_resource_or_the_context_is_a_type_error() -> None:
    TodoAgent.define(
        messages=TodoAgent.expose(Message),
        resources=[TodoAgent.resource("todos", "The todos", schema=list[Todo], read=lambda m: m.todo_list)],  # pyright: ignore[reportAttributeAccessIssue, reportUnknownLambdaType, reportUnknownMemberType]
        context=TodoAgent.projection(AgentView, lambda m: AgentView(todos=m.todo_list)),  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
    )
