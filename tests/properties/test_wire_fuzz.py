"""Wire fuzzing: whatever arrives on the wire, dispatch settles as a success or a typed failure.

``dispatch_unknown`` is what adapters call with a tool name and arguments exactly
as a client sent them. Over both example contracts, with arbitrary names
(exposed, near misses, arbitrary text, not even strings) and arbitrary JSON-like
payloads (any nesting, any types, huge strings and integers, NaN, unicode),
every invocation settles within a deadline, never raises, sends a Message only
on success, and every failure survives a JSON round trip.
"""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.io import IOResult
from returns.result import Failure, Result, Success

import agentfx
from agentfx.testing import valid_payloads
from agentfx.testing.recording import RecordingHost
from examples.orders import app as orders
from examples.todo import app as todo

FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Scripted responses settle every completion at once; this bounds a runtime that would not.
SETTLE_WITHIN = 5.0


@dataclass(frozen=True)
class Case:
    """One example contract, with what its recording host needs to answer like the application."""

    definition: agentfx.Definition[Any, Any]
    models: st.SearchStrategy[Any]
    principals: st.SearchStrategy[Any]
    responses: dict[type[Any], Callable[[Any], list[Any]]]


def _created(message: todo.RequestedCreateTodo) -> list[Any]:
    return [todo.CreatedTodo(id="todo-9", title=message.title, request_id=message.request_id)]


def _deleted(message: todo.RequestedDeleteTodo) -> list[Any]:
    return [todo.DeletedTodo(id=message.id)]


def _placed(message: orders.RequestedPlaceOrder) -> list[Any]:
    order = orders.Order("order-9", message.customer_id, message.items, message.shipping, message.priority, message.note)
    return [orders.PlacedOrder(order=order, request_id=message.request_id)]


def _cancelled(message: orders.RequestedCancelOrder) -> list[Any]:
    return [orders.CancelledOrder(order_id=message.order_id)]


CASES = {
    "todo": Case(
        todo.AppAgent,
        st.sampled_from([todo.INITIAL, msgspec.structs.replace(todo.INITIAL, selected_todo_id="todo-1"), todo.Model()]),
        st.builds(todo.User, id=st.just("ann"), can_delete=st.booleans()),
        {todo.RequestedCreateTodo: _created, todo.RequestedDeleteTodo: _deleted},
    ),
    "orders": Case(
        orders.AppAgent,
        st.sampled_from([orders.INITIAL, orders.Model()]),
        st.builds(orders.Customer, id=st.sampled_from(["ada", "bob"]), role=st.sampled_from(["viewer", "customer", "clerk"])),
        {orders.RequestedPlaceOrder: _placed, orders.RequestedCancelOrder: _cancelled},
    ),
}

def _repeat(text: str, times: int) -> str:
    return text * times


def _swap(payload: dict[str, Any], key: str, value: object) -> dict[str, Any]:
    return {**payload, key: value}


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**64),
    st.floats(),
    st.text(),
    st.text(st.characters(codec="utf-8"), max_size=4),
    # Huge strings, cheaply: a short one repeated.
    st.builds(_repeat, st.text(min_size=1, max_size=3), st.integers(10_000, 300_000)),
)
JSON = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def _nested(depth: int, dicts: bool) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = {"items": value} if dicts else [value]
    return value


DEEP = st.builds(_nested, st.integers(1, 20_000), st.booleans())


def _names(definition: agentfx.Definition[Any, Any]) -> st.SearchStrategy[Any]:
    exposed = [c.name for c in definition.capabilities]
    near = [n for name in exposed for n in (name.upper(), name + " ", name + "\x00", f"{name}/../x")]
    tags = [c.tag for c in definition.capabilities]
    odd: list[object] = [None, 3, b"place_order", ["create_todo"], {"name": "create_todo"}, "", "x" * 10_000]
    return st.one_of(
        st.sampled_from(exposed),
        st.sampled_from(exposed),
        st.sampled_from(near + tags),
        st.text(),
        st.sampled_from(odd),
    )


def _payloads(definition: agentfx.Definition[Any, Any]) -> st.SearchStrategy[Any]:
    fields = sorted(
        {f.encode_name for c in definition.capabilities for f in msgspec.structs.fields(c.input_type)} | {"type", "_tag"}
    )
    shaped = st.dictionaries(st.sampled_from(fields) | st.text(max_size=6), JSON, max_size=6)
    valid = st.one_of(*(valid_payloads(c) for c in definition.capabilities))
    # A valid payload with one value swapped for anything at all.
    swapped = st.builds(_swap, valid, st.sampled_from(fields), JSON)
    return st.one_of(JSON, DEEP, shaped, valid, swapped)


FAILURES = (
    agentfx.AgentUnknownCapabilityError,
    agentfx.AgentCapabilityUnavailableError,
    agentfx.AgentInvalidInputError,
    agentfx.AgentAuthorizationError,
    agentfx.AgentConfirmationRequiredError,
)
"""The failures a wire call without a signal can end in; cancellation and timeouts need an abort or a hang,
and a call that cannot ask a person is refused as needing confirmation."""


def _outcome(io: IOResult[Any, Any]) -> Result[Any, Any]:
    return agentfx.as_result(io)


async def _fuzz_once(case: Case, name: object, payload: object, model: object, principal: object) -> None:
    recorder: RecordingHost[Any, Any, Any] = RecordingHost(model, principal=lambda _: principal, responses=case.responses)
    audit = agentfx.audit_log(include_input=True)
    runtime = agentfx.bind(case.definition, host=recorder.host, audit=audit)
    with anyio.fail_after(SETTLE_WITHIN):
        io = await runtime.messages.dispatch_unknown(cast(str, name), payload)
    match _outcome(io):
        case Success(result):
            capability = next(c for c in case.definition.capabilities if c.name == name)
            assert type(result.message) is capability.message
            assert recorder.dispatched == [result.message]
            completion = result.completion
            assert (completion is None) == (capability.completion is None)
            assert completion is None or completion.status == "completed"
        case Failure(error):
            assert isinstance(error, FAILURES), error
            assert recorder.dispatched == []
            back = msgspec.json.decode(msgspec.json.encode(error), type=agentfx.DispatchError)
            assert type(back) is type(error)
            assert back == error
        case other:  # pragma: no cover - an IOResult holds a Success or a Failure
            pytest.fail(f"not a Result: {other!r}")
    assert recorder.listener_count == 0
    [entry] = audit.entries()
    assert entry.decision == ("dispatched" if recorder.dispatched else "refused")


def _fuzz(case_name: str) -> Callable[..., Any]:
    case = CASES[case_name]

    @pytest.mark.anyio
    @FUZZ
    @given(
        name=_names(case.definition),
        payload=_payloads(case.definition),
        model=case.models,
        principal=case.principals,
    )
    async def test(anyio_backend: str, name: object, payload: object, model: object, principal: object) -> None:
        await _fuzz_once(case, name, payload, model, principal)

    return test


test_the_todo_contract_settles_whatever_arrives_on_the_wire = _fuzz("todo")
test_the_orders_contract_settles_whatever_arrives_on_the_wire = _fuzz("orders")


@pytest.mark.anyio
@pytest.mark.parametrize("case_name", sorted(CASES))
@pytest.mark.parametrize("dicts", [False, True], ids=["lists", "objects"])
async def test_a_payload_nested_past_the_recursion_limit_is_refused_as_invalid_input(
    anyio_backend: str, case_name: str, dicts: bool
) -> None:
    case = CASES[case_name]
    recorder: RecordingHost[Any, Any, Any] = RecordingHost(
        msgspec.structs.replace(todo.INITIAL, selected_todo_id="todo-1") if case_name == "todo" else orders.INITIAL,
        principal=todo.User(id="ann", can_delete=True) if case_name == "todo" else orders.Customer(id="ada", role="clerk"),
        responses=case.responses,
    )
    runtime = agentfx.bind(case.definition, host=recorder.host, audit=agentfx.audit_log(include_input=True))
    for capability in case.definition.capabilities:
        fields = msgspec.structs.fields(capability.input_type)
        if not fields:
            continue
        payload = {fields[0].encode_name: _nested(100_000, dicts)}
        with anyio.fail_after(SETTLE_WITHIN):
            result = _outcome(await runtime.messages.dispatch_unknown(capability.name, payload))
        match result:
            case Failure(agentfx.AgentInvalidInputError(capability=refused)):
                assert refused == capability.name
            case other:
                pytest.fail(f"{capability.name}: {other!r}")
    assert recorder.dispatched == []
