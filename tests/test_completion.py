"""Completion contracts: Message and state completions, deadlines, cancellation, bind refusals."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import AsyncGenerator, Callable, Coroutine, Hashable, Iterable, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, cast

import anyio
import msgspec
import pytest
from returns.result import Failure, Result, Success

import agentfx
from agentfx import (
    AbortController,
    AgentCancelledError,
    AgentCompletionTimeoutError,
    CallInfo,
    Completion,
    CompletionOutcome,
    ContractError,
    DispatchError,
    DispatchResult,
    Host,
    Invocation,
    Source,
    when,
)
from agentfx.testing.recording import RecordingHost
from tests.completion_support import (
    A,
    Create,
    Created,
    CreateFailed,
    Model,
    Rename,
    TitleInput,
    by_request,
    create_variant,
    request_key,
    result_key,
    until,
)
from tests.support import run

pytestmark = pytest.mark.anyio


class Bump(msgspec.Struct, frozen=True, tag=True):
    pass


class Noise(msgspec.Struct, frozen=True, tag=True):
    pass


Message = Create | Created | CreateFailed | Rename | Bump | Noise

Outcome = Result[DispatchResult, DispatchError]
AnyCompletion = Completion[Any, Any]


def create_runtime(
    completion: AnyCompletion | None,
    recorder: RecordingHost[Model, Any, None] | None = None,
    *,
    host: Host[Model, Any, None] | None = None,
    audit: agentfx.AuditLog | None = None,
) -> agentfx.AgentRuntime[Model, None]:
    """A runtime exposing ``create``: a mapped variant that carries its invocation id."""
    definition = A.define(A.expose(Message, create_variant(completion, "Create a todo", name="create")))
    if host is None:
        assert recorder is not None
        host = recorder.host
    return A.bind(definition, host=host, audit=audit)


def rename_runtime(
    completion: agentfx.StateCompletion[Model, Any, Rename],
    host: Host[Model, Any, None],
    audit: agentfx.AuditLog | None = None,
) -> agentfx.AgentRuntime[Model, None]:
    definition = A.define(A.expose(Message, A.variant(Rename, "Rename the project", completion=completion)))
    return A.bind(definition, host=host, audit=audit)


def answer(result: type[Created] | type[CreateFailed]) -> Callable[[Create], list[Any]]:
    return lambda message: [result(message.title, message.request)]


def recording(
    model: Model,
    *,
    responses: Mapping[type[Any], Iterable[Any] | Callable[[Any], Iterable[Any]]] | None = None,
    update: Callable[[Model, Any], Model] | None = None,
) -> RecordingHost[Model, Any, None]:
    return RecordingHost(model, responses=responses, update=update)


@asynccontextmanager
async def concurrent_creates(
    runtime: agentfx.AgentRuntime[Model, None], recorder: RecordingHost[Model, Any, None], invocations: Iterable[str]
) -> AsyncGenerator[dict[str, Outcome]]:
    """Start one identical ``create`` per invocation id; enter once all are dispatched, leave once all settled.

    The inputs are identical: only the invocation id carried on the Message tells the calls apart.
    """
    ids = list(invocations)
    outcomes: dict[str, Outcome] = {}

    async def call(invocation: str) -> None:
        outcomes[invocation] = await run(runtime, Create, {"title": "milk"}, Invocation(id=invocation))

    async with anyio.create_task_group() as tasks:
        for invocation in ids:
            tasks.start_soon(call, invocation)
        await until(lambda: len(recorder.dispatched) == len(ids))
        yield outcomes


def completed(outcome: Outcome) -> CompletionOutcome:
    assert isinstance(outcome, Success), outcome
    result = outcome.unwrap()
    assert result.completion is not None
    return result.completion


def failure(outcome: Outcome) -> DispatchError:
    assert isinstance(outcome, Failure), outcome
    return outcome.failure()


# --- Message completion ---------------------------------------------------------------------------


async def test_a_result_update_emits_inside_dispatch_completes_the_call(anyio_backend: str) -> None:
    # RecordingHost emits the answer synchronously inside host.dispatch: only a listener
    # subscribed before dispatch can see it.
    recorder = recording(Model(), responses={Create: answer(Created)})
    runtime = create_runtime(Completion(success=Created, failure=CreateFailed, timeout=5), recorder)
    outcome = await run(runtime, Create, {"title": "milk"})
    settled = completed(outcome)
    assert settled.status == "completed"
    assert settled.message == Created("milk", outcome.unwrap().invocation.id or "")
    assert agentfx.summarize(outcome.unwrap()) == agentfx.Summary(ok=True, text="Completed: Created")
    assert recorder.listener_count == 0


async def test_a_declared_failure_message_is_a_successful_dispatch_with_failed_status(anyio_backend: str) -> None:
    recorder = recording(Model(), responses={Create: answer(CreateFailed)})
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, failure=CreateFailed, timeout=5), recorder, audit=log)
    outcome = await run(runtime, "create", {"title": "milk"})
    settled = completed(outcome)
    assert settled.status == "failed"
    assert isinstance(settled.message, CreateFailed)
    assert agentfx.summarize(outcome.unwrap()) == agentfx.Summary(ok=False, text="Failed: CreateFailed")
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "failed")]


async def test_without_a_contract_the_completion_field_is_none(anyio_backend: str) -> None:
    recorder = recording(Model(), responses={Create: answer(Created)})
    outcome = await run(create_runtime(None, recorder), Create, {"title": "milk"})
    assert isinstance(outcome, Success)
    assert outcome.unwrap().completion is None
    assert agentfx.summarize(outcome.unwrap()).text == "Dispatched Create"


async def test_the_first_match_wins_and_later_matches_are_ignored(anyio_backend: str) -> None:
    recorder = recording(
        Model(), responses={Create: lambda m: [Noise(), Created("first", m.request), Created("second", m.request)]}
    )
    runtime = create_runtime(Completion(success=Created, timeout=5), recorder)
    settled = completed(await run(runtime, Create, {"title": "milk"}))
    assert settled.message == Created("first", settled.message.request)


async def test_correlate_receives_the_decoded_request_the_result_and_the_call(anyio_backend: str) -> None:
    seen: list[tuple[object, object, CallInfo]] = []

    def correlate(request: TitleInput, result: Created, call: CallInfo) -> bool:
        seen.append((request, result, call))
        return result.title == "mine"

    recorder = recording(Model(), responses={Create: [Created("other"), Created("mine"), Created("mine")]})
    runtime = create_runtime(Completion(success=Created, correlate=correlate, timeout=5), recorder)
    invocation = Invocation(id="call-7", transport="test")
    settled = completed(await run(runtime, Create, {"title": "milk"}, invocation))
    assert settled.message == Created("mine")
    # Called for "other" and for the first "mine"; the second "mine" arrives after settling.
    assert [result for _, result, _ in seen] == [Created("other"), Created("mine")]
    request, _, call = seen[0]
    assert request == TitleInput("milk")
    assert call == CallInfo(invocation, Create("milk", "call-7"))


async def test_a_timeout_leaves_the_message_dispatched_and_a_late_result_is_ignored(anyio_backend: str) -> None:
    recorder = recording(Model())
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, timeout=0.05), recorder, audit=log)
    started = anyio.current_time()
    error = failure(await run(runtime, Create, {"title": "milk"}, Invocation(id="late")))
    assert anyio.current_time() - started >= 0.05
    assert error == AgentCompletionTimeoutError(
        "create",
        "late",
        '"create" was dispatched but did not complete within 0.05s. The Message still reached update.',
    )
    assert recorder.dispatched == [Create("milk", "late")]
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "timeout")]
    assert recorder.listener_count == 0
    recorder.emit(Created("milk", "late"))  # nobody listens, nothing raises
    assert len(log.entries()) == 1


async def test_timeouts_accept_timedelta_and_render_with_g(anyio_backend: str) -> None:
    assert Completion(success=Created, timeout=timedelta(seconds=10)).timeout == 10.0
    assert when(projection=lambda m: m, predicate=lambda v, r: True, timeout=timedelta(minutes=1)).timeout == 60.0
    assert "within 10s." in AgentCompletionTimeoutError.while_waiting("c", "i", 10.0).message
    runtime = create_runtime(Completion(success=Created, timeout=timedelta(milliseconds=50)), recording(Model()))
    error = failure(await run(runtime, Create, {"title": "milk"}))
    assert isinstance(error, AgentCompletionTimeoutError)
    assert "within 0.05s." in error.message


@pytest.mark.parametrize(
    ("timeout", "shown"),
    [(0, "0s"), (-1, "-1s"), (-0.5, "-0.5s"), (timedelta(0), "0s"), (timedelta(seconds=-3), "-3s"),
     (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan"),
     # Past a float's range, or a signalling NaN: float() raises, and the timeout is still refused in these words.
     (10**400, "inf"), (-(10**400), "-inf"), (Fraction(10**400, 3), "inf"), (Decimal("sNaN"), "nan")],
)
def test_a_timeout_must_be_positive_and_finite(timeout: float | timedelta, shown: str) -> None:
    message = f"^A completion timeout must be a positive, finite duration, got {re.escape(shown)}$"
    with pytest.raises(ContractError, match=message):
        Completion(success=Created, timeout=timeout)
    with pytest.raises(ContractError, match=message):
        when(projection=lambda m: m, predicate=lambda v, r: True, timeout=timeout)


@pytest.mark.parametrize(
    ("timeout", "kind"),
    [("10", "a str"), (True, "a bool"), (False, "a bool"), (None, "a NoneType"), ([10], "a list"), (10j, "a complex")],
)
def test_a_timeout_that_is_not_seconds_or_a_timedelta_is_refused(timeout: object, kind: str) -> None:
    # float("10") and float(True) would both pass for a duration; neither is one.
    message = (
        f"A completion timeout must be seconds (a real number: an int or a float) or a datetime.timedelta; it is {kind}"
    )
    with pytest.raises(ContractError, match=f"^{re.escape(message)}$"):
        Completion(success=Created, timeout=cast(Any, timeout))
    with pytest.raises(ContractError, match=f"^{re.escape(message)}$"):
        when(projection=lambda m: m, predicate=lambda v, r: True, timeout=cast(Any, timeout))


def test_a_whole_number_of_seconds_is_a_timeout() -> None:
    assert Completion(success=Created, timeout=10).timeout == 10.0
    assert isinstance(Completion(success=Created, timeout=10).timeout, float)


def test_any_real_number_of_seconds_is_a_timeout() -> None:
    # What float() reads exactly as seconds, as before timeouts were checked.
    assert Completion(success=Created, timeout=cast(Any, Fraction(1, 2))).timeout == 0.5
    assert Completion(success=Created, timeout=cast(Any, Decimal("2.5"))).timeout == 2.5


def test_declarations_can_be_built_with_explicit_type_arguments() -> None:
    assert Completion[TitleInput, Created](success=Created).success == (Created,)
    assert Source[int](get=lambda: 1, subscribe=lambda listener: lambda: None).get() == 1


@pytest.mark.parametrize(
    ("keys", "it"),
    [
        (result_key, "a function"),
        ((request_key,), "a tuple of 1"),
        ((request_key, result_key, result_key), "a tuple of 3"),
        ([request_key, result_key], "a list"),
        ("request", "a str"),
    ],
)
def test_a_correlate_key_that_is_not_a_pair_says_how_to_write_one(keys: object, it: str) -> None:
    # A lone key function used to fail inside the constructor with "not subscriptable".
    message = (
        f'A completion\'s "correlate_key" must be a pair (request_key, result_key); it is {it}. '
        "Write correlate_key=(lambda request, call: ..., lambda result: ...), each returning a hashable key"
    )
    with pytest.raises(ContractError, match=f"^{re.escape(message)}$"):
        Completion(success=Created, correlate_key=cast(Any, keys))


def test_correlate_and_correlate_key_are_exclusive() -> None:
    with pytest.raises(ContractError, match='either "correlate" or "correlate_key"'):
        Completion(success=Created, correlate=by_request, correlate_key=(request_key, result_key))


def test_when_needs_exactly_one_of_projection_or_source() -> None:
    source = Source(get=lambda: 1, subscribe=lambda listener: lambda: None)
    with pytest.raises(ContractError, match="exactly one"):
        when(predicate=lambda v, r: True)
    with pytest.raises(ContractError, match="exactly one"):
        when(projection=lambda m: m, source=source, predicate=lambda v, r: True)


@pytest.mark.parametrize("keyed", [False, True], ids=["correlate", "keyed"])
async def test_two_concurrent_calls_each_settle_on_their_own_result(anyio_backend: str, keyed: bool) -> None:
    recorder = recording(Model())
    completion: AnyCompletion = (
        Completion(success=Created, failure=CreateFailed, correlate_key=(request_key, result_key), timeout=5)
        if keyed
        else Completion(success=Created, failure=CreateFailed, correlate=by_request, timeout=5)
    )
    runtime = create_runtime(completion, recorder)
    async with concurrent_creates(runtime, recorder, ["one", "two"]) as outcomes:
        recorder.emit(CreateFailed("milk", "two"))
        recorder.emit(Created("milk", "one"))
    assert completed(outcomes["one"]) == CompletionOutcome("completed", Created("milk", "one"))
    assert completed(outcomes["two"]) == CompletionOutcome("failed", CreateFailed("milk", "two"))
    assert recorder.listener_count == 0


async def test_without_correlation_one_message_settles_every_pending_call(anyio_backend: str) -> None:
    # The documented hazard: each pending invocation's first matching Message wins, so a
    # single result settles all uncorrelated pending calls, whichever one caused it.
    recorder = recording(Model())
    runtime = create_runtime(Completion(success=Created, timeout=5), recorder)
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Create, {"title": "milk"}))

    async with anyio.create_task_group() as tasks:
        for _ in range(3):
            tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 3)
        recorder.emit(Created("milk", "only-one"))
    assert [completed(o).message for o in outcomes] == [Created("milk", "only-one")] * 3


async def test_a_throwing_correlate_fails_its_call_as_a_defect_not_the_notifier(anyio_backend: str) -> None:
    def correlate(request: TitleInput, result: Created, call: CallInfo) -> bool:
        raise KeyError("broken correlate")

    recorder = recording(Model())
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, correlate=correlate, timeout=5), recorder, audit=log)
    with pytest.RaisesGroup(pytest.RaisesExc(KeyError, match="broken correlate")):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run, runtime, Create, {"title": "milk"})
            await until(lambda: len(recorder.dispatched) == 1)
            recorder.emit(Created("milk"))  # the host's notifier does not raise
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "AgentDefect")]
    assert recorder.listener_count == 0


async def test_a_throwing_result_key_fails_pending_calls_and_the_hub_recovers(anyio_backend: str) -> None:
    def fragile_key(result: Created) -> Hashable:
        if result.title == "bad":
            raise KeyError("broken key")
        return result.request

    recorder = recording(Model())
    runtime = create_runtime(Completion(success=Created, correlate_key=(request_key, fragile_key), timeout=5), recorder)
    with pytest.RaisesGroup(pytest.RaisesExc(KeyError, match="broken key")):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run, runtime, Create, {"title": "milk"})
            await until(lambda: len(recorder.dispatched) == 1)
            recorder.emit(Created("bad"))
    assert recorder.listener_count == 0
    # The shared observer was released and is taken again by the next call.
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Create, {"title": "milk"}, Invocation(id="again")))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 2)
        recorder.emit(Created("milk", "again"))
    assert completed(outcomes[0]).message == Created("milk", "again")
    assert recorder.listener_count == 0


async def test_an_unhashable_result_key_fails_the_call_not_the_notifier(anyio_backend: str) -> None:
    def unhashable_key(result: Created) -> Hashable:
        return [result.request]  # type: ignore[return-value]  # the defect under test

    recorder = recording(Model())
    runtime = create_runtime(Completion(success=Created, correlate_key=(request_key, unhashable_key), timeout=5), recorder)
    with pytest.RaisesGroup(pytest.RaisesExc(TypeError, match="unhashable")):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run, runtime, Create, {"title": "milk"})
            await until(lambda: len(recorder.dispatched) == 1)
            try:
                recorder.emit(Created("milk"))
            except TypeError:
                pytest.fail("the defect was raised into the host's notifier")
    assert recorder.listener_count == 0


async def test_a_hook_may_re_enter_the_host_while_a_message_is_matched(anyio_backend: str) -> None:
    recorder = recording(Model())
    fired: list[bool] = []

    def correlate(request: TitleInput, result: Created, call: CallInfo) -> bool:
        if result.title == "trigger" and not fired:
            fired.append(True)
            recorder.emit(Created("milk", "two"))  # matched while "trigger" is being matched
        return result.request == call.message.request

    runtime = create_runtime(Completion(success=Created, correlate=correlate, timeout=5), recorder)
    async with concurrent_creates(runtime, recorder, ["one", "two"]) as outcomes:
        recorder.emit(Created("trigger", "one"))
    assert completed(outcomes["one"]).message == Created("trigger", "one")
    assert completed(outcomes["two"]).message == Created("milk", "two")


async def test_an_observe_that_fails_once_leaves_nothing_registered(anyio_backend: str) -> None:
    recorder = recording(Model(), responses={Create: answer(Created)})
    failures = [ConnectionError("observe unavailable")]

    def observe(listener: Callable[[Any], None]) -> Callable[[], None]:
        if failures:
            raise failures.pop()
        return recorder.observe(listener)

    host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=recorder.dispatch, observe=observe)
    runtime = create_runtime(Completion(success=Created, timeout=5), host=host)
    with pytest.raises(ConnectionError):
        await runtime.messages.dispatch(Create, {"title": "milk"})
    assert recorder.dispatched == []  # nothing is sent without a listener
    # The next call subscribes afresh rather than believing the failed one still listens.
    assert completed(await run(runtime, Create, {"title": "milk"})).status == "completed"
    assert recorder.listener_count == 0


# --- cancellation and deadlines -------------------------------------------------------------------


def hanging_host(recorder: RecordingHost[Model, Any, None], entered: anyio.Event) -> Host[Model, Any, None]:
    """A host whose dispatch never returns."""

    async def dispatch(message: object) -> None:
        entered.set()
        await anyio.sleep_forever()

    return Host(model=recorder.model, dispatch=dispatch, observe=recorder.observe, subscribe=recorder.subscribe)


async def test_an_abort_while_waiting_is_cancelled_after_dispatch(anyio_backend: str) -> None:
    recorder = recording(Model())
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, timeout=5), recorder, audit=log)
    controller = AbortController()
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Create, {"title": "milk"}, Invocation(signal=controller.signal)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 1)
        controller.abort("stop")
    assert failure(outcomes[0]) == AgentCancelledError(
        "create",
        True,
        '"create" was dispatched, and waiting for it to complete was cancelled. The Message still reached update.',
    )
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "AgentCancelledError")]
    assert recorder.listener_count == 0


@pytest.mark.parametrize("with_completion", [True, False], ids=["completion", "no-completion"])
async def test_an_abort_during_a_slow_host_dispatch_settles_at_once_with_delivery_unknown(
    anyio_backend: str, with_completion: bool
) -> None:
    recorder = recording(Model())
    entered = anyio.Event()
    log = agentfx.audit_log()
    completion: AnyCompletion | None = Completion(success=Created, timeout=30) if with_completion else None
    runtime = create_runtime(completion, host=hanging_host(recorder, entered), audit=log)
    controller = AbortController()
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Create, {"title": "milk"}, Invocation(signal=controller.signal)))

    with anyio.fail_after(5):  # "at once": far below the 30 s budget
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call)
            await entered.wait()
            controller.abort()
    assert failure(outcomes[0]) == AgentCancelledError(
        "create",
        False,
        'Invocation of "create" was cancelled while the host was still dispatching it. '
        "Whether the Message reached update is unknown.",
    )
    assert [(e.decision, e.outcome) for e in log.entries()] == [("unknown", "AgentCancelledError")]
    assert recorder.listener_count == 0


async def test_a_deadline_reached_while_the_host_is_still_dispatching(anyio_backend: str) -> None:
    recorder = recording(Model())
    log = agentfx.audit_log()
    runtime = create_runtime(
        Completion(success=Created, timeout=0.05), host=hanging_host(recorder, anyio.Event()), audit=log
    )
    error = failure(await run(runtime, Create, {"title": "milk"}, Invocation(id="slow")))
    assert error == AgentCompletionTimeoutError(
        "create",
        "slow",
        'The host was still dispatching "create" after 0.05s. Whether the Message reached update is unknown.',
    )
    assert [(e.decision, e.outcome) for e in log.entries()] == [("unknown", "timeout")]
    assert recorder.listener_count == 0


async def test_a_defect_while_the_host_is_still_dispatching_is_not_hidden_by_the_deadline(
    anyio_backend: str,
) -> None:
    recorder = recording(Model())

    def correlate(request: TitleInput, result: Created, call: CallInfo) -> bool:
        raise KeyError("broken correlate")

    async def answer_then_hang(message: Create) -> None:
        recorder.emit(Created(message.title, message.request))
        await anyio.sleep_forever()

    host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=answer_then_hang, observe=recorder.observe)
    runtime = create_runtime(Completion(success=Created, correlate=correlate, timeout=0.05), host=host)
    with pytest.raises(KeyError, match="broken correlate"):
        await runtime.messages.dispatch(Create, {"title": "milk"})
    assert recorder.listener_count == 0


async def test_an_already_aborted_signal_sends_nothing(anyio_backend: str) -> None:
    recorder = recording(Model(), responses={Create: answer(Created)})
    runtime = create_runtime(Completion(success=Created, timeout=5), recorder)
    controller = AbortController()
    controller.abort()
    error = failure(await run(runtime, Create, {"title": "milk"}, Invocation(signal=controller.signal)))
    assert isinstance(error, AgentCancelledError) and not error.dispatched
    assert recorder.dispatched == [] and recorder.model_reads == 0


async def test_a_result_beats_an_abort_that_lands_afterwards(anyio_backend: str) -> None:
    recorder = recording(Model())
    runtime = create_runtime(Completion(success=Created, timeout=5), recorder)
    controller = AbortController()
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Create, {"title": "milk"}, Invocation(signal=controller.signal)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 1)
        recorder.emit(Created("milk"))
        controller.abort()  # before the waiting task has even resumed
    assert completed(outcomes[0]).status == "completed"


async def test_outer_cancellation_propagates_and_is_audited_interrupted(anyio_backend: str) -> None:
    recorder = recording(Model())
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, timeout=5), recorder, audit=log)
    finished: list[Outcome] = []

    async def call() -> None:
        finished.append(await run(runtime, Create, {"title": "milk"}))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 1)
        tasks.cancel_scope.cancel()
    assert finished == []
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "interrupted")]
    assert recorder.listener_count == 0


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
async def test_a_host_that_raises_is_a_defect_with_decision_unknown(anyio_backend: str, asynchronous: bool) -> None:
    recorder = recording(Model())

    def sync_dispatch(message: object) -> None:
        raise ConnectionError("host down")

    async def async_dispatch(message: object) -> None:
        await anyio.sleep(0)
        raise ConnectionError("host down")

    host: Host[Model, Any, None] = Host(
        model=recorder.model,
        dispatch=async_dispatch if asynchronous else sync_dispatch,
        observe=recorder.observe,
        subscribe=recorder.subscribe,
    )
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, timeout=5), host=host, audit=log)
    with pytest.raises(ConnectionError, match="host down"):
        await runtime.messages.dispatch(Create, {"title": "milk"})
    assert [(e.decision, e.outcome) for e in log.entries()] == [("unknown", "AgentDefect")]
    assert recorder.listener_count == 0


# --- state completion -----------------------------------------------------------------------------


def by_name(predicate_calls: list[str] | None = None, timeout: float = 5) -> agentfx.StateCompletion[Model, str, Rename]:
    def predicate(name: str, request: Rename) -> bool:
        if predicate_calls is not None:
            predicate_calls.append(name)
        return name == request.name

    def project(model: Model) -> str:
        return model.name

    return when(projection=project, predicate=predicate, timeout=timeout)


def renaming(model: Model, message: object) -> Model:
    return Model(message.name, model.count) if isinstance(message, Rename) else model


async def test_a_state_that_already_holds_completes_at_once(anyio_backend: str) -> None:
    # No update, so no notification at all: only the check when the wait begins sees it.
    recorder = recording(Model(name="done"))
    outcome = await run(rename_runtime(by_name(), recorder.host), Rename, {"name": "done"})
    assert completed(outcome) == CompletionOutcome("completed", None)
    assert agentfx.summarize(outcome.unwrap()).text == "Completed: Rename reached its declared state"
    assert recorder.dispatched == [Rename("done")]
    assert recorder.listener_count == 0


async def test_a_state_set_by_update_completes(anyio_backend: str) -> None:
    calls: list[str] = []
    recorder = recording(Model(name="old"), update=renaming)
    outcome = await run(rename_runtime(by_name(calls), recorder.host), Rename, {"name": "new"})
    assert completed(outcome).status == "completed"
    # Evaluated inside update's notification; the wait-begins check saw the same value.
    assert calls == ["new"]
    assert recorder.listener_count == 0


async def test_a_state_set_later_by_something_else_completes(anyio_backend: str) -> None:
    recorder = recording(Model(name="old"))
    runtime = rename_runtime(by_name(), recorder.host)
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Rename, {"name": "new"}))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 1)
        recorder.set_model(Model(name="elsewhere"))
        await anyio.sleep(0)
        assert outcomes == []
        recorder.set_model(Model(name="new"))
    assert completed(outcomes[0]).status == "completed"
    assert recorder.listener_count == 0


async def test_a_state_changed_without_notification_is_seen_when_the_wait_begins(anyio_backend: str) -> None:
    recorder = recording(Model(name="old"))
    cell = [Model(name="old")]

    def silent_dispatch(message: Rename) -> None:
        cell[0] = Model(name=message.name)  # replaces the Model but notifies nobody

    host: Host[Model, Any, None] = Host(model=lambda: cell[0], dispatch=silent_dispatch, subscribe=recorder.subscribe)
    outcome = await run(rename_runtime(by_name(timeout=0.5), host), Rename, {"name": "new"})
    assert completed(outcome).status == "completed"
    assert recorder.listener_count == 0


async def test_a_state_true_and_reverted_inside_dispatch_still_completes(anyio_backend: str) -> None:
    recorder = recording(Model(name="old"))

    def flicker(message: Rename) -> None:
        recorder.set_model(Model(name=message.name))
        recorder.set_model(Model(name="old"))

    host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=flicker, subscribe=recorder.subscribe)
    outcome = await run(rename_runtime(by_name(timeout=0.5), host), Rename, {"name": "new"})
    assert completed(outcome).status == "completed"


async def test_an_unchanged_projected_value_is_not_evaluated_again(anyio_backend: str) -> None:
    calls: list[str] = []
    recorder = recording(Model(name="old"))
    runtime = rename_runtime(by_name(calls), recorder.host)
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Rename, {"name": "new"}))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 1)
        assert calls == ["old"]  # the wait-begins check
        for count in range(1, 6):
            recorder.set_model(Model(name="old", count=count))  # the projection is unchanged
        assert calls == ["old"]
        recorder.set_model(Model(name="new"))
    assert calls == ["old", "new"]
    assert completed(outcomes[0]).status == "completed"


class Box:
    """A value outside the Model, mutated in place, with its own listeners."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.listeners: dict[int, Callable[[], None]] = {}

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        key = id(listener)
        self.listeners[key] = listener
        return lambda: self.listeners.pop(key, None) and None

    def notify(self) -> None:
        for listener in tuple(self.listeners.values()):
            listener()


async def test_a_source_is_re_evaluated_on_every_notification(anyio_backend: str) -> None:
    box = Box()
    calls: list[int] = []

    def holds(items: list[str], request: Rename) -> bool:
        calls.append(len(items))
        return request.name in items

    completion: agentfx.StateCompletion[Model, list[str], Rename] = when(
        source=Source(get=lambda: box.items, subscribe=box.subscribe), predicate=holds, timeout=5
    )
    recorder = recording(Model())
    # A Source needs no host.subscribe: bind accepts a host without one.
    host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=recorder.dispatch)
    runtime = rename_runtime(completion, host)
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Rename, {"name": "x"}))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 1)
        box.notify()
        box.notify()
        assert calls == [0, 0, 0]  # the same list object, evaluated each time
        box.items.append("x")  # mutated in place: == the last value it was compared with
        box.notify()
    assert calls == [0, 0, 0, 1]
    assert completed(outcomes[0]).status == "completed"
    assert box.listeners == {}


async def test_a_throwing_predicate_fails_the_call_never_the_notifier(anyio_backend: str) -> None:
    def predicate(name: str, request: Rename) -> bool:
        if name == "poison":
            raise ValueError("bad predicate")
        return False

    recorder = recording(Model(name="old"))
    log = agentfx.audit_log()
    runtime = rename_runtime(when(projection=lambda m: m.name, predicate=predicate, timeout=5), recorder.host, log)
    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="bad predicate")):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(run, runtime, Rename, {"name": "new"})
            await until(lambda: len(recorder.dispatched) == 1)
            recorder.set_model(Model(name="poison"))  # does not raise here
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "AgentDefect")]
    assert recorder.listener_count == 0


async def test_a_state_completion_times_out_and_can_be_aborted(anyio_backend: str) -> None:
    recorder = recording(Model(name="old"))
    runtime = rename_runtime(by_name(timeout=0.05), recorder.host)
    error = failure(await run(runtime, Rename, {"name": "new"}))
    assert isinstance(error, AgentCompletionTimeoutError)
    assert "did not complete within 0.05s" in error.message
    controller = AbortController()
    outcomes: list[Outcome] = []

    async def call() -> None:
        outcomes.append(await run(runtime, Rename, {"name": "new"}, Invocation(signal=controller.signal)))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(call)
        await until(lambda: len(recorder.dispatched) == 2)
        controller.abort()
    cancelled = failure(outcomes[0])
    assert isinstance(cancelled, AgentCancelledError) and cancelled.dispatched
    assert recorder.listener_count == 0


# --- hooks that answer an awaitable ---------------------------------------------------------------


class Later:
    """A plain function answering a coroutine, as a lambda around an ``async def`` does; keeps each one made."""

    def __init__(self, value: object) -> None:
        self.value = value
        self.made: list[Coroutine[Any, Any, object]] = []

    def __call__(self, *_: object) -> Any:
        async def later() -> object:
            return self.value

        coroutine = later()
        self.made.append(coroutine)
        return coroutine

    def all_closed(self) -> bool:
        """Each coroutine made was closed, so none warns that it was never awaited."""
        return bool(self.made) and all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in self.made)


def test_when_refuses_an_async_source_get_or_subscribe() -> None:
    async def get() -> str:
        return "new"

    async def subscribe_later(listener: Callable[[], None]) -> Callable[[], None]:
        return lambda: None

    subscribe: Any = subscribe_later
    with pytest.raises(ContractError) as refused_get:
        when(source=Source(get=get, subscribe=Box().subscribe), predicate=lambda value, request: bool(value))
    assert str(refused_get.value) == '"Source.get" must answer synchronously; it is a coroutine function'
    with pytest.raises(ContractError) as refused_subscribe:
        when(source=Source(get=lambda: "new", subscribe=subscribe), predicate=lambda value, request: bool(value))
    assert str(refused_subscribe.value) == '"Source.subscribe" must answer synchronously; it is a coroutine function'


@pytest.mark.parametrize("reads", ["projection", "Source.get"])
@pytest.mark.parametrize("truthiness", [False, True], ids=["equality", "truthiness"])
async def test_a_state_read_answering_an_awaitable_is_a_defect(anyio_backend: str, reads: str, truthiness: bool) -> None:
    # Unchecked, a coroutine is truthy (the call "completes" unseen) and equals nothing (it times out).
    read = Later("new")

    def predicate(value: object, request: Rename) -> bool:
        return bool(value) if truthiness else value == request.name

    box = Box()
    recorder = recording(Model(name="old"), update=renaming)
    if reads == "projection":
        completion: agentfx.StateCompletion[Model, Any, Rename] = when(projection=read, predicate=predicate, timeout=0.5)
        host: Host[Model, Any, None] = recorder.host
    else:
        completion = when(source=Source(get=read, subscribe=box.subscribe), predicate=predicate, timeout=0.5)
        host = Host(model=recorder.model, dispatch=recorder.dispatch)
    log = agentfx.audit_log()
    runtime = rename_runtime(completion, host, log)
    with pytest.raises(ContractError) as defect:
        await runtime.messages.dispatch(Rename, {"name": "new"})
    assert str(defect.value) == f'"{reads}" returned an awaitable; it must answer synchronously'
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "AgentDefect")]
    assert recorder.listener_count == 0 and box.listeners == {}
    assert read.all_closed()


@pytest.mark.parametrize("side", ["request_key", "result_key"])
async def test_a_key_answering_an_awaitable_is_a_defect(anyio_backend: str, side: str) -> None:
    # A coroutine is hashable, so unchecked it is a key no result ever equals: every call times out.
    key = Later("same")
    keys: tuple[Callable[[TitleInput, CallInfo], Hashable], Callable[[Any], Hashable]] = (
        (key, result_key) if side == "request_key" else (request_key, key)
    )
    recorder = recording(Model(), responses={Create: answer(Created)})
    log = agentfx.audit_log()
    runtime = create_runtime(Completion(success=Created, correlate_key=keys, timeout=0.5), recorder, audit=log)
    with pytest.raises(ContractError) as defect:
        await runtime.messages.dispatch(Create, {"title": "milk"})
    assert str(defect.value) == f'"{side}" returned an awaitable; it must answer synchronously'
    # The request key is asked before anything is sent; the result key once the result is processed.
    sent = side == "result_key"
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched" if sent else "refused", "AgentDefect")]
    assert len(recorder.dispatched) == (1 if sent else 0)
    assert recorder.listener_count == 0
    assert key.all_closed()


async def test_a_subscribe_answering_an_awaitable_is_a_defect(anyio_backend: str) -> None:
    subscribe = Later(lambda: None)
    completion: agentfx.StateCompletion[Model, str, Rename] = when(
        source=Source(get=lambda: "old", subscribe=subscribe), predicate=lambda value, request: False, timeout=0.5
    )
    recorder = recording(Model())
    log = agentfx.audit_log()
    runtime = rename_runtime(completion, Host(model=recorder.model, dispatch=recorder.dispatch), log)
    with pytest.raises(ContractError) as defect:
        await runtime.messages.dispatch(Rename, {"name": "new"})
    assert str(defect.value) == '"Source.subscribe" returned an awaitable; it must answer synchronously'
    assert recorder.dispatched == []  # no notification could ever have come
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentDefect")]
    assert subscribe.all_closed()


class Disposable:
    """An Rx-style subscription: removed by ``dispose()``, not by calling it."""

    def __init__(self, remove: Callable[[], None]) -> None:
        self.dispose = remove


def not_an_unsubscribe(kind: str, unsubscribe: Callable[[], None]) -> object:
    """What a host mistaking its subscription's answer returns instead of ``unsubscribe``."""
    return None if kind == "None" else Disposable(unsubscribe)


@pytest.mark.parametrize("kind", ["None", "Disposable"])
async def test_an_observe_answering_no_unsubscribe_is_a_defect_before_sending(anyio_backend: str, kind: str) -> None:
    # Unchecked, None left a listener behind on every call, and a Disposable raised a bare
    # TypeError after the Message was sent and its result processed, replacing the success.
    recorder = recording(Model(), responses={Create: answer(Created)})
    observed: list[Callable[[Any], None]] = []

    def observe(listener: Callable[[Any], None]) -> Callable[[], None]:
        observed.append(listener)
        return cast("Callable[[], None]", not_an_unsubscribe(kind, recorder.observe(listener)))

    log = agentfx.audit_log()
    host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=recorder.dispatch, observe=observe)
    runtime = create_runtime(Completion(success=Created, timeout=5), host=host, audit=log)
    refusal = f'"host.observe" returned {"None" if kind == "None" else "a Disposable"}; '
    refusal += "it must return a function that removes its listener"
    for _ in range(3):
        with pytest.raises(ContractError) as defect:
            await runtime.messages.dispatch(Create, {"title": "milk"})
        assert str(defect.value) == refusal
    assert recorder.dispatched == []
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentDefect")] * 3
    # The host holds the one listener nothing can remove; later calls are refused without adding another.
    assert len(observed) == 1 and recorder.listener_count == 1
    # That listener settles nothing: a result arriving later reaches no invocation.
    recorder.emit(Created("milk", "late"))


async def test_an_observe_answering_an_awaitable_is_a_defect_each_time(anyio_backend: str) -> None:
    # A subscription that never ran registered nothing, so the next call asks again.
    recorder = recording(Model(), responses={Create: answer(Created)})
    observe = Later(lambda: None)
    log = agentfx.audit_log()
    host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=recorder.dispatch, observe=observe)
    runtime = create_runtime(Completion(success=Created, timeout=5), host=host, audit=log)
    for _ in range(2):
        with pytest.raises(ContractError) as defect:
            await runtime.messages.dispatch(Create, {"title": "milk"})
        assert str(defect.value) == '"host.observe" returned an awaitable; it must answer synchronously'
    assert len(observe.made) == 2 and observe.all_closed()
    assert recorder.dispatched == []
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentDefect")] * 2


@pytest.mark.parametrize("kind", ["None", "Disposable"])
@pytest.mark.parametrize("hook", ["host.subscribe", "Source.subscribe"])
async def test_a_state_subscription_answering_no_unsubscribe_is_a_defect_before_sending(
    anyio_backend: str, hook: str, kind: str
) -> None:
    recorder = recording(Model(name="old"), update=renaming)
    box = Box()
    predicate_calls: list[str] = []

    def subscribe(listener: Callable[[], None]) -> Callable[[], None]:
        unsubscribe = recorder.subscribe(listener) if hook == "host.subscribe" else box.subscribe(listener)
        return cast("Callable[[], None]", not_an_unsubscribe(kind, unsubscribe))

    def predicate(value: str, request: Rename) -> bool:
        predicate_calls.append(value)
        return value == request.name

    if hook == "host.subscribe":
        completion: agentfx.StateCompletion[Model, str, Rename] = when(
            projection=lambda model: model.name, predicate=predicate, timeout=5
        )
        host: Host[Model, Any, None] = Host(model=recorder.model, dispatch=recorder.dispatch, subscribe=subscribe)
    else:
        source = Source(get=lambda: recorder.model().name, subscribe=subscribe)
        completion = when(source=source, predicate=predicate, timeout=5)
        host = Host(model=recorder.model, dispatch=recorder.dispatch)
    log = agentfx.audit_log()
    runtime = rename_runtime(completion, host, log)
    with pytest.raises(ContractError) as defect:
        await runtime.messages.dispatch(Rename, {"name": "new"})
    it = "None" if kind == "None" else "a Disposable"
    assert str(defect.value) == f'"{hook}" returned {it}; it must return a function that removes its listener'
    assert recorder.dispatched == []
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentDefect")]
    # The listener the host or Source keeps cannot be removed, but it evaluates nothing any more.
    recorder.set_model(Model(name="new"))
    box.notify()
    assert predicate_calls == []


# --- bind-time refusals ---------------------------------------------------------------------------


def test_bind_refuses_message_completions_without_observe() -> None:
    definition = A.define(
        A.expose(
            Message,
            A.variant(Create, "Create", completion=Completion(success=Created)),
            A.variant(Rename, "Rename"),
            A.variant(Bump, "Bump", completion=Completion(success=Created)),
        )
    )
    host: Host[Model, Any, None] = Host(model=Model, dispatch=lambda message: None, subscribe=lambda listener: lambda: None)
    with pytest.raises(ContractError) as refused:
        A.bind(definition, host=host)
    assert str(refused.value) == (
        'This host cannot observe Messages, which "create", "bump" needs to report completion. Supply host.observe.'
    )


def test_bind_refuses_a_model_state_completion_without_subscribe() -> None:
    definition = A.define(A.expose(Message, A.variant(Rename, "Rename", completion=by_name())))
    host: Host[Model, Any, None] = Host(model=Model, dispatch=lambda message: None, observe=lambda listener: lambda: None)
    with pytest.raises(ContractError) as refused:
        A.bind(definition, host=host)
    assert str(refused.value) == (
        'This host cannot subscribe to Model changes, which "rename" needs to report completion. Supply host.subscribe.'
    )


def test_expose_refuses_malformed_message_completions() -> None:
    with pytest.raises(ContractError) as empty:
        A.expose(Message, A.variant(Create, "Create", completion=Completion(success=())))
    assert str(empty.value) == 'Cannot expose "create": its completion contract names no success Message'
    with pytest.raises(ContractError) as both:
        A.expose(Message, A.variant(Create, "Create", completion=Completion(success=Created, failure=(Created,))))
    assert str(both.value) == 'Cannot expose "create": "Created" is both a success and a failure Message'


# --- scale ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("keyed", [False, True], ids=["correlate", "keyed"])
async def test_matching_cost_per_processed_message(anyio_backend: str, keyed: bool) -> None:
    """Keyed matching is one ``result_key`` call per processed result; ``correlate`` is O(pending)."""
    pending = 300
    calls = {"request_key": 0, "result_key": 0, "correlate": 0}

    def counted_request_key(request: TitleInput, call: CallInfo) -> Hashable:
        calls["request_key"] += 1
        return call.message.request

    def counted_result_key(result: Created) -> Hashable:
        calls["result_key"] += 1
        return result.request

    def counted_correlate(request: TitleInput, result: Created, call: CallInfo) -> bool:
        calls["correlate"] += 1
        return result.request == call.message.request

    completion: AnyCompletion = (
        Completion(success=Created, correlate_key=(counted_request_key, counted_result_key), timeout=30)
        if keyed
        else Completion(success=Created, correlate=counted_correlate, timeout=30)
    )
    recorder = recording(Model())
    runtime = create_runtime(completion, recorder)
    outcomes: dict[str, Outcome] = {}

    async def call(invocation: str) -> None:
        outcomes[invocation] = await run(runtime, Create, {"title": "milk"}, Invocation(id=invocation))

    async with anyio.create_task_group() as tasks:
        for i in range(pending):
            tasks.start_soon(call, f"call-{i}")
        await until(lambda: len(recorder.dispatched) == pending)
        assert recorder.listener_count == 1
        registered = dict(calls)
        recorder.emit(Noise())  # a class no completion names costs no hook call at all
        assert calls == registered
        recorder.emit(Created("milk", f"call-{pending - 1}"))
        if keyed:
            assert calls == {"request_key": pending, "result_key": 1, "correlate": 0}
        else:
            assert calls == {"request_key": 0, "result_key": 0, "correlate": pending}
        await until(lambda: len(outcomes) == 1)
        assert completed(outcomes[f"call-{pending - 1}"]).message == Created("milk", f"call-{pending - 1}")
        tasks.cancel_scope.cancel()
    assert recorder.listener_count == 0


@pytest.mark.anyio
@pytest.mark.parametrize("cut_short_by", ["deadline", "abort"])
@pytest.mark.parametrize("correlated", [True, False], ids=["correlated", "uncorrelated"])
async def test_a_completion_seen_while_the_host_is_still_dispatching(cut_short_by: str, correlated: bool) -> None:
    # The host lets update answer, then keeps its dispatch coroutine busy. A
    # correlated completion proves this call's Message reached update, whatever
    # cuts the wait short; an uncorrelated one may belong to another call, so
    # delivery stays unknown.
    recorder: RecordingHost[Model, Any, None] = RecordingHost(Model())
    controller = agentfx.AbortController()

    async def slow_dispatch(message: Any) -> None:
        recorder.dispatch(message)
        recorder.emit(Created(title=message.title, request=message.request))
        if cut_short_by == "abort":
            controller.abort()
        await anyio.sleep_forever()

    host: agentfx.Host[Model, Any, None] = agentfx.Host(model=recorder.model, dispatch=slow_dispatch, observe=recorder.observe)
    log = agentfx.audit_log()
    completion = Completion(success=Created, correlate=by_request if correlated else None, timeout=0.05)
    runtime = A.bind(A.define(A.expose(Create | Created, create_variant(completion))), host=host, audit=log)
    outcome = await run(runtime, Create, {"title": "t"}, agentfx.Invocation(signal=controller.signal))
    assert recorder.listener_count == 0
    if correlated:
        assert isinstance(outcome, Success)
        result = outcome.unwrap()
        assert result.completion is not None and result.completion.status == "completed"
        assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "completed")]
        return
    assert isinstance(outcome, Failure)
    error = outcome.failure()
    if cut_short_by == "abort":
        assert error == agentfx.AgentCancelledError.while_sending("create")
        expected = ("unknown", "AgentCancelledError")
    else:
        assert isinstance(error, agentfx.AgentCompletionTimeoutError)
        assert error.message.startswith('The host was still dispatching "create"')
        expected = ("unknown", "timeout")
    assert [(e.decision, e.outcome) for e in log.entries()] == [expected]


async def test_a_pending_invocation_settled_after_its_wait_was_cancelled_settles_quietly(anyio_backend: str) -> None:
    # The waiter is a bare future on asyncio: a deadline cancels it, and a result
    # arriving before the invocation has unwound must not try to complete it again.
    from agentfx.completion import CallInfo, CompletionOutcome, Pending

    pending = Pending(None, CallInfo(agentfx.Invocation("i1"), None))
    with anyio.move_on_after(0.01) as scope:
        await pending.wait()
    pending.settle(CompletionOutcome("completed"))

    assert scope.cancelled_caught
    assert pending.settled and pending.result() == CompletionOutcome("completed")
    assert await pending.wait() == CompletionOutcome("completed")


async def test_a_pending_invocation_waits_until_settled_from_another_task(anyio_backend: str) -> None:
    from agentfx.completion import CallInfo, CompletionOutcome, Pending

    pending = Pending(None, CallInfo(agentfx.Invocation("i1"), None))
    outcomes: list[CompletionOutcome] = []

    async def wait() -> None:
        outcomes.append(await pending.wait())

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        assert outcomes == []
        pending.settle(CompletionOutcome("failed", "boom"))
        pending.settle(CompletionOutcome("completed"))  # settled at most once
    assert outcomes == [CompletionOutcome("failed", "boom")]
