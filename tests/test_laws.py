"""The law suite: it passes for sound contracts and names the law a broken one breaks."""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

import copy
import dataclasses
import re
import threading
import time
from pathlib import Path
from typing import Annotated, Any, cast

import anyio
import msgspec
import pytest
from hypothesis import strategies as st
from returns.io import IOResult
from returns.result import Failure, Result, Success

import agentfx
from agentfx.contract import Capability, define, expose, variant
from agentfx.confirm import Confirm
from agentfx.errors import (
    AgentAuthorizationError,
    AgentCancelledError,
    AgentCapabilityUnavailableError,
    AgentConfirmationRequiredError,
    AgentInvalidInputError,
    Refusal,
)
from agentfx.invocation import Invocation
from agentfx.pipeline import DispatchResult
from agentfx.program import run_program
from agentfx.schema import InvalidPayload as UndecodablePayload
from agentfx.testing import laws, valid_payloads
from agentfx.testing.laws import (
    AVAILABLE_FIRST,
    AVAILABLE_IS_PURE,
    AVAILABLE_LISTING,
    CONFIRM_UNLESS_CONFIRMED,
    FAILURE_ROUND_TRIP,
    HOST_REACHED,
    INVALID_PAYLOAD_REFUSED,
    LAWS,
    MODEL_READ_ONCE,
    PIPELINE_ORDER,
    REACHES_HOST,
    REFUSAL_NEVER_REACHES_HOST,
    SETTLES,
    UNKNOWN_KEY_REFUSED,
    VALID_PAYLOAD_DECODES,
    Law,
    LawViolation,
    check_contract,
)
from examples.orders import app as orders
from examples.todo import app as todo
from tests import support

ROOT = Path(__file__).resolve().parent.parent
FEW = 25


def _violation(law: Law, capability: str | None) -> Any:
    """``pytest.raises`` for a violation of ``law``, its message naming ``capability``."""
    who = "The contract" if capability is None else f'Capability "{capability}"'
    return pytest.raises(LawViolation, match=re.escape(f'{who} breaks the law "{law.key}"'))


# --- the suite passes for sound contracts ----------------------------------------


# With nothing selected, "delete_selected_todo" is unavailable: a run over INITIAL alone checks nothing.
TODO_SELECTED = msgspec.structs.replace(todo.INITIAL, selected_todo_id="todo-1")
TODO_MODELS = st.one_of(
    st.sampled_from([todo.INITIAL, TODO_SELECTED, todo.Model()]),
    valid_payloads(todo.Model).map(lambda payload: msgspec.convert(payload, todo.Model)),
)
TODO_USERS = [todo.User(id="ann", can_delete=True), todo.User(id="bob")]


def test_the_todo_example_keeps_every_law() -> None:
    check_contract(todo.AppAgent, models=TODO_MODELS, principals=TODO_USERS, max_examples=FEW)


ORDER_MODELS = st.one_of(
    st.sampled_from([orders.INITIAL, orders.Model()]),
    valid_payloads(orders.Model).map(lambda payload: msgspec.convert(payload, orders.Model)),
)
CUSTOMERS = st.builds(
    orders.Customer,
    id=st.sampled_from(["ada", "bob"]),
    role=st.sampled_from(["viewer", "customer", "clerk"]),
)


def test_the_orders_example_with_nested_constrained_inputs_keeps_every_law() -> None:
    check_contract(orders.AppAgent, models=ORDER_MODELS, principals=CUSTOMERS, max_examples=FEW)


def test_a_contract_with_an_async_authorize_keeps_every_law() -> None:
    models = st.builds(
        support.Model,
        todos=st.just((support.Todo("t1", "Milk"),)),
        selected=st.sampled_from([None, "t1"]),
        locked=st.booleans(),
    )
    users = [support.User("u1"), support.User("root", admin=True), support.User("guest", can_delete=False)]
    check_contract(support.AppAgent, models=models, principals=users, max_examples=FEW)


class Ping(msgspec.Struct, frozen=True, tag=True):
    times: int


@pytest.mark.anyio
async def test_the_suite_runs_from_inside_an_async_test(anyio_backend: str) -> None:
    check_contract(todo.AppAgent, models=[todo.INITIAL, TODO_SELECTED], principals=TODO_USERS, max_examples=5)
    contract = define(expose(Ping, variant(Ping, "Ping", available=lambda model: 1 // model > 0)))
    with _violation(SETTLES, "ping"):
        check_contract(contract, models=[0], principals=[None], max_examples=5)


def test_models_and_principals_may_be_strategies_or_sequences() -> None:
    seen_models: list[object] = []
    seen_principals: list[object] = []

    def available(model: object) -> bool:
        seen_models.append(model)
        return True

    def authorize(req: agentfx.AuthorizationRequest[Any, Any, Any]) -> bool:
        seen_principals.append(req.principal)
        return True

    contract = define(expose(Ping, variant(Ping, "Ping", available=available, authorize=authorize)))
    check_contract(contract, models=("m1", "m2"), principals=st.just("p"), max_examples=20)
    check_contract(contract, models=st.just("m3"), principals=["q"], max_examples=5)
    assert set(seen_models) == {"m1", "m2", "m3"}
    assert set(seen_principals) == {"p", "q"}


def test_max_examples_bounds_the_examples_per_capability() -> None:
    models: list[int] = []
    contract = define(expose(Ping, variant(Ping, "Ping")))
    check_contract(contract, models=st.integers().map(lambda m: models.append(m) or m), principals=[None], max_examples=7)
    assert 1 <= len(models) <= 7


@pytest.mark.parametrize("empty", ["models", "principals"])
def test_an_empty_sequence_is_refused_up_front(empty: str) -> None:
    contract = define(expose(Ping, variant(Ping, "Ping")))
    with pytest.raises(ValueError, match=f"at least one of {empty}"):
        check_contract(
            contract,
            models=[] if empty == "models" else [None],
            principals=[] if empty == "principals" else [None],
        )


@pytest.mark.parametrize(
    ("given", "named"),
    [("x", "got 'x'"), (None, "got None"), (expose(Ping, variant(Ping, "Ping")), "got the result of expose(...)")],
)
def test_what_is_not_a_definition_is_refused_naming_check_contract(given: object, named: str) -> None:
    with pytest.raises(agentfx.ContractError) as raised:
        check_contract(cast(Any, given), models=[None], principals=[None], max_examples=3)
    message = str(raised.value)
    assert message.startswith('check_contract() takes the result of define(...) as "definition"')
    assert named in message


@pytest.mark.parametrize("where", ["models", "principals"])
@pytest.mark.parametrize("given", [5, "ab", b"ab", {"a"}, None])
def test_models_or_principals_neither_strategy_nor_sequence_is_a_type_error_naming_them(where: str, given: object) -> None:
    contract = define(expose(Ping, variant(Ping, "Ping")))
    models: Any = given if where == "models" else [None]
    principals: Any = given if where == "principals" else [None]
    with pytest.raises(TypeError, match=f"^check_contract\\(\\) takes {where} as a hypothesis strategy or a sequence"):
        check_contract(contract, models=models, principals=principals, max_examples=3)


class Title(msgspec.Struct, frozen=True):
    title: str


class Opened(msgspec.Struct, frozen=True):
    open: bool = True


class Admin(msgspec.Struct, frozen=True):
    admin: bool


def _broken(title: Title, ctx: agentfx.InvocationContext[Any, Any]) -> Ping:
    raise RuntimeError("to_message is broken for every input")


def test_a_capability_no_drawn_principal_is_authorized_for_is_reported_not_passed() -> None:
    # Every law on the dispatched path holds vacuously when nothing gets there:
    # this broken to_message would pass.
    def authorize(req: agentfx.AuthorizationRequest[Admin | None, Any, Any]) -> bool:
        return req.principal is not None and req.principal.admin

    contract = define(expose(Ping, variant(Ping, "Ping", input=Title, to_message=_broken, authorize=authorize)))
    with _violation(HOST_REACHED, "ping") as caught:
        check_contract(contract, models=[Opened()], principals=[Admin(admin=False), None], max_examples=FEW)
    text = str(caught.value)
    assert "`authorize` let no valid payload through for any drawn principal (it answered False)" in text
    assert 'the laws "reaches-host", "message-round-trip" were never checked' in text
    assert "give check_contract `principals` that include one `authorize` accepts" in text
    violation: LawViolation = caught.value
    assert isinstance(violation, AssertionError) and violation.law is HOST_REACHED
    # Given a principal it accepts, the broken to_message is found.
    with _violation(REACHES_HOST, "ping"):
        check_contract(contract, models=[Opened()], principals=[Admin(admin=True), None], max_examples=FEW)


def test_a_capability_available_in_no_drawn_model_is_reported_not_passed() -> None:
    contract = define(
        expose(Ping, variant(Ping, "Ping", input=Title, to_message=_broken, available=lambda model: model.open))
    )
    with _violation(HOST_REACHED, "ping") as caught:
        check_contract(contract, models=[Opened(open=False)], principals=[None], max_examples=FEW)
    text = str(caught.value)
    assert "`available` held for none of the drawn Models" in text
    assert '"valid-payload-decodes", "unknown-key-refused", "invalid-payload-refused"' in text
    assert "give check_contract `models` that include one where the capability is available" in text
    with _violation(REACHES_HOST, "ping"):
        check_contract(contract, models=[Opened(open=False), Opened()], principals=[None], max_examples=FEW)


def test_a_model_that_rarely_lets_a_capability_reach_the_host_is_sought_not_failed() -> None:
    # One example is drawn (the first, model 0, unavailable); the capability is
    # available in one Model in twenty, which a run may well not draw: the suite
    # looks for it before saying it is never there.
    seen: list[int] = []

    def available(model: int) -> bool:
        seen.append(model)
        return model == 13

    contract = define(expose(Ping, variant(Ping, "Ping", available=available)))
    check_contract(contract, models=list(range(20)), principals=[None], max_examples=1)
    assert 13 in seen


def test_every_law_has_a_distinct_key() -> None:
    assert len({law.key for law in LAWS}) == len(LAWS) == 15


# --- broken contracts are caught ---------------------------------------------------


class Flip(msgspec.Struct, frozen=True, tag=True):
    pass


class Guarded(msgspec.Struct, frozen=True, tag=True):
    pass


def test_an_available_reading_state_that_to_message_mutates_breaks_purity() -> None:
    # (a) The Model says nothing about "open"; a global does, and dispatching
    # "flip" changes it, so "guarded" answers differently for the same Model.
    state = {"open": True}

    def flip(_: Flip, ctx: agentfx.InvocationContext[Any, Any]) -> Flip:
        state["open"] = not state["open"]
        return Flip()

    contract = define(
        expose(
            Flip | Guarded,
            variant(Guarded, "Only while open", name="guarded", available=lambda _: state["open"]),
            variant(Flip, "Flip the switch", name="flip", input=Flip, to_message=flip),
        )
    )
    with _violation(AVAILABLE_IS_PURE, "guarded") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    assert 'after "flip" was dispatched' in str(caught.value)


class Line(msgspec.Struct, frozen=True):
    quantity: int


class Added(msgspec.Struct, frozen=True, tag=True):
    quantity: int


class Other(msgspec.Struct, frozen=True, tag=True):
    pass


def test_a_to_message_making_another_message_for_some_inputs_never_reaches_the_host() -> None:
    # (b) Right for most inputs, wrong for large quantities: the runtime refuses
    # to send the wrong Message (a defect), which is what the law catches.
    def to_message(line: Line, ctx: agentfx.InvocationContext[Any, Any]) -> Any:
        return Other() if line.quantity > 10 else Added(quantity=line.quantity)

    contract = define(expose(Added | Other, variant(Added, "Add", name="add", input=Line, to_message=to_message)))
    with _violation(REACHES_HOST, "add") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    assert 'made a "Other" Message, but is exposed as "Added"' in str(caught.value)
    # Shrunk to the boundary.
    assert "{'quantity': 11}" in str(caught.value)


def test_a_to_message_that_raises_for_some_inputs_never_reaches_the_host() -> None:
    def to_message(line: Line, ctx: agentfx.InvocationContext[Any, Any]) -> Added:
        return Added(quantity=100 // line.quantity)

    contract = define(expose(Added, variant(Added, "Add", name="add", input=Line, to_message=to_message)))
    with _violation(REACHES_HOST, "add") as caught:
        check_contract(contract, models=[None], principals=[None], max_examples=FEW)
    assert "ZeroDivisionError" in str(caught.value)


def test_an_available_that_raises_breaks_settling() -> None:
    contract = define(expose(Ping, variant(Ping, "Ping", available=lambda model: 1 // model > 0)))
    with _violation(SETTLES, "ping") as caught:
        check_contract(contract, models=st.integers(0, 3), principals=[None], max_examples=FEW)
    assert "ZeroDivisionError" in str(caught.value)


async def _is_positive(model: int) -> bool:
    return model > 0


def _asks_later(model: int) -> Any:
    # A plain function handing back a coroutine: expose cannot see it is asynchronous.
    return _is_positive(model)


def test_an_available_answering_an_awaitable_breaks_settling_as_the_runtime_refuses_it() -> None:
    # The runtime refuses the awaitable answer on every call, so the suite must not read it as yes.
    contract = define(expose(Ping, variant(Ping, "Ping", available=_asks_later)))
    with _violation(SETTLES, "ping") as caught:
        check_contract(contract, models=st.integers(0, 3), principals=[None], max_examples=FEW)
    assert '"available" returned an awaitable; it must answer synchronously' in str(caught.value)


def test_the_instrumented_available_reads_an_answer_as_the_runtime_does() -> None:
    [capability] = expose(Ping, variant(Ping, "Ping", available=_asks_later)).capabilities
    observed = laws._observed(capability, laws._Probe())
    assert observed.available is not None
    with pytest.raises(agentfx.ContractError, match="returned an awaitable"):
        observed.available(1)
    [counting] = expose(Ping, variant(Ping, "Ping", available=lambda model: bool(model))).capabilities
    probe = laws._Probe()
    counted = laws._observed(counting, probe)
    assert counted.available is not None
    assert counted.available(0) is False
    assert counted.available(2) is True
    assert probe.available is True


class SetCode(msgspec.Struct, frozen=True, tag=True):
    code: Annotated[str, msgspec.Meta(pattern="^[0-9]+$", min_length=8, max_length=8)]
    # A pattern the payload strategies cannot narrow by length: matches are drawn and sifted.
    pair: Annotated[str, msgspec.Meta(pattern="^(ab|cd)+$", min_length=10, max_length=12)]


def test_fields_hard_to_draw_are_no_violation() -> None:
    contract = define(expose(SetCode, variant(SetCode, "Set the code")))
    check_contract(contract, models=[None], principals=[None], max_examples=FEW)


def test_strategies_that_reject_everything_are_named_not_taken_for_a_violation() -> None:
    contract = define(expose(Ping, variant(Ping, "Ping")))
    with pytest.raises(ValueError, match='could not draw a single example for capability "ping"'):
        check_contract(contract, models=st.integers().filter(lambda _: False), principals=[None], max_examples=5)


def test_an_authorize_answering_neither_bool_nor_refusal_breaks_settling() -> None:
    contract = define(expose(Ping, variant(Ping, "Ping", authorize=lambda req: req.principal)))
    with _violation(SETTLES, "ping") as caught:
        check_contract(contract, models=[None], principals=[True, 1], max_examples=FEW)
    assert "return a bool, a Refusal or a Confirm" in str(caught.value)


def test_an_authorize_that_never_answers_is_reported_not_waited_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(laws, "_SETTLE_WITHIN", 0.02)

    async def authorize(req: agentfx.AuthorizationRequest[Any, Any, Any]) -> bool:
        if req.principal == "stuck":
            await anyio.sleep_forever()
        return True

    contract = define(expose(Ping, variant(Ping, "Ping", authorize=authorize)))
    with _violation(SETTLES, "ping") as caught:
        check_contract(contract, models=[None], principals=["ok", "stuck"], max_examples=FEW)
    assert "did not settle within 0.02s" in str(caught.value)


def test_a_synchronous_hook_blocking_past_the_limit_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    # A blocking hook holds the event loop, so no deadline can cut it short: it is timed.
    monkeypatch.setattr(laws, "_SETTLE_WITHIN", 0.05)
    monkeypatch.setattr(laws, "_ABANDON_AFTER", 5.0)  # never reached: the hook does return

    def to_message(line: Line, ctx: agentfx.InvocationContext[Any, Any]) -> Added:
        if ctx.principal == "slow":
            time.sleep(0.1)
        return Added(quantity=line.quantity)

    contract = define(expose(Added, variant(Added, "Add", name="add", input=Line, to_message=to_message)))
    with _violation(SETTLES, "add") as caught:
        check_contract(contract, models=[None], principals=["fast", "slow"], max_examples=FEW)
    assert re.search(r"did not settle within 0\.05s: it took \d+\.\d\ds \(a hook blocked the event loop\)", str(caught.value))


def test_a_synchronous_hook_that_never_returns_is_reported_and_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(laws, "_SETTLE_WITHIN", 0.1)
    monkeypatch.setattr(laws, "_ABANDON_AFTER", 0.05)
    release = threading.Event()
    stuck: list[int] = []

    def authorize(req: agentfx.AuthorizationRequest[Any, Any, Any]) -> bool:
        if req.principal == "stuck":
            stuck.append(threading.get_ident())
            release.wait()  # a deadlock, until the test ends
        return True

    contract = define(expose(Ping, variant(Ping, "Ping", authorize=authorize)))
    try:
        with _violation(SETTLES, "ping") as caught:
            check_contract(contract, models=[None], principals=["ok", "stuck"], max_examples=FEW)
    finally:
        release.set()
    assert "did not settle within 0.1s, and was abandoned, still blocked" in str(caught.value)
    # Each example that blocked was left on a loop of its own, which ends once released.
    assert stuck
    blocked = [t for t in threading.enumerate() if t.ident in stuck]
    for thread in blocked:
        thread.join(timeout=5)
    assert not any(t.is_alive() for t in blocked)


def test_an_abandoned_invocation_writes_nothing_into_a_later_ones_log() -> None:
    probe = laws._Probe()
    probe.reset()
    probe.log("model")
    released = threading.Event()

    def late() -> None:  # the abandoned invocation, going on once its hook returns
        released.wait()
        probe.log("dispatch")
        probe.saw_available(False)
        probe.saw_verdict(True)

    thread = threading.Thread(target=late)
    thread.start()
    released.set()
    thread.join()
    assert (probe.events, probe.available, probe.verdict) == (["model"], None, laws._NOT_ASKED)


def _with_decoder(contract: agentfx.Definition[Any, Any], decode: Any) -> agentfx.Definition[Any, Any]:
    """``contract`` with its one capability's decoder replaced, as a runtime bug would."""
    [capability] = contract.capabilities
    codec = copy.copy(capability.codec)

    def attempt(payload: object) -> Any:
        try:
            return decode(payload)
        except UndecodablePayload as problem:
            return problem

    codec.attempt = attempt
    codec.decode = decode
    return agentfx.Definition(contract.union, (_replace(capability, codec=codec),))


def _replace(capability: Capability[Any, Any], **changes: Any) -> Capability[Any, Any]:
    return dataclasses.replace(capability, **changes)


def test_a_decoder_that_drops_unknown_keys_is_caught() -> None:
    def drop_unknown(payload: object) -> Ping:
        # Strict in everything but unknown keys, so only that law can catch it.
        if not isinstance(payload, dict):
            raise UndecodablePayload("$")
        known = {k: v for k, v in cast("dict[str, Any]", payload).items() if k == "times"}
        try:
            return msgspec.convert(known, Ping)
        except msgspec.ValidationError as exc:
            raise UndecodablePayload("$", exc) from exc

    lax = _with_decoder(define(expose(Ping, variant(Ping, "Ping"))), drop_unknown)
    with _violation(UNKNOWN_KEY_REFUSED, "ping"):
        check_contract(lax, models=[None], principals=[None], max_examples=FEW)


def test_a_decoder_that_refuses_valid_payloads_is_caught() -> None:
    def refuse(payload: object) -> Ping:
        raise UndecodablePayload("$")

    strict = _with_decoder(define(expose(Ping, variant(Ping, "Ping"))), refuse)
    with _violation(VALID_PAYLOAD_DECODES, "ping"):
        check_contract(strict, models=[None], principals=[None], max_examples=FEW)


def test_a_violation_is_an_assertion_error_carrying_the_law_and_capability() -> None:
    error = LawViolation(SETTLES, "ping", "it raised")
    assert isinstance(error, AssertionError)
    assert (error.law, error.capability, error.detail) == (SETTLES, "ping", "it raised")
    assert str(error) == f'Capability "ping" breaks the law "settles" ({SETTLES.statement}): it raised'
    assert str(LawViolation(AVAILABLE_LISTING, None, "x")).startswith('The contract breaks the law "available-listing"')


# --- each per-invocation law, judged on what an invocation did ---------------------


class Item(msgspec.Struct, frozen=True, tag=True):
    sku: str


class ItemInput(msgspec.Struct, frozen=True):
    sku: str


[GUARDED] = expose(
    Item,
    variant(
        Item,
        "Everything declared",
        name="item",
        available=lambda model: bool(model),
        input=ItemInput,
        to_message=lambda i, ctx: Item(sku=i.sku),
        authorize=lambda req: req.principal == "admin",
    ),
).capabilities
ITEM = Item(sku="a")
SENT = DispatchResult("item", "Item", ITEM, Invocation("i-1"))
UNAVAILABLE = AgentCapabilityUnavailableError.of("item", "Item")
INVALID = AgentInvalidInputError.of("item", "Item", "$")
REFUSED = AgentAuthorizationError.of("item", "Item")
ALL_THE_WAY: tuple[laws.Event, ...] = ("model", "available", "decode", "principal", "authorize", "to_message", "dispatch")


def _observed(
    outcome: object,
    events: tuple[laws.Event, ...] = ALL_THE_WAY,
    *,
    kind: laws.PayloadKind = "valid",
    available: bool | None = True,
    verdict: object = True,
    dispatched: tuple[object, ...] = (ITEM,),
    confirmed: bool = False,
) -> laws._Observation:
    assert isinstance(outcome, DispatchResult | agentfx.DispatchError | Exception)
    return laws._Observation(GUARDED, kind, {"sku": "a"}, outcome, events, available, verdict, dispatched, confirmed)


ASK = Confirm("Add item a?")
NEEDS_CONFIRMATION = AgentConfirmationRequiredError.of("item", "Item", ASK.prompt)


def test_sound_invocations_break_no_law() -> None:
    laws._judge(_observed(SENT))
    laws._judge(_observed(UNAVAILABLE, ("model", "available"), available=False, verdict=laws._NOT_ASKED, dispatched=()))
    laws._judge(_observed(INVALID, ("model", "available", "decode"), kind="invalid", verdict=laws._NOT_ASKED, dispatched=()))
    laws._judge(_observed(REFUSED, ALL_THE_WAY[:5], verdict=False, dispatched=()))
    laws._judge(_observed(REFUSED, ALL_THE_WAY[:5], verdict=Refusal("no"), dispatched=()))
    laws._judge(_observed(NEEDS_CONFIRMATION, ALL_THE_WAY[:5], verdict=ASK, dispatched=()))
    laws._judge(_observed(SENT, verdict=ASK, confirmed=True))
    laws._judge(_observed(REFUSED, ALL_THE_WAY[:5], verdict=False, dispatched=(), confirmed=True))
    laws._judge(_observed(SENT, confirmed=True))


@pytest.mark.parametrize(
    ("observation", "law"),
    [
        pytest.param(_observed(RuntimeError("boom"), ALL_THE_WAY[:6], dispatched=()), REACHES_HOST, id="defect-after-yes"),
        pytest.param(_observed(RuntimeError("boom"), ALL_THE_WAY[:2], available=None), SETTLES, id="defect-in-available"),
        pytest.param(_observed(TimeoutError(), ALL_THE_WAY[:5], verdict=laws._NOT_ASKED), SETTLES, id="hang"),
        pytest.param(_observed(SENT, ("model", *ALL_THE_WAY)), MODEL_READ_ONCE, id="model-twice"),
        pytest.param(
            _observed(UNAVAILABLE, ("model", "available", "decode"), available=False, dispatched=()),
            AVAILABLE_FIRST,
            id="decoded-when-unavailable",
        ),
        pytest.param(
            _observed(INVALID, ("model", "available", "decode"), kind="invalid", available=False, dispatched=()),
            AVAILABLE_FIRST,
            id="invalid-when-unavailable",
        ),
        pytest.param(_observed(SENT, available=False), AVAILABLE_FIRST, id="sent-when-unavailable"),
        pytest.param(_observed(REFUSED, ALL_THE_WAY, verdict=False), REFUSAL_NEVER_REACHES_HOST, id="refused-but-sent"),
        pytest.param(_observed(REFUSED, ALL_THE_WAY[:6], verdict=False, dispatched=()), REFUSAL_NEVER_REACHES_HOST, id="refused-but-built"),
        pytest.param(
            _observed(SENT, ("model", "available", "principal", "decode", "authorize", "to_message", "dispatch")),
            PIPELINE_ORDER,
            id="principal-before-decoding",
        ),
        pytest.param(_observed(SENT, ALL_THE_WAY[:4] + ALL_THE_WAY[5:]), PIPELINE_ORDER, id="authorize-skipped"),
        pytest.param(
            _observed(AgentCancelledError.before_dispatch("item"), ALL_THE_WAY[:5], dispatched=()),
            PIPELINE_ORDER,
            id="refusal-no-step-makes",
        ),
        pytest.param(_observed(INVALID, ALL_THE_WAY[:3], dispatched=()), VALID_PAYLOAD_DECODES, id="valid-refused"),
        pytest.param(_observed(SENT, kind="unknown-key"), UNKNOWN_KEY_REFUSED, id="unknown-key-accepted"),
        pytest.param(_observed(REFUSED, ALL_THE_WAY[:5], kind="invalid", verdict=False, dispatched=()), INVALID_PAYLOAD_REFUSED, id="invalid-accepted"),
        pytest.param(_observed(SENT, dispatched=()), REACHES_HOST, id="success-never-sent"),
        pytest.param(_observed(SENT, dispatched=(ITEM, ITEM)), REACHES_HOST, id="sent-twice"),
        pytest.param(
            _observed(DispatchResult("item", "Item", Other(), Invocation("i-1")), dispatched=(Other(),)),
            REACHES_HOST,
            id="wrong-class",
        ),
        pytest.param(_observed(SENT, verdict=ASK), CONFIRM_UNLESS_CONFIRMED, id="confirm-but-sent-unconfirmed"),
        pytest.param(
            _observed(REFUSED, ALL_THE_WAY[:5], verdict=ASK, dispatched=()),
            CONFIRM_UNLESS_CONFIRMED,
            id="confirm-refused-as-unauthorized",
        ),
        pytest.param(
            _observed(AgentConfirmationRequiredError.of("item", "Item", "Something else?"), ALL_THE_WAY[:5], verdict=ASK, dispatched=()),
            CONFIRM_UNLESS_CONFIRMED,
            id="confirm-with-another-prompt",
        ),
        pytest.param(
            _observed(NEEDS_CONFIRMATION, ALL_THE_WAY[:5], verdict=ASK, dispatched=(), confirmed=True),
            CONFIRM_UNLESS_CONFIRMED,
            id="confirmed-still-asked",
        ),
        pytest.param(
            _observed(NEEDS_CONFIRMATION, ALL_THE_WAY[:5], verdict=False, dispatched=()),
            CONFIRM_UNLESS_CONFIRMED,
            id="confirmation-nobody-asked-for",
        ),
        pytest.param(
            _observed(SENT, verdict=Refusal("no"), confirmed=True),
            CONFIRM_UNLESS_CONFIRMED,
            id="confirmed-overrides-a-refusal",
        ),
        pytest.param(
            _observed(AgentAuthorizationError.declined("item", "Item", ASK.prompt), ALL_THE_WAY[:5], verdict=ASK, dispatched=(), confirmed=True),
            REACHES_HOST,
            id="confirmed-but-declined",
        ),
    ],
)
def test_each_law_catches_an_invocation_that_breaks_it(observation: laws._Observation, law: Law) -> None:
    with _violation(law, "item"):
        laws._judge(observation)


class Leaky(AgentAuthorizationError, frozen=True):
    """A failure outside the DispatchError union: its tag is unknown on the other side."""


def test_a_failure_that_does_not_survive_json_breaks_the_round_trip() -> None:
    leaky = Leaky("item", "Item", "no")
    with _violation(FAILURE_ROUND_TRIP, "item"):
        laws._judge(_observed(leaky, ALL_THE_WAY[:5], verdict=False, dispatched=()))


def test_the_listing_must_match_the_predicates_and_read_the_model_once() -> None:
    [a, b] = expose(Ping | Flip, variant(Ping, "a", name="a"), variant(Flip, "b", name="b")).capabilities
    laws._judge_listing([a, b], [True, False], ["a"], 1)
    with _violation(AVAILABLE_LISTING, "b"):
        laws._judge_listing([a, b], [True, False], ["a", "b"], 1)
    with _violation(AVAILABLE_LISTING, "a"):
        laws._judge_listing([a, b], [True, True], ["b"], 1)
    with _violation(AVAILABLE_LISTING, None):
        laws._judge_listing([a, b], [True, True], ["b", "a"], 1)
    with _violation(AVAILABLE_LISTING, None):
        laws._judge_listing([a, b], [True, False], ["a"], 2)


def test_purity_compares_answers_for_equal_models() -> None:
    [a, b] = expose(Ping | Flip, variant(Ping, "a", name="a"), variant(Flip, "b", name="b")).capabilities
    laws._judge_purity([a, b], [True, False], [True, False], "a")
    with _violation(AVAILABLE_IS_PURE, "b") as caught:
        laws._judge_purity([a, b], [True, False], [True, True], "a")
    assert 'after "a" was dispatched' in str(caught.value)


def test_the_expected_calls_follow_the_pipeline_table() -> None:
    [bare] = expose(Ping, variant(Ping, "Ping")).capabilities
    assert laws._expected_events(bare, DispatchResult("ping", "Ping", Ping(1), Invocation("i"))) == (
        "model",
        "decode",
        "principal",
        "dispatch",
    )
    assert laws._expected_events(bare, UNAVAILABLE) is None
    assert laws._expected_events(bare, REFUSED) is None
    assert laws._expected_events(GUARDED, SENT) == ALL_THE_WAY
    assert laws._expected_events(GUARDED, REFUSED) == ALL_THE_WAY[:5]
    assert laws._expected_events(GUARDED, NEEDS_CONFIRMATION) == ALL_THE_WAY[:5]
    assert laws._expected_events(bare, NEEDS_CONFIRMATION) is None


# --- Confirm: a refusal unless the invocation is confirmed, both paths checked -----


def _confirming(built: list[object]) -> agentfx.Definition[Any, Any]:
    def to_message(value: ItemInput, ctx: agentfx.InvocationContext[Any, Any]) -> Item:
        built.append(ctx.invocation.confirmed)
        return Item(sku=value.sku)

    return define(
        expose(
            Item,
            variant(
                Item,
                "Add an item once a person agrees",
                name="item",
                input=ItemInput,
                to_message=to_message,
                authorize=lambda req: Confirm(f"Add {req.input.sku!r}?") if req.principal == "ask" else req.principal == "yes",
                may_confirm=True,
            ),
        )
    )


def test_a_contract_asking_for_confirmation_keeps_every_law_on_both_paths() -> None:
    built: list[object] = []
    check_contract(_confirming(built), models=[None], principals=["ask"], max_examples=FEW)
    # Only the confirmed path ever got as far as building the Message.
    assert built and set(built) == {True}


def test_a_confirmed_invocation_is_judged_for_every_capability_with_authorize() -> None:
    built: list[object] = []
    # "no" refuses on both paths: confirmed approves a Confirm, never a refusal
    # (the laws judged every refusal, then found nothing ever reached the host).
    with _violation(HOST_REACHED, "item"):
        check_contract(_confirming(built), models=[None], principals=["no"], max_examples=FEW)
    assert built == []


@pytest.mark.parametrize("broken", ["ignores-confirmed", "approves-everyone"])
def test_a_runtime_getting_confirmation_wrong_is_caught(broken: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfx import pipeline

    # Broken in the step's synchronous half, which both the direct run and confirm_step call.
    real = pipeline.confirm_begin

    def ignores_confirmed(env: Any, capability: Any, request: Confirm) -> Any:
        return AgentConfirmationRequiredError.of(capability.name, capability.tag, request.prompt)

    def approves_everyone(env: Any, capability: Any, request: Confirm) -> Any:
        return real(env, capability, request) if env.invocation.confirmed else None

    monkeypatch.setattr(pipeline, "confirm_begin", ignores_confirmed if broken == "ignores-confirmed" else approves_everyone)
    with _violation(CONFIRM_UNLESS_CONFIRMED, "item"):
        check_contract(_confirming([]), models=[None], principals=["ask"], max_examples=FEW)


# --- the orders example is a working program ---------------------------------------


def _outcome(io: IOResult[Any, Any]) -> Result[Any, Any]:
    return agentfx.as_result(io)


@pytest.mark.anyio
async def test_the_orders_example_places_and_cancels_orders_end_to_end(anyio_backend: str) -> None:
    place = {
        "items": [{"sku": "TEA-0001", "quantity": 3}],
        "shipping": msgspec.to_builtins(orders.INITIAL.orders[0].shipping),
        "priority": "express",
    }
    async with run_program(init=orders.INITIAL, update=orders.update) as program:
        clerk = orders.Customer(id="cleo", role="clerk")
        principal = {"ada": orders.Customer(id="ada"), "cleo": clerk, "vic": orders.Customer(id="vic", role="viewer")}
        current = {"who": "ada"}
        runtime = orders.OrdersAgent.bind(orders.AppAgent, host=program.host(lambda _: principal[current["who"]]))

        match _outcome(await runtime.messages.dispatch(orders.RequestedPlaceOrder, place)):
            case Success(result):
                placed = result.completion.message
                assert isinstance(placed, orders.PlacedOrder)
                assert placed.order.customer_id == "ada"
                assert placed.order.priority == "express"
            case other:
                pytest.fail(f"placing failed: {other}")

        current["who"] = "vic"
        match _outcome(await runtime.messages.dispatch("place_order", place)):
            case Failure(AgentAuthorizationError(message=why)):
                assert why == "Viewers cannot place orders"
            case other:
                pytest.fail(f"a viewer placed an order: {other}")

        bad = {**place, "items": [{"sku": "tea-1", "quantity": 100}]}
        match _outcome(await runtime.messages.dispatch("place_order", bad)):
            case Failure(AgentInvalidInputError(path=path)):
                assert path.startswith("$.items[0].")
            case other:
                pytest.fail(f"a malformed order was accepted: {other}")

        current["who"] = "ada"
        for order in program.model.orders:
            if order.status == "open":
                cancelled = await runtime.messages.call("cancel_order", {"order_id": order.id, "reason": "Changed my mind"})
                assert isinstance(cancelled.completion and cancelled.completion.message, orders.CancelledOrder)
        assert all(order.status != "open" for order in program.model.orders)
        assert [d.name for d in runtime.messages.available()] == ["place_order"]
        match _outcome(await runtime.messages.dispatch("cancel_order", "not even an object")):
            case Failure(AgentCapabilityUnavailableError()):
                pass
            case other:
                pytest.fail(f"cancelling with nothing open: {other}")


# --- the README section runs ---------------------------------------------------------


def _readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Testing your contract\n", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return code


def test_the_readme_example_runs_and_its_test_passes() -> None:
    namespace: dict[str, Any] = {"__name__": "readme_testing_your_contract"}
    exec(compile(_readme_snippet(), "README.md", "exec"), namespace)
    tests = [value for name, value in namespace.items() if name.startswith("test_") and callable(value)]
    assert len(tests) == 1
    for test in tests:
        test()



def test_each_capability_keeps_its_own_saved_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    # The example database keys on a digest of the test function; one function
    # serves every capability, so the digest must tell them apart, or a saved
    # failure would be replayed (and dropped) under another capability.
    from hypothesis.internal.reflection import function_digest

    suites: list[Any] = []

    def collect(capability: str, suite: Any) -> None:
        suites.append(suite)

    monkeypatch.setattr(laws, "_run", collect)
    check_contract(todo.AppAgent, models=[todo.INITIAL], principals=[todo.User(id="u")], max_examples=1)
    check_contract(orders.AppAgent, models=ORDER_MODELS, principals=CUSTOMERS, max_examples=1)
    digests = {function_digest(suite.hypothesis.inner_test) for suite in suites}
    assert len(suites) == len(todo.AppAgent.capabilities) + len(orders.AppAgent.capabilities)
    assert len(digests) == len(suites)
