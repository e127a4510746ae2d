"""The bound runtime: dispatch surface, reads, bind-time checks, audit and defects."""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import anyio
import anyio.lowlevel
import msgspec
import pytest
from opentelemetry import trace
from returns.future import FutureResult
from returns.result import Failure, Result, Success

import agentfx
from agentfx.pipeline import DispatchResult, run_direct
from tests.support import (
    ALICE,
    AVAILABLE,
    AppAgent,
    ClearedSelection,
    DeletedTodo,
    Message,
    Model,
    NoInput,
    ReceivedTodos,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    RequestedRenameTodo,
    Todo,
    TodoAgent,
    User,
    fixed_clock,
    outcome_of,
    recorder,
    run,
)

def audited(**options: Any) -> agentfx.AuditLog:
    return agentfx.audit_log(clock=fixed_clock, principal=lambda user: user.id, **options)


# The dispatch surface


@pytest.mark.anyio
async def test_nothing_runs_until_the_future_is_awaited_and_each_call_is_fresh() -> None:
    rec = recorder()
    log = audited()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    first = runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})
    second = runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})
    assert isinstance(first, FutureResult) and first is not second
    assert (rec.model_reads, rec.principal_calls, rec.dispatched, log.entries()) == (0, 0, [], [])
    one, two = outcome_of(await first), outcome_of(await second)
    assert rec.dispatched == [RequestedCreateTodo("a"), RequestedCreateTodo("a")]
    assert one.unwrap().invocation.id != two.unwrap().invocation.id
    assert rec.model_reads == 2


@pytest.mark.anyio
async def test_call_returns_the_result_or_raises_dispatch_failed() -> None:
    rec = recorder(Model())
    runtime = agentfx.bind(AppAgent, host=rec.host)
    result = await runtime.messages.call(RequestedCreateTodo, {"title": "a"})
    assert result.message == RequestedCreateTodo("a")
    with pytest.raises(agentfx.DispatchFailed) as raised:
        await runtime.messages.call("delete_selected_todo", {})
    assert raised.value.error == agentfx.AgentCapabilityUnavailableError.of("delete_selected_todo", "RequestedDeleteTodo")
    assert str(raised.value) == 'Capability "delete_selected_todo" is not available right now'


@pytest.mark.anyio
async def test_dispatch_unknown_looks_names_up_only() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    ok = outcome_of(await runtime.messages.dispatch_unknown("cleared_selection", {}, agentfx.Invocation(transport="mcp")))
    assert ok.unwrap().invocation.transport == "mcp"
    odd: Any = 42
    unknown = outcome_of(await runtime.messages.dispatch_unknown(odd, {}))
    assert unknown == Failure(agentfx.AgentUnknownCapabilityError.of("42"))
    tag = outcome_of(await runtime.messages.dispatch_unknown("ClearedSelection", {}))
    assert tag == Failure(agentfx.AgentUnknownCapabilityError.of("ClearedSelection"))
    # A class is not a name here, and is named by its tag, as dispatch names a class it does not know.
    cls: Any = ClearedSelection
    by_class = outcome_of(await runtime.messages.dispatch_unknown(cls, {}))
    assert by_class == Failure(agentfx.AgentUnknownCapabilityError.of("ClearedSelection"))
    assert await runtime.messages.attempt(cls, {}) == agentfx.AgentUnknownCapabilityError.of("ClearedSelection")
    assert rec.dispatched == [ClearedSelection()]


@pytest.mark.anyio
async def test_a_non_string_name_never_matches_a_capability_named_by_its_text() -> None:
    rec = recorder()
    contract = agentfx.define(agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear", name="1")))
    runtime = agentfx.bind(contract, host=rec.host)
    number: Any = 1
    refused = outcome_of(await runtime.messages.dispatch_unknown(number, {}))
    assert refused == Failure(agentfx.AgentUnknownCapabilityError.of("1"))
    assert rec.dispatched == []
    assert isinstance(outcome_of(await runtime.messages.dispatch_unknown("1", {})), Success)


@pytest.mark.anyio
async def test_names_that_are_str_subclasses_are_looked_up_by_their_text() -> None:
    import enum

    class Tool(enum.StrEnum):
        CLEAR = "cleared_selection"

    class Named(str, enum.Enum):
        CLEAR = "cleared_selection"

    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    for name in (Tool.CLEAR, Named.CLEAR):
        assert isinstance(outcome_of(await runtime.messages.dispatch_unknown(name, {})), Success)
    assert rec.dispatched == [ClearedSelection(), ClearedSelection()]


@pytest.mark.anyio
async def test_dispatch_result_shape() -> None:
    invocation = agentfx.Invocation(id="call-1")
    result = (await run(agentfx.bind(AppAgent, host=recorder().host), "delete_selected_todo", {}, invocation)).unwrap()
    assert result == DispatchResult(
        "delete_selected_todo",
        "RequestedDeleteTodo",
        RequestedDeleteTodo("t1"),
        invocation,
        agentfx.CompletionOutcome("completed", DeletedTodo("t1")),
    )


# Synchronous reads


def test_list_never_reads_the_model() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    names = [d.name for d in runtime.messages.list()]
    assert names == ["requested_create_todo", "delete_selected_todo", "rename_todo", "cleared_selection"]
    assert runtime.messages.list() == agentfx.messages(AppAgent)
    assert rec.model_reads == 0


@pytest.mark.parametrize(
    "model",
    [Model(), Model(selected="t1"), Model(locked=True), Model(selected="t1", locked=True)],
)
def test_available_reads_the_model_once_in_declaration_order(model: Model) -> None:
    rec = recorder(model)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    names = [d.name for d in runtime.messages.available()]
    assert names == [name for name, holds in AVAILABLE.items() if holds(model)]
    assert rec.model_reads == 1


def test_resources_read_encodes_to_builtins() -> None:
    rec = recorder(Model(todos=(Todo("t1", "Milk"),)))
    runtime = agentfx.bind(AppAgent, host=rec.host)
    assert runtime.resources.read("todos") == Success([{"id": "t1", "title": "Milk"}])
    assert [r.name for r in runtime.resources.list()] == ["todos"]


def test_an_unknown_resource_is_a_failure_value() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    assert runtime.resources.read("nope") == Failure(agentfx.AgentResourceError.of("nope"))
    off_the_wire: Any = ["todos"]
    assert runtime.resources.read(off_the_wire) == Failure(agentfx.AgentResourceError.of("['todos']"))
    assert rec.model_reads == 0


class Leaky(msgspec.Struct, frozen=True):
    count: int


def test_a_projection_breaking_its_schema_raises_without_the_value() -> None:
    defn = agentfx.define(
        agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear")),
        resources=[agentfx.resource("secret", "A count", schema=Leaky, read=lambda m: {"count": "hunter2-secret"})],
        context=agentfx.projection(Leaky, lambda m: {"count": "hunter2-secret"}),
    )
    runtime = agentfx.bind(defn, host=recorder().host)
    with pytest.raises(agentfx.AgentProjectionError) as raised:
        runtime.resources.read("secret")
    assert str(raised.value) == 'The resource "secret" projection does not match its declared schema'
    assert "hunter2" not in repr(raised.value)
    assert raised.value.__cause__ is None and raised.value.__context__ is None
    with pytest.raises(agentfx.AgentProjectionError, match="^The context projection does not match its declared schema$"):
        runtime.context()


def test_context_is_the_encoded_projection_or_none() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder(Model(selected="t1")).host)
    assert runtime.has_context
    assert runtime.context() == {"todos": [], "selected": "t1", "locked": False}
    bare = agentfx.define(agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear")))
    rec = recorder()
    plain = agentfx.bind(bare, host=rec.host)
    assert (plain.has_context, plain.context(), rec.model_reads) == (False, None, 0)


def test_subscribe_uses_host_subscribe_then_observe() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    calls: list[str] = []
    unsubscribe = runtime.subscribe(lambda: calls.append("changed"))
    rec.set_model(Model())
    unsubscribe()
    rec.set_model(Model(selected="x"))
    assert calls == ["changed"]
    assert rec.listener_count == 0

    observing: agentfx.Host[Model, Any, Any] = agentfx.Host(model=rec.model, dispatch=rec.dispatch, observe=rec.observe)
    runtime2 = agentfx.bind(AppAgent, host=observing)
    unsubscribe = runtime2.subscribe(lambda: calls.append("message"))
    rec.emit(ClearedSelection())
    unsubscribe()
    assert calls == ["changed", "message"]

    bare = agentfx.define(agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear")))
    blind = agentfx.bind(bare, host=minimal(rec))
    blind.subscribe(lambda: calls.append("never"))()
    assert calls == ["changed", "message"]


class _Disposable:
    def dispose(self) -> None:
        pass


@pytest.mark.parametrize(("answer", "named"), [(None, "None"), (_Disposable(), "a _Disposable")])
@pytest.mark.parametrize("hook", ["subscribe", "observe"])
def test_subscribe_refuses_a_host_answer_that_cannot_remove_the_listener(answer: object, named: str, hook: str) -> None:
    rec = recorder()
    def listen(_listener: object) -> object:
        return answer

    listening = {hook: listen}
    host: agentfx.Host[Model, Any, Any] = agentfx.Host(model=rec.model, dispatch=rec.dispatch, **cast(Any, listening))
    runtime = agentfx.bind(agentfx.define(agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear"))), host=host)
    with pytest.raises(agentfx.ContractError) as info:
        runtime.subscribe(lambda: None)
    assert str(info.value) == f'"host.{hook}" returned {named}; it must return a function that removes its listener'


# Bind-time checks


def minimal(rec: Any) -> agentfx.Host[Model, Any, Any]:
    return agentfx.Host(model=rec.model, dispatch=rec.dispatch)


def _always(value: object, request: object) -> bool:
    return True


def _identity(model: Model) -> Model:
    return model


def _completing(*names: str, state: bool = False, source: bool = False) -> agentfx.Definition[Any, Any]:
    def completion() -> Any:
        if source:
            value: agentfx.Source[int] = agentfx.Source(lambda: 0, lambda listener: lambda: None)
            from_source: agentfx.StateCompletion[Model, int, object] = agentfx.when(source=value, predicate=_always)
            return from_source
        if state:
            return agentfx.when(projection=_identity, predicate=_always)
        return agentfx.Completion[Any, Any](success=DeletedTodo)

    classes = [RequestedCreateTodo, RequestedDeleteTodo, RequestedRenameTodo]
    return agentfx.define(
        agentfx.expose(
            Message,
            *(agentfx.variant(cls, "x", name=name, completion=completion()) for cls, name in zip(classes, names, strict=False)),
            agentfx.variant(ClearedSelection, "Clear"),
        )
    )


def test_bind_refuses_message_completion_without_observe_naming_each() -> None:
    rec = recorder()
    host: agentfx.Host[Model, Any, Any] = agentfx.Host(model=rec.model, dispatch=rec.dispatch, subscribe=rec.subscribe)
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(_completing("create_todo", "delete_todo"), host=host)
    assert str(raised.value) == (
        'This host cannot observe Messages, which "create_todo", "delete_todo" needs to report completion. '
        "Supply host.observe."
    )
    with pytest.raises(agentfx.ContractError, match='^This host cannot observe Messages, which "create_todo" needs'):
        agentfx.bind(_completing("create_todo"), host=host)


def test_bind_refuses_state_completion_without_subscribe() -> None:
    rec = recorder()
    host: agentfx.Host[Model, Any, Any] = agentfx.Host(model=rec.model, dispatch=rec.dispatch, observe=rec.observe)
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(_completing("rename", state=True), host=host)
    assert str(raised.value) == (
        'This host cannot subscribe to Model changes, which "rename" needs to report completion. Supply host.subscribe.'
    )


def test_a_source_state_completion_needs_no_subscribe() -> None:
    rec = recorder()
    runtime = agentfx.bind(_completing("rename", source=True), host=minimal(rec))
    assert [d.name for d in runtime.messages.list()][0] == "rename"


def test_a_contract_without_completions_binds_to_a_minimal_host() -> None:
    rec = recorder()
    agentfx.bind(_completing(), host=minimal(rec))


def test_bind_refuses_what_expose_made_without_define() -> None:
    rec = recorder()
    exposed = agentfx.expose(Message, agentfx.variant(ClearedSelection, "Clear"))
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(exposed, host=minimal(rec))  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == (
        'bind() takes the result of define(...) as "definition", got the result of expose(...); '
        "write define(expose(Message, variant(...), ...))"
    )
    # The typed builder's bind is the same check.
    with pytest.raises(agentfx.ContractError, match=r'^bind\(\) takes the result of define\(\.\.\.\) as "definition", got None;'):
        agentfx.for_model(Model).bind(None, host=minimal(rec))  # pyright: ignore[reportArgumentType]


def test_bind_refuses_a_host_that_every_call_would_fail_on() -> None:
    rec = recorder()
    ok: dict[str, Any] = {"model": rec.model, "dispatch": rec.dispatch, "observe": rec.observe}
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(_completing(), host=cast(Any, "x"))
    assert str(raised.value) == "bind(host=...) takes an agentfx.Host(model=..., dispatch=...); got str"

    async def principal(invocation: agentfx.Invocation) -> str:
        return "ada"

    wrong: dict[str, tuple[Any, str]] = {
        "model": (Model(), '"host.model" must be a function taking no arguments; it is a Model'),
        "dispatch": (None, '"host.dispatch" must be a function taking one argument (the Message); it is a NoneType'),
        "principal": ("ada", '"host.principal" must be a function taking one argument (the Invocation); it is a str'),
        "observe": (True, '"host.observe" must be a function taking one argument (listener); it is a bool'),
        "subscribe": (3, '"host.subscribe" must be a function taking one argument (listener); it is an int'),
    }
    for field, (value, message) in wrong.items():
        with pytest.raises(agentfx.ContractError) as raised:
            agentfx.bind(_completing("create_todo"), host=agentfx.Host(**{**ok, field: value}))
        assert str(raised.value) == f"Cannot bind this host: {message}"
    # Called as they will be: the Model with nothing, the principal synchronously.
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(_completing(), host=agentfx.Host(model=cast(Any, _identity), dispatch=rec.dispatch))
    assert str(raised.value) == 'Cannot bind this host: "host.model" must take no arguments; it takes (model)'
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(_completing(), host=agentfx.Host(model=rec.model, dispatch=rec.dispatch, principal=principal))
    assert str(raised.value) == 'Cannot bind this host: "host.principal" must answer synchronously; it is a coroutine function'
    # An async dispatch is a host's right.
    agentfx.bind(_completing(), host=recorder(async_dispatch=True).host)


def test_bind_refuses_an_audit_or_a_tracer_class_rather_than_an_instance() -> None:
    rec = recorder()
    with pytest.raises(agentfx.ContractError) as audit:
        agentfx.bind(_completing(), host=minimal(rec), audit=cast(Any, agentfx.AuditLog))
    assert str(audit.value) == (
        "bind(audit=...) takes an AuditSink, an object with a record(AuditRecord) method; "
        "got the class AuditLog, not an instance of it (agentfx.audit_log() makes one)"
    )
    tracer = type(trace.get_tracer("tests"))
    with pytest.raises(agentfx.ContractError) as raised:
        agentfx.bind(_completing(), host=minimal(rec), tracer=tracer)
    assert str(raised.value) == (
        f"bind(tracer=...) takes an OpenTelemetry Tracer (trace.get_tracer(...)); got the class {tracer.__name__}, "
        "not an instance of it"
    )


def test_bind_refuses_an_audit_or_a_tracer_that_every_dispatch_would_fail_on() -> None:
    rec = recorder()
    sent: list[object] = []
    with pytest.raises(agentfx.ContractError) as audit:
        agentfx.bind(_completing(), host=minimal(rec), audit=sent.append)  # pyright: ignore[reportArgumentType]
    assert str(audit.value) == (
        "bind(audit=...) takes an AuditSink, an object with a record(AuditRecord) method; "
        "got builtin_function_or_method"
    )
    with pytest.raises(agentfx.ContractError) as tracer:
        agentfx.bind(_completing(), host=minimal(rec), tracer=object())
    assert str(tracer.value) == "bind(tracer=...) takes an OpenTelemetry Tracer (trace.get_tracer(...)); got object"
    # What they are for passes.
    agentfx.bind(_completing(), host=minimal(rec), audit=agentfx.audit_log(), tracer=trace.get_tracer("tests"))


def test_bind_refuses_an_audit_sink_whose_record_is_async() -> None:
    rec = recorder()

    class AsyncSink:
        async def record(self, record: agentfx.AuditRecord, /) -> None:
            return None

    class AsyncRecord:
        async def __call__(self, record: agentfx.AuditRecord, /) -> None:
            return None

    class Held:
        record = AsyncRecord()

    for sink, why in ((AsyncSink(), "it is a coroutine function"), (Held(), "its __call__ is a coroutine function")):
        with pytest.raises(agentfx.ContractError) as raised:
            agentfx.bind(_completing(), host=minimal(rec), audit=cast(Any, sink))
        assert str(raised.value) == f'Cannot bind this audit sink: "audit.record" must answer synchronously; {why}'


@pytest.mark.anyio
async def test_a_sink_whose_record_returns_an_awaitable_has_it_closed_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    closed: list[bool] = []

    class Later:
        def __await__(self) -> Any:
            yield None

        def close(self) -> None:
            closed.append(True)

    class Deferring:
        # A plain function handing back an awaitable: bind cannot tell.
        def record(self, record: agentfx.AuditRecord, /) -> Any:
            return Later()

    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=Deferring())
    with caplog.at_level(logging.ERROR, logger="agentfx.audit"):
        ok = await run(runtime, RequestedCreateTodo, {"title": "secret title"})
        refused = await run(runtime, ReceivedTodos, {})
    assert ok.unwrap().message == RequestedCreateTodo("secret title")
    assert refused == Failure(agentfx.AgentUnknownCapabilityError.of("ReceivedTodos"))
    assert closed == [True, True]
    [logged] = [r for r in caplog.records if "awaitable" in r.getMessage()]
    assert logged.getMessage() == (
        "audit sink Deferring returned an awaitable from record; it must answer synchronously. "
        "It was closed unawaited and its records are lost"
    )
    assert "secret" not in caplog.text


@pytest.mark.anyio
async def test_a_coroutine_a_sink_returns_is_closed_so_it_never_warns() -> None:
    got: list[agentfx.AuditRecord] = []

    async def later(record: agentfx.AuditRecord) -> None:
        got.append(record)

    class Deferring:
        def record(self, record: agentfx.AuditRecord, /) -> Any:
            return later(record)

    runtime = agentfx.bind(AppAgent, host=recorder().host, audit=Deferring())
    await run(runtime, RequestedCreateTodo, {"title": "a"})
    import gc

    gc.collect()  # an unclosed coroutine would warn here, and warnings are errors
    assert got == []


# Async host.dispatch and aborts mid-send


@pytest.mark.anyio
async def test_an_async_host_dispatch_is_awaited() -> None:
    rec = recorder(async_dispatch=True)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    assert (await run(runtime, RequestedCreateTodo, {"title": "a"})).unwrap().message == RequestedCreateTodo("a")
    assert rec.dispatched == [RequestedCreateTodo("a")]
    done = (await run(runtime, "delete_selected_todo", {})).unwrap()
    assert done.completion == agentfx.CompletionOutcome("completed", DeletedTodo("t1"))


@pytest.mark.anyio
async def test_an_abort_during_a_slow_host_dispatch_without_completion_settles_at_once() -> None:
    rec = recorder()
    log = audited()
    started = anyio.Event()

    async def slow(message: object) -> None:
        started.set()
        await anyio.sleep_forever()

    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=rec.model, dispatch=slow, principal=rec.principal, observe=rec.observe)
    runtime = agentfx.bind(AppAgent, host=host, audit=log)
    controller = agentfx.AbortController()
    outcomes: list[Result[DispatchResult, agentfx.DispatchError]] = []

    async def go() -> None:
        invocation = agentfx.Invocation(id="c1", signal=controller.signal)
        outcomes.append(await run(runtime, RequestedCreateTodo, {"title": "a"}, invocation))

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await started.wait()
        controller.abort()
    [outcome] = outcomes
    error = outcome.failure()
    assert error == agentfx.AgentCancelledError.while_sending("requested_create_todo")
    assert error.message == (
        'Invocation of "requested_create_todo" was cancelled while the host was still dispatching it. '
        "Whether the Message reached update is unknown."
    )
    [entry] = log.entries()
    assert (entry.decision, entry.outcome) == ("unknown", "AgentCancelledError")


# Audit


@pytest.mark.anyio
async def test_audit_records_every_decision() -> None:
    log = audited(include_input=True)
    runtime = agentfx.bind(AppAgent, host=recorder(Model(selected="t1"), principal=ALICE).host, audit=log)
    controller = agentfx.AbortController()
    controller.abort()
    await run(runtime, RequestedCreateTodo, {"title": "a"}, agentfx.Invocation(id="i1"))
    await run(runtime, ReceivedTodos, {"todos": []}, agentfx.Invocation(id="i2"))
    await run(runtime, RequestedCreateTodo, {"title": "a"}, agentfx.Invocation(id="i3", signal=controller.signal))
    await run(runtime, RequestedCreateTodo, {"title": 3}, agentfx.Invocation(id="i4", transport="mcp"))
    await run(runtime, "rename_todo", {"id": "t1", "title": "b"}, agentfx.Invocation(id="i5"))
    await run(runtime, "delete_selected_todo", {}, agentfx.Invocation(id="i6"))
    await run(runtime, "delete_selected_todo", {}, agentfx.Invocation(id="i7"))
    rows = [
        (e.invocation, e.transport, e.capability, e.tag, e.principal, e.decision, e.outcome, e.input, e.at)
        for e in log.entries()
    ]
    unset = msgspec.UNSET
    assert rows == [
        ("i1", "in-app", "requested_create_todo", "RequestedCreateTodo", "alice", "dispatched", "dispatched", {"title": "a"}, 1000.0),
        # Who tried is recorded for every refusal, those before step 6 included.
        ("i2", "in-app", "ReceivedTodos", unset, "alice", "refused", "AgentUnknownCapabilityError", {"todos": []}, 1000.0),
        ("i3", "in-app", "requested_create_todo", "RequestedCreateTodo", "alice", "refused", "AgentCancelledError", {"title": "a"}, 1000.0),
        ("i4", "mcp", "requested_create_todo", "RequestedCreateTodo", "alice", "refused", "AgentInvalidInputError", {"title": 3}, 1000.0),
        ("i5", "in-app", "rename_todo", "RequestedRenameTodo", "alice", "refused", "AgentAuthorizationError", {"id": "t1", "title": "b"}, 1000.0),
        ("i6", "in-app", "delete_selected_todo", "RequestedDeleteTodo", "alice", "dispatched", "completed", {}, 1000.0),
        ("i7", "in-app", "delete_selected_todo", "RequestedDeleteTodo", "alice", "refused", "AgentCapabilityUnavailableError", {}, 1000.0),
    ]


@pytest.mark.anyio
async def test_audit_records_failed_and_timeout_outcomes() -> None:
    log = audited()
    runtime = agentfx.bind(AppAgent, host=recorder(Model(selected="keep")).host, audit=log)
    await run(runtime, "delete_selected_todo", {})
    defn = agentfx.define(
        agentfx.expose(
            Message, agentfx.variant(RequestedDeleteTodo, "Delete", completion=agentfx.Completion(DeletedTodo, timeout=0.02))
        )
    )
    await run(agentfx.bind(defn, host=recorder(responses={}).host, audit=log), RequestedDeleteTodo, {"id": "x"})

    async def stuck(message: object) -> None:
        await anyio.sleep_forever()

    rec = recorder()
    host: agentfx.Host[Model, Any, Any] = agentfx.Host(model=rec.model, dispatch=stuck, observe=rec.observe)
    await run(agentfx.bind(defn, host=host, audit=log), RequestedDeleteTodo, {"id": "x"})
    assert [(e.decision, e.outcome) for e in log.entries()] == [
        ("dispatched", "failed"),
        ("dispatched", "timeout"),
        ("unknown", "timeout"),
    ]


@pytest.mark.anyio
async def test_the_audited_input_is_what_was_sent_though_the_caller_changes_it_while_the_call_waits() -> None:
    rec = recorder()
    log = audited(include_input=True)
    started, release = anyio.Event(), anyio.Event()

    async def slow(message: object) -> None:
        started.set()
        await release.wait()

    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=rec.model, dispatch=slow, principal=rec.principal, observe=rec.observe)
    runtime = agentfx.bind(AppAgent, host=host, audit=log)
    payload: dict[str, object] = {"title": "a"}
    outcomes: list[Result[DispatchResult, agentfx.DispatchError]] = []

    async def go() -> None:
        outcomes.append(await run(runtime, RequestedCreateTodo, payload))

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await started.wait()
        payload["title"] = "changed"
        payload["injected"] = "later"
        release.set()
    assert outcomes[0].unwrap().message == RequestedCreateTodo("a")
    [entry] = log.entries()
    assert entry.input == {"title": "a"}


class Keeping:
    """A sink that keeps what it is handed, saying whether it keeps inputs."""

    def __init__(self, records_input: bool | None) -> None:
        if records_input is not None:
            self.records_input = records_input
        self.records: list[agentfx.AuditRecord] = []

    def record(self, record: agentfx.AuditRecord, /) -> None:
        self.records.append(record)


@pytest.mark.anyio
async def test_only_a_sink_that_keeps_inputs_is_handed_a_snapshot_taken_at_the_start() -> None:
    payload = {"title": "a", 1: "one"}
    for says, snapshot in ((None, False), (False, False), (True, True)):
        sink = Keeping(says)
        runtime = agentfx.bind(AppAgent, host=recorder().host, audit=sink)
        await run(runtime, RequestedCreateTodo, payload)
        await run(runtime, "no_such", payload)
        for record in sink.records:
            assert record.input_snapshot is snapshot
            if snapshot:
                assert record.input == {"title": "a", "1": "one"} and record.input is not payload
            else:
                assert record.input is payload
    assert agentfx.audit_log(include_input=True).records_input
    assert not agentfx.audit_log().records_input


@pytest.mark.anyio
async def test_no_input_snapshot_is_taken_for_a_log_that_keeps_no_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfx import runtime as runtime_module

    def forbidden(value: object) -> object:
        raise AssertionError("an input snapshot nobody keeps")

    monkeypatch.setattr(runtime_module, "snapshot_input", forbidden)
    log = audited()
    runtime = agentfx.bind(AppAgent, host=recorder().host, audit=log)
    await run(runtime, RequestedCreateTodo, {"title": "a"})
    await run(agentfx.bind(AppAgent, host=recorder().host), RequestedCreateTodo, {"title": "a"})
    assert [entry.outcome for entry in log.entries()] == ["dispatched"]


class Broken:
    def __init__(self) -> None:
        self.calls = 0

    def record(self, record: agentfx.AuditRecord, /) -> None:
        self.calls += 1
        raise OSError("disk full")


@pytest.mark.anyio
async def test_a_throwing_audit_sink_never_changes_the_outcome(caplog: pytest.LogCaptureFixture) -> None:
    sink = Broken()
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=sink)
    with caplog.at_level(logging.CRITICAL, logger="agentfx.audit"):
        ok = await run(runtime, RequestedCreateTodo, {"title": "a"})
        refused = await run(runtime, ReceivedTodos, {})
    assert ok.unwrap().message == RequestedCreateTodo("a")
    assert refused == Failure(agentfx.AgentUnknownCapabilityError.of("ReceivedTodos"))
    assert sink.calls == 2


# Defects


def _hooked(**hooks: Any) -> agentfx.Definition[Any, Any]:
    return agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo", input=NoInput, **hooks),
        )
    )


def _to_message(_: NoInput, ctx: agentfx.InvocationContext[Any, Any]) -> RequestedDeleteTodo:
    return RequestedDeleteTodo("t1")


def _clears(_: NoInput, ctx: agentfx.InvocationContext[Any, Any]) -> Any:
    return ClearedSelection()


def _boom(*args: object) -> Any:
    raise RuntimeError("hook failed")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "hooks",
    [
        {"available": _boom, "to_message": _to_message},
        {"authorize": _boom, "to_message": _to_message},
        {"to_message": _boom},
    ],
    ids=["available", "authorize", "to_message"],
)
@pytest.mark.parametrize("composed", [False, True], ids=["direct", "composed"])
async def test_a_raising_hook_propagates_after_audit_records_a_defect(hooks: dict[str, Any], composed: bool) -> None:
    rec = recorder()
    log = audited()
    runtime = agentfx.bind(_hooked(**hooks), host=rec.host, audit=log)
    with pytest.raises(RuntimeError, match="hook failed"):
        if composed:
            await runtime._dispatch_composed(RequestedDeleteTodo, {})
        else:
            await runtime.messages.dispatch(RequestedDeleteTodo, {})
    [entry] = log.entries()
    assert (entry.capability, entry.decision, entry.outcome) == ("delete_todo", "refused", "AgentDefect")
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_a_raising_principal_resolver_is_a_defect() -> None:
    rec = recorder()
    log = audited()
    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=rec.model, dispatch=rec.dispatch, principal=_boom, observe=rec.observe)
    runtime = agentfx.bind(AppAgent, host=host, audit=log)
    with pytest.raises(RuntimeError, match="hook failed"):
        await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})
    [entry] = log.entries()
    assert (entry.decision, entry.outcome, entry.principal) == ("refused", "AgentDefect", None)


@pytest.mark.anyio
async def test_to_message_making_another_message_is_audited_as_a_defect() -> None:
    rec = recorder()
    log = audited()
    runtime = agentfx.bind(_hooked(to_message=_clears), host=rec.host, audit=log)
    with pytest.raises(agentfx.ContractError, match='made a "ClearedSelection" Message, but is exposed as "RequestedDeleteTodo"'):
        await runtime.messages.dispatch("delete_todo", {})
    [entry] = log.entries()
    assert (entry.decision, entry.outcome) == ("refused", "AgentDefect")
    assert rec.dispatched == []


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True])
async def test_a_raising_host_dispatch_is_a_defect_with_unknown_decision(is_async: bool) -> None:
    rec = recorder()
    log = audited()

    async def later(message: object) -> None:
        await anyio.lowlevel.checkpoint()
        raise ConnectionError("host down")

    def now(message: object) -> None:
        raise ConnectionError("host down")

    send: Callable[[object], object] = later if is_async else now
    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=rec.model, dispatch=send, principal=rec.principal, observe=rec.observe)
    runtime = agentfx.bind(AppAgent, host=host, audit=log)
    with pytest.raises(ConnectionError):
        await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})
    with pytest.raises(ConnectionError):
        await runtime.messages.dispatch("delete_selected_todo", {})
    with pytest.raises(ConnectionError):
        await runtime._dispatch_composed("delete_selected_todo", {})
    assert [(e.decision, e.outcome) for e in log.entries()] == [("unknown", "AgentDefect")] * 3
    assert rec.listener_count == 0


@pytest.mark.anyio
async def test_outer_cancellation_propagates_and_is_audited_interrupted() -> None:
    log = audited()
    started = anyio.Event()

    async def authorize(req: Any) -> bool:
        started.set()
        await anyio.sleep_forever()
        return True

    rec = recorder()
    runtime = agentfx.bind(_hooked(to_message=_to_message, authorize=authorize), host=rec.host, audit=log)
    reached_end: list[bool] = []

    async def go() -> None:
        await runtime.messages.dispatch("delete_todo", {})
        reached_end.append(True)

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await started.wait()
        group.cancel_scope.cancel()
    assert reached_end == []
    [entry] = log.entries()
    assert (entry.decision, entry.outcome) == ("refused", "interrupted")
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_outer_cancellation_while_waiting_for_completion_is_interrupted_after_dispatch() -> None:
    log = audited()
    rec = recorder(responses={})
    defn = agentfx.define(
        agentfx.expose(Message, agentfx.variant(RequestedDeleteTodo, "Delete", completion=agentfx.Completion(DeletedTodo)))
    )
    runtime = agentfx.bind(defn, host=rec.host, audit=log)
    with anyio.move_on_after(0.05) as scope:
        await runtime.messages.dispatch(RequestedDeleteTodo, {"id": "x"})
    assert scope.cancelled_caught
    [entry] = log.entries()
    assert (entry.decision, entry.outcome) == ("dispatched", "interrupted")
    assert rec.listener_count == 0


# Who tried (§9): the principal of a refusal before step 6


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("target", "payload", "model", "outcome"),
    [
        ("nope", {}, Model(), "AgentUnknownCapabilityError"),
        ("delete_selected_todo", {}, Model(), "AgentCapabilityUnavailableError"),
        (RequestedCreateTodo, {"title": 3}, Model(), "AgentInvalidInputError"),
    ],
)
async def test_a_refusal_before_step_6_records_who_tried(target: Any, payload: object, model: Model, outcome: str) -> None:
    rec = recorder(model, principal=ALICE)
    log = audited()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    refused = await run(runtime, target, payload)
    assert isinstance(refused, Failure)
    [entry] = log.entries()
    assert (entry.principal, entry.decision, entry.outcome) == ("alice", "refused", outcome)
    # Resolved once, for the record only, after the pipeline had refused.
    assert rec.principal_calls == 1


@pytest.mark.anyio
async def test_who_tried_is_resolved_without_reading_the_model() -> None:
    rec = recorder(principal=ALICE)
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=audited())
    await run(runtime, "nope", {})
    assert (rec.model_reads, rec.principal_calls) == (0, 1)


@pytest.mark.anyio
async def test_a_refusal_after_step_6_resolves_the_principal_only_once() -> None:
    rec = recorder(principal=User("bob", can_delete=False))
    log = audited()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    await run(runtime, "delete_selected_todo", {})
    [entry] = log.entries()
    assert (entry.principal, entry.outcome, rec.principal_calls) == ("bob", "AgentAuthorizationError", 1)


@pytest.mark.anyio
async def test_without_a_projection_no_principal_is_resolved_for_a_refusal() -> None:
    rec = recorder(principal=ALICE)
    log = agentfx.audit_log(clock=fixed_clock)
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    await run(runtime, "nope", {})
    [entry] = log.entries()
    assert (entry.principal, rec.principal_calls) == (msgspec.UNSET, 0)
    assert not log.records_principal


@pytest.mark.anyio
async def test_a_sink_gets_the_raw_principal_of_a_refusal_unless_it_declines() -> None:
    class Sink:
        def __init__(self) -> None:
            self.records: list[agentfx.AuditRecord] = []

        def record(self, record: agentfx.AuditRecord, /) -> None:
            self.records.append(record)

    class Declining(Sink):
        records_principal = False

    rec = recorder(principal=ALICE)
    sink = Sink()
    await run(agentfx.bind(AppAgent, host=rec.host, audit=sink), "nope", {})
    [record] = sink.records
    assert (record.principal, record.principal_resolved) == (ALICE, True)
    declining = Declining()
    await run(agentfx.bind(AppAgent, host=rec.host, audit=declining), "nope", {})
    [record] = declining.records
    assert (record.principal, record.principal_resolved, rec.principal_calls) == (None, False, 1)


@pytest.mark.anyio
async def test_a_resolver_that_raises_for_the_record_leaves_the_refusal_standing(caplog: pytest.LogCaptureFixture) -> None:
    rec = recorder(principal=ALICE)
    log = audited()

    def resolve(invocation: agentfx.Invocation) -> User:
        raise RuntimeError("token store down")

    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=rec.model, dispatch=rec.dispatch, principal=resolve, observe=rec.observe)
    runtime = agentfx.bind(AppAgent, host=host, audit=log)
    refused = await run(runtime, "nope", {})
    assert refused == Failure(agentfx.AgentUnknownCapabilityError.of("nope"))
    [entry] = log.entries()
    assert (entry.principal, entry.outcome) == (None, "AgentUnknownCapabilityError")
    assert any("principal of a refused call" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_a_defect_before_step_6_resolves_no_principal() -> None:
    rec = recorder(principal=ALICE)
    log = audited()

    def broken(model: Model) -> bool:
        raise RuntimeError("boom")

    defn = TodoAgent.define(TodoAgent.expose(Message, TodoAgent.variant(ClearedSelection, "Clear", available=broken)))
    runtime = agentfx.bind(defn, host=rec.host, audit=log)
    with pytest.raises(RuntimeError):
        await run(runtime, ClearedSelection, {})
    [entry] = log.entries()
    assert (entry.principal, entry.outcome, rec.principal_calls) == (None, "AgentDefect", 0)


# on_dispatched: the adapter's cue that the host accepted the Message


@pytest.mark.anyio
@pytest.mark.parametrize("async_dispatch", [False, True])
async def test_on_dispatched_is_told_once_when_the_host_accepted(async_dispatch: bool) -> None:
    rec = recorder(principal=ALICE, async_dispatch=async_dispatch)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    told: list[int] = []
    outcome = outcome_of(
        await runtime.messages.dispatch_unknown(
            "delete_selected_todo", {}, on_dispatched=lambda: told.append(len(rec.dispatched))
        )
    )
    # After the host took the Message, before the completion settled the call.
    assert told == [1]
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("completed", DeletedTodo("t1"))
    told.clear()
    await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, on_dispatched=lambda: told.append(0))
    assert told == [0]


@pytest.mark.anyio
async def test_on_dispatched_is_never_told_of_a_refusal_or_a_host_that_raised() -> None:
    told: list[str] = []
    rec = recorder(Model(), principal=ALICE)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    await runtime.messages.dispatch_unknown("delete_selected_todo", {}, on_dispatched=lambda: told.append("x"))
    await runtime.messages.dispatch_unknown("nope", {}, on_dispatched=lambda: told.append("x"))

    def broken(message: object) -> None:
        raise RuntimeError("down")

    host: agentfx.Host[Model, Any, User] = agentfx.Host(model=rec.model, dispatch=broken, observe=rec.observe)
    with pytest.raises(RuntimeError):
        await agentfx.bind(AppAgent, host=host).messages.dispatch_unknown(
            "requested_create_todo", {"title": "a"}, on_dispatched=lambda: told.append("x")
        )
    assert told == []


@pytest.mark.anyio
async def test_an_on_dispatched_that_raises_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    rec = recorder(principal=ALICE)
    log = audited()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)

    def boom() -> None:
        raise RuntimeError("adapter bug")

    outcome = outcome_of(await runtime.messages.dispatch_unknown("delete_selected_todo", {}, on_dispatched=boom))
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("completed", DeletedTodo("t1"))
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "completed")]
    assert any("on_dispatched callback raised" in r.getMessage() for r in caplog.records)


@pytest.mark.anyio
async def test_a_refusal_built_at_bind_comes_back_in_one_shared_container_equal_to_a_fresh_one() -> None:
    class Ping(msgspec.Struct, tag=True):
        reason: str = ""

    def verdict(request: agentfx.AuthorizationRequest[Any, Ping, Any]) -> bool | agentfx.Refusal:
        return agentfx.Refusal(request.input.reason) if request.input.reason else False

    sent: list[object] = []
    contract = agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping", authorize=verdict)))
    runtime = agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=sent.append))
    executor = runtime._executor
    prebuilt = executor.bound.unauthorized["ping"]

    first = await executor.run(Ping, {}, None, run_direct)
    again = await executor.run(Ping, {}, None, run_direct)
    assert first is again and first == Failure(prebuilt)
    assert outcome_of(await runtime.messages.dispatch(Ping, {})) == Failure(prebuilt)
    # A refusal made for this call (its own reason) is never handed a container built for another.
    reasoned = await executor.run(Ping, {"reason": "closed today"}, None, run_direct)
    assert reasoned == Failure(agentfx.AgentAuthorizationError.of("ping", "Ping", "closed today"))
    assert sent == []


@pytest.mark.anyio
async def test_attempt_is_dispatch_unknown_unwrapped_with_the_same_audit_and_cue() -> None:
    told: list[str] = []
    outcomes: dict[str, list[object]] = {}
    logs: dict[str, agentfx.AuditLog] = {}
    sent: dict[str, list[object]] = {}
    calls: list[tuple[Any, dict[str, object]]] = [
        ("cleared_selection", {}),
        ("requested_create_todo", {"title": "milk"}),
        ("requested_create_todo", {"title": 3}),
        ("ClearedSelection", {}),
        (42, {}),
    ]
    for way in ("attempt", "dispatch_unknown"):
        rec = recorder(principal=ALICE)
        logs[way] = log = audited()
        runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
        got: list[object] = []
        for name, payload in calls:
            if way == "attempt":
                got.append(await runtime.messages.attempt(name, payload, on_dispatched=lambda: told.append(way)))
            else:
                io = await runtime.messages.dispatch_unknown(name, payload, on_dispatched=lambda: told.append(way))
                result = outcome_of(io)
                got.append(result.unwrap() if isinstance(result, Success) else result.failure())
        outcomes[way] = got
        sent[way] = rec.dispatched

    def comparable(value: object) -> object:
        # Invocation ids are fresh per call; everything else must agree.
        return msgspec.structs.replace(value, invocation=agentfx.Invocation()) if isinstance(value, DispatchResult) else value

    assert [comparable(v) for v in outcomes["attempt"]] == [comparable(v) for v in outcomes["dispatch_unknown"]]
    assert isinstance(outcomes["attempt"][0], DispatchResult)
    assert outcomes["attempt"][2] == agentfx.AgentInvalidInputError.of(
        "requested_create_todo", "RequestedCreateTodo", "$.title", problem='"title" must be a string'
    )
    assert sent["attempt"] == sent["dispatch_unknown"]
    assert [(e.capability, e.decision, e.outcome) for e in logs["attempt"].entries()] == [
        (e.capability, e.decision, e.outcome) for e in logs["dispatch_unknown"].entries()
    ]
    assert told.count("attempt") == told.count("dispatch_unknown") == 2


# Invalid-input refusals kept for reuse


class _Level(msgspec.Struct, tag=True):
    level: str = "low"
    priority: int = 0


def _level_runtime(log: agentfx.AuditLog | None = None) -> tuple[list[object], agentfx.AgentRuntime[None, None]]:
    sent: list[object] = []
    contract = agentfx.define(agentfx.expose(_Level, agentfx.variant(_Level, "Set the level", name="set_level")))
    return sent, agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=sent.append), audit=log)


def _invalid(path: str, problem: str) -> agentfx.AgentInvalidInputError:
    return agentfx.AgentInvalidInputError.of("set_level", "_Level", path, problem=problem)


@pytest.mark.anyio
async def test_a_repeated_invalid_input_is_the_same_refusal_in_one_shared_container() -> None:
    sent, runtime = _level_runtime()
    executor = runtime._executor
    refused = [await executor.run(_Level, {"priority": "high"}, None, run_direct) for _ in range(2)]

    assert refused[0] is refused[1]
    assert refused[0] == Failure(_invalid("$.priority", '"priority" must be an integer'))
    error = refused[0].failure()
    assert isinstance(error, agentfx.AgentInvalidInputError)
    assert isinstance(error.cause, msgspec.ValidationError) and error.cause.__traceback__ is None
    # A problem the codec finds itself is worded the same, each time afresh.
    undeclared = [await executor.run(_Level, {"colour": "red"}, None, run_direct) for _ in range(2)]
    assert undeclared[0] == undeclared[1] and undeclared[0] is not undeclared[1]
    assert (await executor.run(_Level, {"priority": 1}, None, run_direct)).unwrap().message == _Level(priority=1)
    assert sent == [_Level(priority=1)]


@pytest.mark.anyio
async def test_past_its_bound_or_for_a_long_text_each_invalid_input_refusal_is_made_afresh_and_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentfx import pipeline

    monkeypatch.setattr(pipeline, "INVALID_MAX", 3)
    log = audited()
    sent, runtime = _level_runtime(log)
    executor = runtime._executor
    # Each is its own decoder text.
    payloads: list[dict[str, object]] = [
        {"level": 1},
        {"level": None},
        {"priority": "x"},
        {"priority": None},
        {"level": [1]},
        {"priority": [2]},
    ]
    shared: list[bool] = []
    for payload in payloads:
        first = await executor.run(_Level, payload, None, run_direct)
        again = await executor.run(_Level, payload, None, run_direct)
        error = first.failure()
        assert first == again and isinstance(error, agentfx.AgentInvalidInputError)
        assert error.path == f"$.{next(iter(payload))}"
        shared.append(first is again)
        assert outcome_of(await runtime.messages.dispatch(_Level, payload)) == first
    assert shared == [True] * 3 + [False] * 3
    assert [error.path for error in executor.bound.invalid.values()] == ["$.level", "$.level", "$.priority"]
    assert [entry.outcome for entry in log.entries()] == ["AgentInvalidInputError"] * 3 * len(payloads)
    assert sent == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("bound", "value"),
    [("_REMEMBERED_TEXT_MAX", 10), ("_REMEMBERED_MAX", 0)],
    ids=["a decoder text too long", "a codec that remembers no more"],
)
async def test_an_invalid_input_refusal_the_codec_does_not_remember_is_not_kept(
    monkeypatch: pytest.MonkeyPatch, bound: str, value: int
) -> None:
    import importlib

    # ``agentfx.schema`` is the function; the module is reached by its full name.
    monkeypatch.setattr(importlib.import_module("agentfx.schema"), bound, value)
    _, runtime = _level_runtime()
    first = outcome_of(await runtime.messages.dispatch(_Level, {"priority": "x"}))
    again = outcome_of(await runtime.messages.dispatch(_Level, {"priority": "x"}))
    assert first == again == Failure(_invalid("$.priority", '"priority" must be an integer'))
    assert runtime._executor.bound.invalid == {}


@pytest.mark.anyio
async def test_a_target_that_is_neither_a_name_nor_a_class_is_an_unknown_capability_even_if_unhashable() -> None:
    import enum

    class Named(enum.StrEnum):
        LEVEL = "set_level"

    class Unhashable:
        __hash__ = None  # pyright: ignore[reportAssignmentType]

        def __str__(self) -> str:
            return "unhashable"

    class BadHash:
        def __hash__(self) -> int:
            raise RuntimeError("no hash")

        def __str__(self) -> str:
            return "bad-hash"

    sent, runtime = _level_runtime()
    for target, named in ((["set_level"], "['set_level']"), (Unhashable(), "unhashable"), (BadHash(), "bad-hash")):
        outcome = outcome_of(await runtime.messages.dispatch(target, {}))  # pyright: ignore[reportArgumentType]
        assert outcome == Failure(agentfx.AgentUnknownCapabilityError.of(named))
    # A str subclass names a capability by its text.
    assert (await runtime.messages.call(Named.LEVEL, {})).name == "set_level"
    assert sent == [_Level()]
