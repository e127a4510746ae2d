"""Laws of dispatch over random Models, principals, targets and payloads.

Each case is drawn with an oracle: whether its target is exposed, whether its
payload is valid for that capability, and what the capability's availability
and authorization say about the drawn Model and principal. The laws check the
runtime against that oracle, and the composed RCFR pipeline against the
runtime's direct run, also for a contract whose ``authorize`` asks a person to
confirm, under every way a confirmation can be answered.
"""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

import agentfx
from agentfx.pipeline import DispatchResult
from tests.support import (
    AVAILABLE,
    CONFIRMATION_MODES,
    AppAgent,
    ClearedSelection,
    ConfirmationScript,
    ConfirmingAgent,
    DeletedTodo,
    Model,
    ReceivedTodos,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    RequestedRenameTodo,
    Todo,
    User,
    fixed_clock,
    outcome_of,
    recorder,
)

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

FIELDS: dict[str, tuple[str, ...]] = {
    "requested_create_todo": ("title",),
    "delete_selected_todo": (),
    "rename_todo": ("id", "title"),
    "cleared_selection": (),
}
TAGS = {
    "requested_create_todo": "RequestedCreateTodo",
    "delete_selected_todo": "RequestedDeleteTodo",
    "rename_todo": "RequestedRenameTodo",
    "cleared_selection": "ClearedSelection",
}
TARGETS: dict[type[Any] | str, str | None] = {
    RequestedCreateTodo: "requested_create_todo",
    "requested_create_todo": "requested_create_todo",
    RequestedDeleteTodo: "delete_selected_todo",
    "delete_selected_todo": "delete_selected_todo",
    RequestedRenameTodo: "rename_todo",
    "rename_todo": "rename_todo",
    ClearedSelection: "cleared_selection",
    "cleared_selection": "cleared_selection",
    ReceivedTodos: None,
    DeletedTodo: None,
    "RequestedCreateTodo": None,
    "delete_todo": None,
}

ids = st.sampled_from(["t1", "t2", "keep"])
models = st.builds(
    Model,
    todos=st.lists(st.builds(Todo, id=ids, title=st.text(max_size=5)), max_size=3).map(tuple),
    selected=st.none() | ids,
    locked=st.booleans(),
)
principals = st.builds(User, id=st.text(max_size=4), can_delete=st.booleans(), admin=st.booleans())
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
not_a_string = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.lists(st.text(max_size=3), max_size=2)


@dataclass(frozen=True)
class Case:
    target: type[Any] | str
    capability: str | None
    payload: object
    valid: bool


@st.composite
def payloads(draw: st.DrawFn, capability: str | None) -> tuple[object, bool]:
    """A payload and whether the capability's strict decoder must accept it."""
    if capability is None:
        return draw(json_values), False
    fields = FIELDS[capability]
    valid: dict[str, object] = {name: draw(st.text(max_size=6)) for name in fields}
    kinds = ["valid", "extra", "tag", "root"]
    if fields:
        kinds += ["wrong_type", "missing"]
    kind = draw(st.sampled_from(kinds))
    if kind == "valid":
        return valid, True
    if kind == "extra":
        key = draw(st.text(max_size=6).filter(lambda k: k not in fields))
        return {**valid, key: draw(json_values)}, False
    if kind == "tag":
        return {**valid, "type": TAGS[capability]}, False
    if kind == "root":
        return draw(st.none() | st.lists(json_values, max_size=2) | st.text(max_size=4) | st.integers()), False
    name = draw(st.sampled_from(fields))
    if kind == "wrong_type":
        return {**valid, name: draw(not_a_string)}, False
    return {k: v for k, v in valid.items() if k != name}, False


@st.composite
def cases(draw: st.DrawFn) -> Case:
    target = draw(st.sampled_from(list(TARGETS)))
    capability = TARGETS[target]
    payload, valid = draw(payloads(capability))
    return Case(target, capability, payload, valid)


@st.composite
def asking_cases(draw: st.DrawFn) -> Case:
    """A valid call of a capability whose ``authorize`` may ask a person, by class or by name."""
    target = draw(st.sampled_from([RequestedDeleteTodo, "delete_selected_todo", RequestedRenameTodo, "rename_todo"]))
    capability = TARGETS[target]
    assert capability is not None
    return Case(target, capability, {name: draw(st.text(max_size=6)) for name in FIELDS[capability]}, True)


def authorized(capability: str, principal: User) -> bool:
    if capability == "delete_selected_todo":
        return principal.can_delete
    if capability == "rename_todo":
        return principal.admin
    return True


def expected_failure(case: Case, model: Model, principal: User, aborted: bool) -> type[Any] | None:
    """The failure class the pipeline table predicts, or ``None`` for a dispatch."""
    if case.capability is None:
        return agentfx.AgentUnknownCapabilityError
    if aborted:
        return agentfx.AgentCancelledError
    if not AVAILABLE[case.capability](model):
        return agentfx.AgentCapabilityUnavailableError
    if not case.valid:
        return agentfx.AgentInvalidInputError
    if not authorized(case.capability, principal):
        return agentfx.AgentAuthorizationError
    return None


def invocation(aborted: bool) -> agentfx.Invocation:
    signal = None
    if aborted:
        controller = agentfx.AbortController()
        controller.abort()
        signal = controller.signal
    return agentfx.Invocation(id="call-1", transport="mcp", signal=signal)


@pytest.mark.anyio
@PROPERTY
@given(case=cases(), model=models, principal=principals, aborted=st.booleans())
async def test_the_pipeline_table_holds_and_a_refusal_never_reaches_the_host(
    case: Case, model: Model, principal: User, aborted: bool
) -> None:
    rec = recorder(model, principal=principal)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    outcome = outcome_of(await runtime.messages.dispatch(case.target, case.payload, invocation(aborted)))
    expected = expected_failure(case, model, principal, aborted)
    if expected is None:
        assert isinstance(outcome, Success), outcome
        result = outcome.unwrap()
        assert rec.dispatched == [result.message]
        assert type(result.message).__name__ == TAGS[result.name]
    else:
        assert isinstance(outcome, Failure), outcome
        assert type(outcome.failure()) is expected
        assert rec.dispatched == []
        assert rec.listener_count == 0
    # The Model is read once, except by unknown and pre-aborted calls, which never read it.
    never_reads = expected in (agentfx.AgentUnknownCapabilityError, agentfx.AgentCancelledError)
    assert rec.model_reads == (0 if never_reads else 1)
    # The principal is resolved once for every call that decodes, authorize or not.
    decodes = expected in (None, agentfx.AgentAuthorizationError)
    assert rec.principal_calls == (1 if decodes else 0)


@PROPERTY
@given(model=models)
def test_available_is_exactly_the_capabilities_whose_predicate_holds(model: Model) -> None:
    rec = recorder(model)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    assert [d.name for d in runtime.messages.available()] == [name for name, holds in AVAILABLE.items() if holds(model)]
    assert rec.model_reads == 1


Observed = tuple[object, list[object], list[bytes], list[object], int]


async def observe(
    run: str,
    case: Case,
    model: Model,
    principal: User,
    aborted: bool,
    slow_host: bool,
    contract: agentfx.Definition[Model, User] = AppAgent,
    confirmation: str = "none",
) -> Observed:
    rec = recorder(model, principal=principal, async_dispatch=slow_host)
    log = agentfx.audit_log(clock=fixed_clock, principal=lambda user: user.id, include_input=True)
    runtime = agentfx.bind(contract, host=rec.host, audit=log)
    script = ConfirmationScript(confirmation)
    outcome: Result[DispatchResult, agentfx.DispatchError]
    if run == "composed":
        outcome = await runtime._dispatch_composed(case.target, case.payload, script.invocation(aborted=aborted))
    else:
        outcome = outcome_of(await runtime.messages.dispatch(case.target, case.payload, script.invocation(aborted=aborted)))
    asked: list[object] = [(r.capability, r.tag, r.prompt, r.invocation.id) for r in script.asked]
    return comparable(outcome), list(rec.dispatched), [msgspec.json.encode(e) for e in log.entries()], asked, rec.model_reads


def comparable(outcome: Result[DispatchResult, agentfx.DispatchError]) -> object:
    # The invocation's signal is a fresh object per run; everything else compares by value.
    if isinstance(outcome, Success):
        result = outcome.unwrap()
        return ("ok", result.name, result.tag, result.message, result.invocation.id, result.completion)
    return outcome


@pytest.mark.anyio
@settings(PROPERTY, max_examples=100)
@given(
    case=cases(),
    asking=asking_cases(),
    model=models,
    principal=principals,
    aborted=st.booleans(),
    aborted_asking=st.sampled_from([False, False, False, True]),
    slow_host=st.booleans(),
    confirmation=st.sampled_from(CONFIRMATION_MODES),
)
async def test_the_composed_pipeline_and_the_direct_run_agree(
    case: Case,
    asking: Case,
    model: Model,
    principal: User,
    aborted: bool,
    aborted_asking: bool,
    slow_host: bool,
    confirmation: str,
) -> None:
    # Asking a person is part of step 7, so both runs must ask alike, and at most once:
    # any call, on the contract without and the one with confirmation, and a call
    # that reaches a confirming ``authorize``, under every way of answering.
    for contract, call, abort, mode in [
        (AppAgent, case, aborted, "none"),
        (ConfirmingAgent, case, aborted, confirmation),
        (ConfirmingAgent, asking, aborted_asking, confirmation),
    ]:
        composed = await observe("composed", call, model, principal, abort, slow_host, contract, mode)
        direct = await observe("direct", call, model, principal, abort, slow_host, contract, mode)
        assert composed == direct
        assert len(direct[3]) <= 1
