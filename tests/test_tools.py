"""agentfx.tools: the one tool view and the one reply every adapter gives an agent."""

from __future__ import annotations

from typing import Annotated, Any, Protocol, cast

import jsonschema
import msgspec
import pytest
from returns.io import IOFailure, IOSuccess
from returns.result import Failure, Success

import agentfx
from agentfx.app import App
from agentfx.completion import CompletionOutcome
from agentfx.docs import output_schema
from agentfx.testing.recording import RecordingHost
from agentfx.tools import ToolReply, ToolView, defect_reply, reply, tool_views
from examples.orders import app as orders
from examples.todo import app as todo

from tests.support import AppAgent, RequestedCreateTodo, User, outcome_of, recorder

ADA = orders.Customer(id="ada", role="customer")
CLERK = orders.Customer(id="clerk", role="clerk")

ADDRESS = {"name": "Ada", "street": "1 Road", "city": "London", "postal_code": "SW1 4JH", "country": "GB"}
ORDER = {"items": [{"sku": "TEA-0001", "quantity": 2}], "shipping": ADDRESS}


class _Validator(Protocol):
    def validate(self, instance: object) -> None: ...

    def is_valid(self, instance: object) -> bool: ...


def _validator(schema: dict[str, Any]) -> _Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return cast(_Validator, jsonschema.Draft202012Validator(schema))


def _validate(schema: dict[str, Any], data: dict[str, Any]) -> None:
    _validator(schema).validate(data)


def _rejects(schema: dict[str, Any], data: dict[str, Any]) -> bool:
    return not _validator(schema).is_valid(data)


# --- tool views ----------------------------------------------------------------------------


def test_tool_views_list_what_is_available_in_declaration_order() -> None:
    runtime = agentfx.bind(todo.AppAgent, host=recorder_for_todo(todo.INITIAL).host)
    views = tool_views(runtime)
    assert [view.name for view in views] == ["create_todo", "select_todo"]
    assert [view.name for view in tool_views(runtime, available_only=False)] == [
        "create_todo",
        "delete_selected_todo",
        "select_todo",
        "cleared_selection",
    ]


def test_a_tool_view_carries_title_description_schemas_and_hints() -> None:
    runtime = agentfx.bind(todo.AppAgent, host=recorder_for_todo(todo.INITIAL).host)
    by_name = {view.name: view for view in tool_views(runtime, available_only=False)}
    [descriptor] = [d for d in runtime.messages.list() if d.name == "delete_selected_todo"]
    delete = by_name["delete_selected_todo"]
    assert delete == ToolView(
        name="delete_selected_todo",
        title="Delete selected todo",
        description="Delete the currently selected todo",
        input_schema=descriptor.input_schema,
        output_schema=descriptor.output_schema,
        hints=agentfx.Hints(read_only=False, destructive=True),
    )
    plain = agentfx.bind(AppAgent, host=recorder().host)
    [first, *_] = tool_views(plain)
    assert (first.title, first.hints) == (None, None)


def test_a_tool_view_owns_its_schemas() -> None:
    runtime = agentfx.bind(todo.AppAgent, host=recorder_for_todo(todo.INITIAL).host)
    [view, *_] = tool_views(runtime)
    view.input_schema["properties"].clear()
    view.output_schema.clear()
    [again, *_] = tool_views(runtime)
    assert again.input_schema["properties"] == {"title": {"type": "string"}}
    assert again.output_schema["type"] == "object"
    assert runtime.messages.list()[0].input_schema["properties"] == {"title": {"type": "string"}}


def test_tool_views_read_the_model_once_and_not_at_all_for_the_whole_contract() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    tool_views(runtime, available_only=False)
    assert rec.model_reads == 0
    tool_views(runtime)
    assert rec.model_reads == 1


# --- replies -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_dispatch_without_completion_replies_with_its_summary_only() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    answer = reply(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "Milk"}))
    assert answer == ToolReply(
        ok=True,
        text="Dispatched RequestedCreateTodo",
        data={"capability": "requested_create_todo", "tag": "RequestedCreateTodo"},
    )


@pytest.mark.anyio
async def test_a_completed_create_tells_the_text_reader_the_new_id() -> None:
    async with todo.app.run() as runtime:
        answer = reply(await runtime.messages.dispatch("create_todo", {"title": "Water plants"}))
    assert answer.ok
    summary, json_line = answer.text.split("\n")
    assert summary == "Completed: CreatedTodo"
    message = answer.data["completion"]["message"]
    assert message["type"] == "CreatedTodo"
    assert message["title"] == "Water plants"
    assert message["id"].startswith("todo-")
    # The same facts as data, compact, keys in declaration order.
    assert json_line.encode() == msgspec.json.encode(answer.data)
    assert list(answer.data) == ["capability", "tag", "completion"]
    assert list(message) == ["type", "id", "title", "request_id"]
    assert f'"id":"{message["id"]}"' in answer.text


@pytest.mark.anyio
async def test_a_declared_failure_is_not_ok_and_its_text_carries_the_reason() -> None:
    app = App(orders.AppAgent, init=orders.INITIAL, update=orders.update, principal=CLERK)
    async with app.run() as runtime:
        answer = reply(await runtime.messages.dispatch("cancel_order", {"order_id": "order-9", "reason": "dup"}))
    assert not answer.ok
    assert answer.text.startswith("Failed: FailedCancelOrder\n")
    assert 'There is no order with id \\"order-9\\"' in answer.text
    assert answer.data["completion"] == {
        "status": "failed",
        "message": {"type": "FailedCancelOrder", "order_id": "order-9", "reason": 'There is no order with id "order-9"'},
    }


@pytest.mark.anyio
async def test_the_dispatched_message_is_never_returned() -> None:
    # to_message builds the Message from the snapshot (the selected id, the
    # invocation id): neither may reach the agent except through the completion.
    app = App(orders.AppAgent, init=orders.INITIAL, update=orders.update, principal=ADA)
    async with app.run() as runtime:
        outcome = await runtime.messages.dispatch("place_order", ORDER)
        answer = reply(outcome)
    result = outcome_of(outcome).unwrap()
    assert result.message.customer_id == "ada"
    assert set(answer.data) == {"capability", "tag", "completion"}
    assert answer.data["completion"]["message"]["type"] == "PlacedOrder"
    # The dispatched Message is encoded nowhere, in the data or the text.
    assert '"type":"RequestedPlaceOrder"' not in answer.text
    assert result.message.request_id not in answer.text.replace(answer.data["completion"]["message"]["request_id"], "")


def test_a_state_completion_reply_has_no_message_and_no_json() -> None:
    result = agentfx.DispatchResult("wait", "Waited", object(), agentfx.Invocation(id="1"), CompletionOutcome("completed", None))
    answer = reply(result)
    assert answer == ToolReply(
        ok=True,
        text="Completed: Waited reached its declared state",
        data={"capability": "wait", "tag": "Waited", "completion": {"status": "completed"}},
    )


REFUSALS: list[agentfx.DispatchError] = [
    agentfx.AgentUnknownCapabilityError.of("nope"),
    agentfx.AgentCapabilityUnavailableError.of("delete", "Delete"),
    agentfx.AgentAuthorizationError.of("delete", "Delete", "Only the owner may delete"),
    agentfx.AgentCancelledError.before_dispatch("delete"),
    agentfx.AgentCompletionTimeoutError.while_waiting("delete", "call-1", 10.0),
]


@pytest.mark.parametrize("error", REFUSALS, ids=lambda e: type(e).__name__)
def test_a_refusal_replies_with_its_message_and_the_encoded_failure(error: agentfx.DispatchError) -> None:
    answer = reply(error)
    assert answer == ToolReply(ok=False, text=error.message, data=msgspec.to_builtins(error))
    assert msgspec.convert(answer.data, agentfx.DispatchError) == error
    assert "{" not in answer.text


def test_invalid_input_says_what_to_fix_after_the_message() -> None:
    error = agentfx.AgentInvalidInputError.of("place_order", "RequestedPlaceOrder", "$.items[0].quantity", problem='"items[0].quantity" must be at most 99')
    answer = reply(error)
    assert answer.text == 'Invalid input for "place_order": "items[0].quantity" must be at most 99'
    assert answer.data["message"] == 'Invalid input for "place_order"'
    assert answer.data["problem"] == '"items[0].quantity" must be at most 99'
    # An error from before ``problem`` existed decodes with none and reads as before.
    old = msgspec.json.decode(
        b'{"_tag":"AgentInvalidInputError","capability":"c","tag":"T","message":"Invalid input for \\"c\\"","path":"$"}',
        type=agentfx.DispatchError,
    )
    assert reply(old).text == 'Invalid input for "c"'


def test_a_resource_error_replies_like_a_refusal() -> None:
    error = agentfx.AgentResourceError.of("nope")
    assert reply(error) == ToolReply(ok=False, text=error.message, data=msgspec.to_builtins(error))


@pytest.mark.anyio
async def test_reply_takes_every_shape_of_an_outcome() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder(principal=User("u")).host)
    io = await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})
    result = outcome_of(io).unwrap()
    expected = reply(result)
    assert reply(io) == reply(Success(result)) == reply(IOSuccess(result)) == expected
    error = agentfx.AgentCapabilityUnavailableError.of("x", "X")
    assert reply(Failure(error)) == reply(IOFailure(error)) == reply(error)
    with pytest.raises(TypeError, match="reply\\(\\) takes a dispatch outcome, got int"):
        reply(3)  # pyright: ignore[reportArgumentType]


def test_defect_reply_names_only_the_capability() -> None:
    assert defect_reply("create_todo") == ToolReply(
        ok=False,
        text='Capability "create_todo" failed unexpectedly',
        data={"_tag": "AgentDefect", "capability": "create_todo", "message": 'Capability "create_todo" failed unexpectedly'},
    )


class Opaque:
    def __repr__(self) -> str:
        return "Opaque(secret)"


class Finished(msgspec.Struct, frozen=True, tag=True):
    value: object


def test_a_completion_message_that_cannot_be_encoded_is_a_defect(caplog: pytest.LogCaptureFixture) -> None:
    result = agentfx.DispatchResult("run", "Run", None, agentfx.Invocation(id="1"), CompletionOutcome("completed", Finished(Opaque())))
    assert reply(result) == defect_reply("run")
    assert "secret" not in defect_reply("run").text
    assert any("could not be encoded" in record.getMessage() for record in caplog.records)


class Made(msgspec.Struct, frozen=True, tag=True):
    id: str
    count: Annotated[int, msgspec.Meta(ge=0)] = 0


@pytest.mark.parametrize(
    "message",
    [Made(id=cast(Any, 7)), Made(id="todo-1", count=-1)],
    ids=["a field of another type", "a field past its constraint"],
)
def test_a_completion_message_that_breaks_its_own_type_is_a_defect(
    message: Made, caplog: pytest.LogCaptureFixture
) -> None:
    # msgspec checks nothing when a Struct is built: the application can settle a
    # call with a Message the output schema refuses, which a client would raise on.
    result = agentfx.DispatchResult("make", "Make", None, agentfx.Invocation(id="1"), CompletionOutcome("completed", message))
    assert reply(result) == defect_reply("make")
    assert any("could not be encoded" in record.getMessage() for record in caplog.records)


class Measured(msgspec.Struct, frozen=True, tag=True):
    value: float


def test_a_completion_message_with_a_float_json_cannot_hold_still_replies() -> None:
    result = agentfx.DispatchResult(
        "measure", "Measure", None, agentfx.Invocation(id="1"), CompletionOutcome("completed", Measured(float("nan")))
    )
    answer = reply(result)
    assert answer.ok and answer.data["completion"]["message"] == {"type": "Measured", "value": None}


class Labelled(msgspec.Struct, frozen=True, tag=True):
    labels: frozenset[str]
    mixed: frozenset[int | str] = frozenset()
    counts: dict[str, int] = {}


def test_a_completion_message_s_sets_are_answered_in_one_order_in_every_process() -> None:
    labels = frozenset(["work", "misc", "later", "home", "urgent", "today", "soon", "never"])
    message = Labelled(labels, counts={"b": 1, "a": 2})
    result = agentfx.DispatchResult("label", "Label", None, agentfx.Invocation(id="1"), CompletionOutcome("completed", message))
    answer = reply(result)
    # Sorted, not in hash order, which differs between processes.
    assert answer.data["completion"]["message"]["labels"] == sorted(labels)
    assert answer.text.endswith('"labels":' + msgspec.json.encode(sorted(labels)).decode() + ',"mixed":[],"counts":{"a":2,"b":1}}}}')
    # Items that do not compare are put in the order of their encodings.
    mixed = reply(
        msgspec.structs.replace(result, completion=CompletionOutcome("completed", Labelled(labels, frozenset([2, "a", 1]))))
    )
    assert mixed.data["completion"]["message"]["mixed"] == ["a", 1, 2]
    assert mixed.data["completion"]["message"]["labels"] == sorted(labels)


# --- output schemas, validated on every success ----------------------------------------------------


def test_the_output_schema_of_a_capability_without_completion() -> None:
    [capability, *_] = AppAgent.capabilities
    assert output_schema(capability) == {
        "type": "object",
        "properties": {
            "capability": {"type": "string", "const": "requested_create_todo"},
            "tag": {"type": "string", "const": "RequestedCreateTodo"},
        },
        "required": ["capability", "tag"],
        "additionalProperties": False,
    }


def test_the_output_schema_of_a_message_completion_names_every_settling_message() -> None:
    [place, *_] = orders.AppAgent.capabilities
    schema = output_schema(place)
    completion = schema["properties"]["completion"]
    assert completion["properties"]["status"] == {"type": "string", "enum": ["completed", "failed"]}
    assert completion["properties"]["message"] == {
        "anyOf": [{"$ref": "#/$defs/PlacedOrder"}, {"$ref": "#/$defs/RejectedOrder"}]
    }
    assert completion["required"] == ["status", "message"]
    assert schema["required"] == ["capability", "tag", "completion"]
    assert {"PlacedOrder", "RejectedOrder", "Order", "LineItem", "Address"} <= set(schema["$defs"])
    jsonschema.Draft202012Validator.check_schema(schema)
    # Only what can happen: a contract without failure Messages never fails.
    [create, *_] = todo.AppAgent.capabilities
    assert output_schema(create)["properties"]["completion"]["properties"]["status"] == {"type": "string", "const": "completed"}


@pytest.mark.anyio
async def test_every_success_of_the_orders_desk_matches_its_output_schema() -> None:
    app = App(orders.AppAgent, init=orders.INITIAL, update=orders.update, principal=CLERK)
    too_many = {**ORDER, "items": [{"sku": "TEA-0001", "quantity": 99}] * 6}
    calls = [
        ("place_order", ORDER, "completed"),
        ("place_order", too_many, "failed"),
        ("cancel_order", {"order_id": "order-1", "reason": "changed mind"}, "completed"),
        ("cancel_order", {"order_id": "order-1", "reason": "again"}, "failed"),
        ("change_priority", {"order_id": "order-3", "priority": "express"}, None),
    ]
    async with app.run() as runtime:
        schemas = {view.name: view.output_schema for view in tool_views(runtime, available_only=False)}
        for name, payload, status in calls:
            answer = reply(await runtime.messages.dispatch(name, payload))
            _validate(schemas[name], answer.data)
            assert answer.data.get("completion", {}).get("status") == status
            # The schema is tight enough to tell one capability's data from another's.
            other = "cancel_order" if name != "cancel_order" else "place_order"
            assert _rejects(schemas[other], answer.data)


@pytest.mark.anyio
async def test_every_success_of_the_todo_example_matches_its_output_schema() -> None:
    async with todo.app.run() as runtime:
        schemas = {view.name: view.output_schema for view in tool_views(runtime, available_only=False)}
        for name, payload in [
            ("create_todo", {"title": "a"}),
            ("select_todo", {"id": "todo-1"}),
            ("delete_selected_todo", {}),
            ("select_todo", {"id": "todo-2"}),
            ("cleared_selection", {}),
        ]:
            # Deleting asks a person first; here one approved out of band.
            approved = agentfx.Invocation(confirmed=True)
            answer = reply(await runtime.messages.dispatch(name, payload, approved))
            assert answer.ok, answer.text
            _validate(schemas[name], answer.data)


def test_a_completion_message_msgspec_cannot_describe_is_promised_as_an_object() -> None:
    class Strange(msgspec.Struct, frozen=True, tag=True):
        value: Opaque

    class Go(msgspec.Struct, frozen=True, tag=True):
        pass

    defn = agentfx.define(
        agentfx.expose(Go | Strange, agentfx.variant(Go, "Go", completion=agentfx.Completion(success=Strange)))
    )
    [capability] = defn.capabilities
    assert output_schema(capability)["properties"]["completion"]["properties"]["message"] == {"anyOf": [{"type": "object"}]}


def recorder_for_todo(model: todo.Model) -> RecordingHost[todo.Model, Any, todo.User]:
    return RecordingHost[todo.Model, Any, todo.User](model, principal=todo.User(id="u", can_delete=True))

