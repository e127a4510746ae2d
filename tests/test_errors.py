"""Failure values: exact messages, the wire form, and what never reaches an agent."""

from __future__ import annotations

import gc
import pickle
import re
import weakref
from typing import Any, Literal, cast

import msgspec
import pytest
from returns.result import Failure

import agentfx
from agentfx.errors import format_seconds, kind_of
from tests.support import AppAgent, Model, RequestedCreateTodo, RequestedRenameTodo, User, outcome_of, recorder

EVERY_FAILURE: list[agentfx.DispatchError] = [
    agentfx.AgentUnknownCapabilityError.of("ReceivedTodos"),
    agentfx.AgentCapabilityUnavailableError.of("delete_todo", "RequestedDeleteTodo"),
    agentfx.AgentInvalidInputError.of("create_todo", "RequestedCreateTodo", "$.title", ValueError("boom")),
    agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo"),
    agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo", "Only the owner may delete"),
    agentfx.AgentCancelledError.before_dispatch("delete_todo"),
    agentfx.AgentCancelledError.while_waiting("delete_todo"),
    agentfx.AgentCancelledError.while_sending("delete_todo"),
    agentfx.AgentCompletionTimeoutError.while_waiting("delete_todo", "call-1", 10.0),
    agentfx.AgentCompletionTimeoutError.while_sending("delete_todo", "call-1", 0.05),
]


# Messages, exactly as the design's table writes them


def test_unknown_capability_message() -> None:
    error = agentfx.AgentUnknownCapabilityError.of("ReceivedTodos")
    assert (error.capability, error.message) == ("ReceivedTodos", "No such capability: ReceivedTodos")


def test_unavailable_message() -> None:
    error = agentfx.AgentCapabilityUnavailableError.of("delete_todo", "RequestedDeleteTodo")
    assert (error.capability, error.tag) == ("delete_todo", "RequestedDeleteTodo")
    assert error.message == 'Capability "delete_todo" is not available right now'


def test_invalid_input_message_and_path() -> None:
    error = agentfx.AgentInvalidInputError.of("create_todo", "RequestedCreateTodo", "$.todos[0].title")
    assert (error.capability, error.tag, error.path) == ("create_todo", "RequestedCreateTodo", "$.todos[0].title")
    assert error.message == 'Invalid input for "create_todo"'


def test_authorization_message_without_and_with_a_reason() -> None:
    bare = agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo")
    assert bare.message == 'Not authorized to invoke "delete_todo"'
    reasoned = agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo", "Only the owner may delete")
    assert reasoned.message == "Only the owner may delete"


def test_cancelled_messages_and_flags() -> None:
    before = agentfx.AgentCancelledError.before_dispatch("delete_todo")
    assert (before.dispatched, before.message) == (
        False,
        'Invocation of "delete_todo" was cancelled before it was dispatched',
    )
    waiting = agentfx.AgentCancelledError.while_waiting("delete_todo")
    assert (waiting.dispatched, waiting.message) == (
        True,
        '"delete_todo" was dispatched, and waiting for it to complete was cancelled. The Message still reached update.',
    )
    sending = agentfx.AgentCancelledError.while_sending("delete_todo")
    assert (sending.dispatched, sending.message) == (
        False,
        'Invocation of "delete_todo" was cancelled while the host was still dispatching it. '
        "Whether the Message reached update is unknown.",
    )


def test_timeout_messages() -> None:
    waiting = agentfx.AgentCompletionTimeoutError.while_waiting("delete_todo", "call-1", 10.0)
    assert (waiting.capability, waiting.invocation) == ("delete_todo", "call-1")
    assert waiting.message == '"delete_todo" was dispatched but did not complete within 10s. The Message still reached update.'
    sending = agentfx.AgentCompletionTimeoutError.while_sending("delete_todo", "call-1", 0.05)
    assert sending.message == (
        'The host was still dispatching "delete_todo" after 0.05s. Whether the Message reached update is unknown.'
    )


def test_resource_message() -> None:
    error = agentfx.AgentResourceError.of("todos")
    assert (error.resource, error.message) == ("todos", 'Cannot read resource "todos": no such resource')


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (10.0, 0.05, 30, 1.5)] == ["10s", "0.05s", "30s", "1.5s"]


# The wire form


def test_encoded_authorization_refusal_is_exactly_the_designed_bytes() -> None:
    error = agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo")
    assert msgspec.json.encode(error) == (
        b'{"_tag":"AgentAuthorizationError","capability":"delete_todo","tag":"RequestedDeleteTodo",'
        b'"message":"Not authorized to invoke \\"delete_todo\\""}'
    )


@pytest.mark.parametrize("error", EVERY_FAILURE, ids=lambda e: f"{type(e).__name__}")
def test_every_failure_round_trips_through_the_union(error: agentfx.DispatchError) -> None:
    wire = msgspec.json.encode(error)
    assert msgspec.json.decode(wire)["_tag"] == type(error).__name__
    back = msgspec.json.decode(wire, type=agentfx.DispatchError)
    assert type(back) is type(error)
    assert back == error


def test_resource_error_round_trips_through_its_own_type() -> None:
    error = agentfx.AgentResourceError.of("todos")
    wire = msgspec.json.encode(error)
    assert wire == b'{"_tag":"AgentResourceError","resource":"todos","message":"Cannot read resource \\"todos\\": no such resource"}'
    assert msgspec.json.decode(wire, type=agentfx.AgentResourceError) == error


def test_failures_are_frozen() -> None:
    error: Any = agentfx.AgentUnknownCapabilityError.of("x")
    with pytest.raises(AttributeError):
        error.message = "changed"


# The decoder's exception: kept on .cause, never encoded


def test_invalid_input_keeps_its_cause_off_the_wire() -> None:
    cause = ValueError("Expected `str`, got `int` - at `$.title`")
    error = agentfx.AgentInvalidInputError.of("create_todo", "RequestedCreateTodo", "$.title", cause)
    assert error.cause is cause
    wire = msgspec.json.encode(error)
    assert b"Expected" not in wire and b"cause" not in wire
    back = msgspec.json.decode(wire, type=agentfx.DispatchError)
    assert isinstance(back, agentfx.AgentInvalidInputError)
    assert back == error
    assert back.cause is None


def test_invalid_input_without_a_cause() -> None:
    assert agentfx.AgentInvalidInputError.of("c", "T", "$").cause is None


# Agent-facing messages never speak decoder


DECODER_WORDS = re.compile(r"Expected|Struct|object|`|\b(int|str|bool|float|array|null|dict|list|got)\b")

# msgspec's own wording; agentfx's problems may name JSON kinds ("must be an object").
MSGSPEC_WORDS = re.compile(r"Expected|Struct|`|\bgot\b|Invalid|enum|msgspec")

BAD_PAYLOADS: list[tuple[object, object, str, str]] = [
    (RequestedCreateTodo, {"title": 3}, "$.title", '"title" must be a string'),
    (RequestedCreateTodo, {"title": "3", "extra": 1}, "$", '"extra" is not a field of this input'),
    (RequestedCreateTodo, {}, "$", '"title" is required'),
    (RequestedCreateTodo, {"title": None}, "$.title", '"title" must be a string'),
    (RequestedCreateTodo, {"title": ["a"]}, "$.title", '"title" must be a string'),
    (RequestedCreateTodo, {"title": "a", "type": "RequestedCreateTodo"}, "$", '"type" is not a field of this input'),
    (RequestedCreateTodo, [], "$", "the input must be an object"),
    (RequestedCreateTodo, "title", "$", "the input must be an object"),
    (RequestedCreateTodo, None, "$", "the input must be an object"),
    (RequestedRenameTodo, {"id": 1, "title": "x"}, "$.id", '"id" must be a string'),
    ("delete_selected_todo", {"x": 1}, "$", '"x" is not a field of this input'),
    ("delete_selected_todo", [], "$", "the input must be an object"),
    ("cleared_selection", "", "$", "the input must be an object"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("target", "payload", "path", "problem"), BAD_PAYLOADS)
async def test_invalid_input_messages_name_the_capability_only(
    target: Any, payload: object, path: str, problem: str
) -> None:
    runtime = agentfx.bind(AppAgent, host=recorder(principal=User("admin", admin=True)).host)
    outcome = outcome_of(await runtime.messages.dispatch(target, payload))
    assert isinstance(outcome, Failure)
    error = outcome.failure()
    assert isinstance(error, agentfx.AgentInvalidInputError)
    assert error.path == path
    assert error.message == f'Invalid input for "{error.capability}"'
    assert DECODER_WORDS.search(error.message) is None
    assert error.cause is not None
    assert error.problem == problem
    assert MSGSPEC_WORDS.search(error.problem) is None
    encoded = msgspec.to_builtins(error)
    del encoded["problem"]
    assert DECODER_WORDS.search(msgspec.json.encode(encoded).decode()) is None


@pytest.mark.parametrize("error", EVERY_FAILURE, ids=lambda e: f"{type(e).__name__}")
def test_no_failure_message_speaks_decoder(error: agentfx.DispatchError) -> None:
    assert DECODER_WORDS.search(error.message) is None


# Exceptions


def test_dispatch_failed_carries_the_failure() -> None:
    error = agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo", "No")
    raised = agentfx.DispatchFailed(error)
    assert raised.error is error
    assert str(raised) == "No"


def test_dispatch_failed_survives_pickling() -> None:
    error = agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo")
    back = pickle.loads(pickle.dumps(agentfx.DispatchFailed(error)))
    assert isinstance(back, agentfx.DispatchFailed)
    assert back.error == error
    assert str(back) == error.message


def test_contract_error_is_a_value_error() -> None:
    assert issubclass(agentfx.ContractError, ValueError)
    assert issubclass(agentfx.AgentProjectionError, Exception)
    assert not issubclass(agentfx.AgentProjectionError, agentfx.ContractError)


def test_refusal_carries_its_reason() -> None:
    assert agentfx.Refusal("Only the owner").reason == "Only the owner"


@pytest.mark.parametrize("reason", [403, b"no", ["no"]])
def test_a_refusal_whose_reason_is_not_a_string_is_a_contract_error(reason: object) -> None:
    # It would make a failure whose message no other process can decode.
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.Refusal(cast(Any, reason))
    assert str(raised.value) == (
        f"Refusal takes its reason as a string the agent is told, got {kind_of(reason)}; "
        "return False to refuse without one"
    )


@pytest.mark.parametrize("reason", ["", "  ", "\n\t", None])
def test_a_blank_refusal_reason_tells_the_agent_what_false_does(reason: str | None) -> None:
    # None too: a reason looked up and not found (Refusal(reasons.get(key))) refused before it had to be a string.
    refused = agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo", agentfx.Refusal(reason).reason)
    assert refused == agentfx.AgentAuthorizationError.of("delete_todo", "RequestedDeleteTodo")
    assert refused.message == 'Not authorized to invoke "delete_todo"'


def test_model_is_not_an_error() -> None:
    # A sanity check that the union only decodes its own members.
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(msgspec.json.encode(Model()), type=agentfx.DispatchError)


@pytest.mark.anyio
async def test_an_invalid_input_refusal_keeps_its_cause_only_as_long_as_it_lives() -> None:
    # A mistake whose decoder text is short is kept for its repeats (bounded);
    # one whose text quotes a long value sent is not, and goes with its refusal.
    class Empty(msgspec.Struct):
        pass

    class Count(msgspec.Struct, tag=True):
        n: int = 0
        unit: Literal["kg", "lb"] = "kg"

    builder = agentfx.for_model(Empty)
    runtime = builder.bind(
        builder.define(messages=builder.expose(Count, builder.variant(Count, "Count"))),
        host=agentfx.Host(model=Empty, dispatch=lambda message: None),
    )

    with pytest.raises(agentfx.DispatchFailed) as refused:
        await runtime.messages.call(Count, {"unit": "x" * 300})
    error = refused.value.error
    assert isinstance(error, agentfx.AgentInvalidInputError)
    assert isinstance(error.cause, msgspec.ValidationError)
    # The cause holds no frames: they would reach whoever holds the error.
    assert error.cause.__traceback__ is None
    cause = weakref.ref(error.cause)
    for _ in range(50):
        await runtime.messages.dispatch(Count, {"unit": "x" * 300})
    del error, refused
    gc.collect()
    assert cause() is None

    with pytest.raises(agentfx.DispatchFailed) as short:
        await runtime.messages.call(Count, {"n": "three"})
    kept = short.value.error
    assert isinstance(kept, agentfx.AgentInvalidInputError) and isinstance(kept.cause, msgspec.ValidationError)
    assert kept.cause.__traceback__ is None
    with pytest.raises(agentfx.DispatchFailed) as again:
        await runtime.messages.call(Count, {"n": "three"})
    assert again.value.error is kept
