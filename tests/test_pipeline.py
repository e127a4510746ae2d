"""The dispatch pipeline, row by row of the design's table, and the steps as RCFR values."""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from returns.io import IOFailure, IOSuccess
from returns.result import Failure, Result, Success

import agentfx
from agentfx import pipeline
from agentfx._returns import bind as rcfr_bind
from agentfx.pipeline import Bound, DispatchResult, InvocationEnv
from tests.support import (
    ALICE,
    AppAgent,
    ClearedSelection,
    DeletedTodo,
    FailedDeleteTodo,
    Message,
    Model,
    NoInput,
    ReceivedTodos,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    RequestedRenameTodo,
    Todo,
    User,
    outcome_of,
    recorder,
    run,
)

ADMIN = User("root", admin=True)


class Probe:
    """A host and a set of hooks that log, in order, every call the pipeline makes."""

    def __init__(self, model: Model | None = None, principal: User = ALICE) -> None:
        self.model_value = model if model is not None else Model(selected="t1", todos=(Todo("t1", "Milk"),))
        self.principal_value = principal
        self.events: list[str] = []
        self.sent: list[object] = []
        self.observers: list[Callable[[Any], None]] = []

    def model(self) -> Model:
        self.events.append("model")
        return self.model_value

    def principal(self, invocation: agentfx.Invocation) -> User:
        self.events.append("principal")
        return self.principal_value

    def dispatch(self, message: object) -> None:
        self.events.append("dispatch")
        self.sent.append(message)
        for listener in tuple(self.observers):
            listener(DeletedTodo(id=getattr(message, "id", "")))

    def observe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        self.events.append("observe")
        self.observers.append(listener)

        def unsubscribe() -> None:
            self.events.append("unobserve")
            self.observers.remove(listener)

        return unsubscribe

    @property
    def host(self) -> agentfx.Host[Model, Any, User]:
        return agentfx.Host(model=self.model, dispatch=self.dispatch, principal=self.principal, observe=self.observe)

    def available(self, result: bool = True) -> Callable[[Model], bool]:
        def available(model: Model) -> bool:
            self.events.append("available")
            return result

        return available

    def authorize(self, result: object = True) -> Callable[[Any], Any]:
        def authorize(req: Any) -> Any:
            self.events.append("authorize")
            return result

        return authorize

    def to_message(self, input: Any, ctx: agentfx.InvocationContext[Model, User]) -> RequestedDeleteTodo:
        self.events.append("to_message")
        return RequestedDeleteTodo(id=ctx.model.selected or "")


def probe_runtime(
    probe: Probe,
    *,
    available: bool = True,
    authorize: object = True,
    completion: bool = False,
) -> agentfx.AgentRuntime[Model, User]:
    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo,
                "Delete the selected todo",
                name="delete_selected_todo",
                available=probe.available(available),
                input=NoInput,
                to_message=probe.to_message,
                authorize=probe.authorize(authorize),
                completion=agentfx.Completion(success=DeletedTodo, timeout=1.0) if completion else None,
            ),
            agentfx.variant(RequestedCreateTodo, "Create a todo"),
        )
    )
    return agentfx.bind(defn, host=probe.host)


# Hook order


@pytest.mark.anyio
async def test_hooks_run_in_order_model_available_authorize_dispatch() -> None:
    probe = Probe()
    outcome = await run(probe_runtime(probe), "delete_selected_todo", {})
    assert isinstance(outcome, Success)
    assert probe.events == ["model", "available", "principal", "authorize", "to_message", "dispatch"]


@pytest.mark.anyio
async def test_completion_listeners_subscribe_before_sending_and_are_released() -> None:
    probe = Probe()
    outcome = await run(probe_runtime(probe, completion=True), "delete_selected_todo", {})
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("completed", DeletedTodo("t1"))
    assert probe.events == [
        "model",
        "available",
        "principal",
        "authorize",
        "to_message",
        "observe",
        "dispatch",
        "unobserve",
    ]
    assert probe.observers == []


# Row 1: resolve the capability


@pytest.mark.anyio
async def test_an_unexposed_class_is_unknown_by_its_tag_and_the_model_is_never_read() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    outcome = await run(runtime, ReceivedTodos, {"todos": []})
    assert outcome == Failure(agentfx.AgentUnknownCapabilityError.of("ReceivedTodos"))
    assert outcome.failure().message == "No such capability: ReceivedTodos"
    assert (rec.model_reads, rec.principal_calls, rec.dispatched) == (0, 0, [])


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["delete_todoo", "RequestedDeleteTodo", "", "requested_delete_todo"])
async def test_an_unknown_name_is_unknown_and_the_model_is_never_read(name: str) -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    outcome = await run(runtime, name, {})
    assert outcome == Failure(agentfx.AgentUnknownCapabilityError.of(name))
    assert (rec.model_reads, rec.principal_calls, rec.dispatched) == (0, 0, [])


@pytest.mark.anyio
async def test_a_capability_resolves_by_class_and_by_name_alike() -> None:
    by_class = (await run(agentfx.bind(AppAgent, host=recorder().host), RequestedDeleteTodo, {})).unwrap()
    by_name = (await run(agentfx.bind(AppAgent, host=recorder().host), "delete_selected_todo", {})).unwrap()
    assert (by_class.name, by_class.tag) == (by_name.name, by_name.tag) == ("delete_selected_todo", "RequestedDeleteTodo")


@pytest.mark.anyio
async def test_unknown_beats_an_aborted_signal() -> None:
    controller = agentfx.AbortController()
    controller.abort()
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    outcome = await run(runtime, "nope", {}, agentfx.Invocation(signal=controller.signal))
    assert isinstance(outcome.failure(), agentfx.AgentUnknownCapabilityError)


# Row 2: a signal already aborted


@pytest.mark.anyio
async def test_a_pre_aborted_invocation_is_refused_without_reading_the_model() -> None:
    probe = Probe()
    controller = agentfx.AbortController()
    controller.abort("stop")
    outcome = await run(probe_runtime(probe), "delete_selected_todo", {"bad": 1}, agentfx.Invocation(signal=controller.signal))
    assert outcome == Failure(agentfx.AgentCancelledError.before_dispatch("delete_selected_todo"))
    error = outcome.failure()
    assert isinstance(error, agentfx.AgentCancelledError) and error.dispatched is False
    assert probe.events == []


# Row 3: the Model is read once


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "principal", "target", "payload"),
    [
        (Model(selected="t1"), ALICE, "delete_selected_todo", {}),  # dispatched
        (Model(), ALICE, "delete_selected_todo", {}),  # unavailable
        (Model(selected="t1"), ALICE, "delete_selected_todo", []),  # invalid
        (Model(selected="t1"), User("bob", can_delete=False), "delete_selected_todo", {}),  # refused
        (Model(), ALICE, "rename_todo", {"id": "t1", "title": "x"}),  # async refusal
        (Model(), ADMIN, "rename_todo", {"id": "t1", "title": "x"}),  # async allowed
        (Model(), ALICE, RequestedCreateTodo, {"title": "x"}),
    ],
)
async def test_the_model_is_read_exactly_once_per_invocation(model: Model, principal: User, target: Any, payload: object) -> None:
    rec = recorder(model, principal=principal)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    await run(runtime, target, payload)
    assert rec.model_reads == 1


# Row 4: available


@pytest.mark.anyio
@pytest.mark.parametrize("payload", [{}, {"x": 1}, [], "nonsense", None])
async def test_unavailable_wins_over_a_malformed_payload_and_never_authorizes(payload: object) -> None:
    probe = Probe()
    outcome = await run(probe_runtime(probe, available=False), "delete_selected_todo", payload)
    assert outcome == Failure(agentfx.AgentCapabilityUnavailableError.of("delete_selected_todo", "RequestedDeleteTodo"))
    assert outcome.failure().message == 'Capability "delete_selected_todo" is not available right now'
    assert probe.events == ["model", "available"]


# Row 5: decode


@pytest.mark.anyio
async def test_an_invalid_payload_is_refused_before_the_principal_or_authorize() -> None:
    probe = Probe()
    outcome = await run(probe_runtime(probe), "delete_selected_todo", {"x": 1})
    assert outcome == Failure(
        agentfx.AgentInvalidInputError.of(
            "delete_selected_todo", "RequestedDeleteTodo", "$", problem='"x" is not a field of this input'
        )
    )
    assert probe.events == ["model", "available"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"id": "t1", "title": 3}, "$.title"),
        ({"id": "t1"}, "$"),
        ({"id": "t1", "title": "x", "extra": True}, "$"),
        ({"id": "t1", "title": "x", "type": "RequestedRenameTodo"}, "$"),
        ({"id": 3, "title": "3"}, "$.id"),
        ([], "$"),
        ("text", "$"),
        (7, "$"),
    ],
)
async def test_decoding_is_strict_and_reports_the_path(payload: object, path: str) -> None:
    rec = recorder(principal=ADMIN)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    outcome = await run(runtime, RequestedRenameTodo, payload)
    error = outcome.failure()
    assert isinstance(error, agentfx.AgentInvalidInputError)
    assert (error.capability, error.tag, error.path) == ("rename_todo", "RequestedRenameTodo", path)
    assert error.cause is not None
    assert rec.principal_calls == 0
    assert rec.dispatched == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("payload", "path", "problem"),
    [
        ({"todos": [{"id": "a", "title": 3}]}, "$.todos[0].title", '"todos[0].title" must be a string'),
        ({"todos": [{"id": "a", "title": "b"}, {"id": 2, "title": "c"}]}, "$.todos[1].id", '"todos[1].id" must be a string'),
        ({"todos": [{"id": "a"}]}, "$.todos[0]", '"todos[0].title" is required'),
        ({"todos": [{"id": "a", "title": "b", "x": 1}]}, "$.todos[0]", '"todos[0].x" is not a field of this input'),
        ({"todos": {}}, "$.todos", '"todos" must be an array'),
    ],
)
async def test_nested_problems_report_their_json_path(payload: object, path: str, problem: str) -> None:
    defn = agentfx.define(agentfx.expose(Message, agentfx.variant(ReceivedTodos, "Receive todos")))
    outcome = await run(agentfx.bind(defn, host=recorder().host), ReceivedTodos, payload)
    assert outcome == Failure(agentfx.AgentInvalidInputError.of("received_todos", "ReceivedTodos", path, problem=problem))


@pytest.mark.anyio
@pytest.mark.parametrize("payload", [[], "", {"x": 1}, None, 0])
async def test_a_payload_free_capability_accepts_only_an_empty_object(payload: object) -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    assert isinstance((await run(runtime, ClearedSelection, payload)).failure(), agentfx.AgentInvalidInputError)
    assert isinstance(await run(runtime, ClearedSelection, {}), Success)


# Row 6: the principal


@pytest.mark.anyio
async def test_the_principal_is_resolved_once_even_without_authorize() -> None:
    seen: list[agentfx.Invocation] = []
    rec = recorder(principal=ALICE)
    host = agentfx.Host(
        model=rec.model,
        dispatch=rec.dispatch,
        principal=lambda invocation: seen.append(invocation) or ALICE,
        observe=rec.observe,
    )
    runtime = agentfx.bind(AppAgent, host=host)
    invocation = agentfx.Invocation(id="call-1")
    outcome = await run(runtime, RequestedCreateTodo, {"title": "x"}, invocation)
    assert isinstance(outcome, Success)
    assert seen == [invocation]


@pytest.mark.anyio
async def test_without_a_principal_hook_the_principal_is_none() -> None:
    requests: list[Any] = []

    def authorize(req: Any) -> bool:
        requests.append(req)
        return True

    defn = agentfx.define(
        agentfx.expose(Message, agentfx.variant(RequestedCreateTodo, "Create", authorize=authorize))
    )
    rec = recorder()
    runtime = agentfx.bind(defn, host=agentfx.Host(model=rec.model, dispatch=rec.dispatch))
    await run(runtime, RequestedCreateTodo, {"title": "x"})
    assert [r.principal for r in requests] == [None]


# Row 7: authorize


@pytest.mark.anyio
async def test_authorize_sees_principal_decoded_input_snapshot_and_transport() -> None:
    requests: list[agentfx.AuthorizationRequest[Any, Any, Any]] = []

    def authorize(req: agentfx.AuthorizationRequest[Any, Any, Any]) -> bool:
        requests.append(req)
        return True

    model = Model(selected="t1")
    defn = agentfx.define(agentfx.expose(Message, agentfx.variant(RequestedRenameTodo, "Rename", authorize=authorize)))
    runtime = agentfx.bind(defn, host=recorder(model, principal=ALICE).host)
    await run(runtime, RequestedRenameTodo, {"id": "t1", "title": "x"}, agentfx.Invocation(transport="mcp"))
    [req] = requests
    assert req.principal is ALICE
    assert req.input == RequestedRenameTodo("t1", "x")
    assert req.model is model
    assert req.transport == "mcp"


@pytest.mark.anyio
@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize(
    ("verdict", "message"),
    [
        (False, 'Not authorized to invoke "delete_selected_todo"'),
        (agentfx.Refusal("Only the owner may delete"), "Only the owner may delete"),
        (agentfx.Refusal(""), 'Not authorized to invoke "delete_selected_todo"'),
    ],
)
async def test_authorize_refusals(is_async: bool, verdict: bool | agentfx.Refusal, message: str) -> None:
    probe = Probe()

    async def later(req: Any) -> bool | agentfx.Refusal:
        await anyio.lowlevel.checkpoint()
        return verdict

    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo,
                "Delete",
                name="delete_selected_todo",
                input=NoInput,
                to_message=probe.to_message,
                authorize=later if is_async else (lambda req: verdict),
            ),
        )
    )
    outcome = await run(agentfx.bind(defn, host=probe.host), RequestedDeleteTodo, {})
    assert outcome == Failure(agentfx.AgentAuthorizationError("delete_selected_todo", "RequestedDeleteTodo", message))
    assert probe.sent == []
    assert "to_message" not in probe.events


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("verdict", "kind"), [(None, "NoneType"), (1, "int"), ("yes", "str"), (agentfx.Refusal, "StructMeta")]
)
async def test_authorize_returning_a_non_bool_is_a_defect(verdict: object, kind: str) -> None:
    probe = Probe()
    runtime = probe_runtime(probe, authorize=verdict)
    with pytest.raises(agentfx.ContractError) as raised:
        await runtime.messages.dispatch("delete_selected_todo", {})
    assert str(raised.value) == f'"authorize" of "delete_selected_todo" returned {kind}; return a bool, a Refusal or a Confirm'
    assert probe.sent == []
    assert "to_message" not in probe.events


@pytest.mark.anyio
async def test_async_authorize_is_awaited() -> None:
    rec = recorder(principal=ADMIN)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    outcome = await run(runtime, "rename_todo", {"id": "t1", "title": "Oat milk"})
    assert outcome.unwrap().message == RequestedRenameTodo("t1", "Oat milk")
    refused = await run(agentfx.bind(AppAgent, host=recorder(principal=ALICE).host), "rename_todo", {"id": "t1", "title": "x"})
    assert refused.failure().message == "Only an admin may rename a todo"


# Row 8: aborted during 5-7


@pytest.mark.anyio
async def test_an_abort_during_an_async_authorize_dispatches_nothing() -> None:
    controller = agentfx.AbortController()
    started = anyio.Event()
    probe = Probe()

    async def authorize(req: Any) -> bool:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo, "Delete", name="d", input=NoInput, to_message=probe.to_message, authorize=authorize
            ),
        )
    )
    runtime = agentfx.bind(defn, host=probe.host)
    outcomes: list[Result[DispatchResult, agentfx.DispatchError]] = []

    async def go() -> None:
        outcomes.append(await run(runtime, "d", {}, agentfx.Invocation(signal=controller.signal)))

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await started.wait()
        controller.abort()
    assert outcomes == [Failure(agentfx.AgentCancelledError.before_dispatch("d"))]
    assert probe.sent == []
    assert "to_message" not in probe.events
    assert not controller._state.scopes


@pytest.mark.anyio
async def test_an_abort_by_a_synchronous_hook_is_caught_at_step_eight() -> None:
    controller = agentfx.AbortController()
    probe = Probe()

    def authorize(req: Any) -> bool:
        controller.abort()
        return True

    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo, "Delete", name="d", input=NoInput, to_message=probe.to_message, authorize=authorize
            ),
        )
    )
    outcome = await run(agentfx.bind(defn, host=probe.host), "d", {}, agentfx.Invocation(signal=controller.signal))
    assert outcome == Failure(agentfx.AgentCancelledError.before_dispatch("d"))
    assert probe.sent == []


@pytest.mark.anyio
async def test_an_abort_while_resolving_the_principal_is_caught_without_authorize() -> None:
    controller = agentfx.AbortController()
    rec = recorder()

    def principal(invocation: agentfx.Invocation) -> User:
        controller.abort()
        return ALICE

    runtime = agentfx.bind(AppAgent, host=agentfx.Host(model=rec.model, dispatch=rec.dispatch, principal=principal, observe=rec.observe))
    outcome = await run(runtime, RequestedCreateTodo, {"title": "x"}, agentfx.Invocation(signal=controller.signal))
    assert outcome == Failure(agentfx.AgentCancelledError.before_dispatch("requested_create_todo"))
    assert rec.dispatched == []


# Row 9: construct the Message from the same snapshot


@pytest.mark.anyio
async def test_snapshot_rule_a_model_change_during_async_authorize_does_not_retarget() -> None:
    gate = anyio.Event()
    started = anyio.Event()
    seen: list[Model] = []
    contexts: list[agentfx.InvocationContext[Model, User]] = []

    async def authorize(req: agentfx.AuthorizationRequest[User, NoInput, Model]) -> bool:
        seen.append(req.model)
        started.set()
        await gate.wait()
        return True

    def to_message(_: NoInput, ctx: agentfx.InvocationContext[Model, User]) -> RequestedDeleteTodo:
        contexts.append(ctx)
        return RequestedDeleteTodo(id=ctx.model.selected or "")

    Agent = agentfx.for_model(Model, principal=User)
    defn = Agent.define(
        Agent.expose(
            Message,
            Agent.variant(
                RequestedDeleteTodo,
                "Delete the selected todo",
                name="delete_selected_todo",
                available=lambda model: model.selected is not None,
                input=NoInput,
                to_message=to_message,
                authorize=authorize,
            ),
        )
    )
    first = Model(selected="t1")
    rec = recorder(first, principal=ALICE, responses={})
    runtime = Agent.bind(defn, host=rec.host)
    invocation = agentfx.Invocation(id="call-1")
    outcomes: list[Result[DispatchResult, agentfx.DispatchError]] = []

    async def go() -> None:
        outcomes.append(await run(runtime, RequestedDeleteTodo, {}, invocation))

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await started.wait()
        rec.set_model(Model(selected="t2"))
        gate.set()
    assert rec.dispatched == [RequestedDeleteTodo(id="t1")]
    assert seen == [first] and seen[0] is first
    [ctx] = contexts
    assert ctx.model is first
    assert ctx.principal is ALICE
    assert ctx.invocation is invocation
    assert outcomes[0].unwrap().message == RequestedDeleteTodo(id="t1")

    # The next invocation sees the new Model; clearing the selection makes it unavailable.
    gate = anyio.Event()
    gate.set()
    started = anyio.Event()
    assert (await run(runtime, RequestedDeleteTodo, {})).unwrap().message == RequestedDeleteTodo(id="t2")
    rec.set_model(Model())
    assert isinstance((await run(runtime, RequestedDeleteTodo, {})).failure(), agentfx.AgentCapabilityUnavailableError)


@pytest.mark.anyio
async def test_to_message_making_another_message_is_refused_and_nothing_is_dispatched() -> None:
    # Typed, this hook would not check; untyped code can still declare it.
    def makes_another(_: NoInput, ctx: object) -> Any:
        return ClearedSelection()

    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(RequestedDeleteTodo, "Delete", name="delete_todo", input=NoInput, to_message=makes_another),
        )
    )
    rec = recorder()
    runtime = agentfx.bind(defn, host=rec.host)
    with pytest.raises(agentfx.ContractError) as raised:
        await runtime.messages.dispatch("delete_todo", {})
    assert str(raised.value) == '"delete_todo" made a "ClearedSelection" Message, but is exposed as "RequestedDeleteTodo"'
    assert rec.dispatched == []


class Base(msgspec.Struct, frozen=True, tag=True):
    id: str


class Derived(Base, frozen=True, tag=True):
    pass


@pytest.mark.anyio
async def test_to_message_making_a_subclass_variant_is_refused() -> None:
    # Derived is its own variant with its own tag, even though it subclasses Base.
    defn = agentfx.define(
        agentfx.expose(
            Base | Derived,
            agentfx.variant(Base, "Base", input=NoInput, to_message=lambda _, ctx: Derived(id="x")),
        )
    )
    rec = recorder()
    runtime = agentfx.bind(defn, host=rec.host)
    with pytest.raises(agentfx.ContractError, match='"base" made a "Derived" Message, but is exposed as "Base"'):
        await runtime.messages.dispatch(Base, {})
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_a_direct_variant_dispatches_its_decoded_payload() -> None:
    rec = recorder()
    outcome = (await run(agentfx.bind(AppAgent, host=rec.host), RequestedCreateTodo, {"title": "Milk"})).unwrap()
    assert rec.dispatched == [RequestedCreateTodo("Milk")]
    assert outcome == DispatchResult("requested_create_todo", "RequestedCreateTodo", RequestedCreateTodo("Milk"), outcome.invocation)


# Rows 10-12: subscribe, send, wait


@pytest.mark.anyio
async def test_a_declared_failure_message_is_a_successful_dispatch() -> None:
    rec = recorder(Model(selected="keep"))
    outcome = await run(agentfx.bind(AppAgent, host=rec.host), "delete_selected_todo", {})
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("failed", FailedDeleteTodo("keep"))
    assert rec.listener_count == 0


@pytest.mark.anyio
async def test_a_completion_answered_synchronously_inside_dispatch_is_seen() -> None:
    rec = recorder()
    outcome = await run(agentfx.bind(AppAgent, host=rec.host), "delete_selected_todo", {})
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("completed", DeletedTodo("t1"))
    assert rec.listener_count == 0


def _deleting(timeout: float) -> agentfx.Definition[Any, Any]:
    return agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(
                RequestedDeleteTodo, "Delete", name="delete_todo", completion=agentfx.Completion(DeletedTodo, timeout=timeout)
            ),
        )
    )


@pytest.mark.anyio
async def test_a_completion_that_never_comes_times_out() -> None:
    rec = recorder(responses={})
    outcome = await run(agentfx.bind(_deleting(0.05), host=rec.host), RequestedDeleteTodo, {"id": "t1"}, agentfx.Invocation(id="c1"))
    assert outcome == Failure(agentfx.AgentCompletionTimeoutError.while_waiting("delete_todo", "c1", 0.05))
    assert rec.dispatched == [RequestedDeleteTodo("t1")]
    assert rec.listener_count == 0


@pytest.mark.anyio
async def test_the_deadline_also_bounds_a_host_that_never_returns() -> None:
    rec = recorder()

    async def stuck(message: object) -> None:
        await anyio.sleep_forever()

    host: agentfx.Host[Model, Any, None] = agentfx.Host(model=rec.model, dispatch=stuck, observe=rec.observe)
    outcome = await run(agentfx.bind(_deleting(0.05), host=host), RequestedDeleteTodo, {"id": "t1"}, agentfx.Invocation(id="c1"))
    assert outcome == Failure(agentfx.AgentCompletionTimeoutError.while_sending("delete_todo", "c1", 0.05))
    assert rec.listener_count == 0


@pytest.mark.anyio
async def test_an_abort_while_waiting_for_completion_says_dispatched() -> None:
    controller = agentfx.AbortController()
    rec = recorder(responses={})
    runtime = agentfx.bind(_deleting(10.0), host=rec.host)
    outcomes: list[Result[DispatchResult, agentfx.DispatchError]] = []

    async def go() -> None:
        outcomes.append(await run(runtime, RequestedDeleteTodo, {"id": "t1"}, agentfx.Invocation(signal=controller.signal)))

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await anyio.wait_all_tasks_blocked()
        controller.abort()
    assert outcomes == [Failure(agentfx.AgentCancelledError.while_waiting("delete_todo"))]
    assert rec.listener_count == 0


# The steps as RequiresContextFutureResult values


def _env(runtime: agentfx.AgentRuntime[Any, Any], target: object, payload: object) -> InvocationEnv[Any, Any]:
    return InvocationEnv(runtime._executor.bound, target, payload, agentfx.Invocation(id="call-1"))


@pytest.mark.anyio
async def test_each_step_is_an_rcfr_over_the_env() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    env = _env(runtime, "delete_selected_todo", {})
    capability = outcome_of(await pipeline.resolve()(env)).unwrap()
    assert capability.name == "delete_selected_todo" and env.capability is capability
    assert rec.model_reads == 0
    assert outcome_of(await pipeline.check_not_aborted(capability)(env)).unwrap() is capability
    await pipeline.snapshot(capability)(env)
    assert rec.model_reads == 1 and env.model is rec.model()
    assert isinstance(await pipeline.check_available(capability)(env), IOSuccess)
    decoded = outcome_of(await pipeline.decode(capability)(env)).unwrap()
    assert decoded.input == NoInput()


@pytest.mark.anyio
async def test_a_user_composed_pipeline_from_the_public_steps() -> None:
    # Resolve and check availability only: a "would this be offered?" probe that never sends.
    rec = recorder(Model())
    runtime = agentfx.bind(AppAgent, host=rec.host)

    def probe() -> pipeline.Step[Any]:
        return rcfr_bind(rcfr_bind(rcfr_bind(pipeline.resolve(), pipeline.check_not_aborted), pipeline.snapshot), pipeline.check_available)

    refused = await probe()(_env(runtime, "delete_selected_todo", {}))
    assert refused == IOFailure(agentfx.AgentCapabilityUnavailableError.of("delete_selected_todo", "RequestedDeleteTodo"))
    offered = await probe()(_env(runtime, "cleared_selection", {}))
    assert isinstance(offered, IOSuccess)
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_ok_and_fail_build_steps() -> None:
    env = _env(agentfx.bind(AppAgent, host=recorder().host), "x", {})
    assert await pipeline.ok(3)(env) == IOSuccess(3)
    error = agentfx.AgentUnknownCapabilityError.of("x")
    assert await pipeline.fail(error)(env) == IOFailure(error)


@pytest.mark.anyio
async def test_the_composed_dispatch_runs_the_whole_table() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    outcome = outcome_of(await pipeline.dispatch()(_env(runtime, "delete_selected_todo", {})))
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("completed", DeletedTodo("t1"))
    assert rec.model_reads == 1 and rec.principal_calls == 1
    unknown = outcome_of(await pipeline.dispatch()(_env(runtime, ReceivedTodos, {})))
    assert unknown == Failure(agentfx.AgentUnknownCapabilityError.of("ReceivedTodos"))


def test_bound_indexes_capabilities_by_name_and_class() -> None:
    rec = recorder()
    bound: Bound[Any, Any] = Bound(AppAgent.capabilities, rec.host)
    assert bound.by_name["delete_selected_todo"] is bound.by_class[RequestedDeleteTodo]
    assert set(bound.by_name) == {"requested_create_todo", "delete_selected_todo", "rename_todo", "cleared_selection"}


# The direct run: the outcome at once when nothing suspends, else the coroutine for the rest


def test_the_direct_run_answers_a_call_nothing_suspends_with_its_outcome_itself() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    done = pipeline.run_direct(_env(runtime, RequestedCreateTodo, {"title": "Milk"}))
    assert type(done) is DispatchResult
    assert rec.dispatched == [RequestedCreateTodo(title="Milk")]
    refused = pipeline.run_direct(_env(runtime, RequestedCreateTodo, {"title": 3}))
    assert type(refused) is agentfx.AgentInvalidInputError
    assert rec.dispatched == [RequestedCreateTodo(title="Milk")]


@pytest.mark.anyio
async def test_the_direct_run_hands_back_the_rest_of_a_call_that_must_wait() -> None:
    # An async host: the Message is handed over synchronously, its dispatch awaited in the coroutine.
    rec = recorder(async_dispatch=True)
    runtime = agentfx.bind(AppAgent, host=rec.host)
    later = pipeline.run_direct(_env(runtime, RequestedCreateTodo, {"title": "Milk"}))
    assert inspect.iscoroutine(later)
    done = await later
    assert type(done) is DispatchResult and done.message == RequestedCreateTodo(title="Milk")
    # A completion (delete waits for TodoDeleted): the wait is the coroutine's.
    waiting = pipeline.run_direct(_env(runtime, RequestedDeleteTodo, {}))
    assert inspect.iscoroutine(waiting)
    finished = await waiting
    assert type(finished) is DispatchResult and finished.completion is not None


@pytest.mark.anyio
async def test_no_entry_point_runs_the_pipeline_before_it_is_awaited() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    dispatching = runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})
    attempting = runtime.messages.attempt("requested_create_todo", {"title": "b"})
    calling = runtime.messages.call(RequestedCreateTodo, {"title": "c"})
    assert rec.dispatched == [] and rec.model_reads == 0
    assert isinstance(await dispatching, IOSuccess)
    assert type(await attempting) is DispatchResult
    assert (await calling).message == RequestedCreateTodo(title="c")
    assert rec.dispatched == [RequestedCreateTodo(title=t) for t in "abc"]


class _Do(msgspec.Struct, frozen=True, tag=True):
    id: str


class _Done(msgspec.Struct, frozen=True, tag=True):
    id: str


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # futures are asyncio's; trio has none to share
@pytest.mark.parametrize("shared", ["host", "authorize"])
async def test_one_invocations_abort_never_cancels_a_future_other_invocations_share(anyio_backend: str, shared: str) -> None:
    # asyncio cancels a future a cancelled task awaits: a batch flush every
    # Message waits on, or one cached permission check, would be cancelled for
    # every invocation because one of them was aborted.
    import asyncio

    loop = asyncio.get_running_loop()
    flush: asyncio.Future[None] = loop.create_future()
    check: asyncio.Future[bool] = loop.create_future()
    sent: list[object] = []

    def dispatch(message: object) -> object:
        sent.append(message)
        return flush if shared == "host" else None

    def authorize(request: Any) -> Any:
        return check if shared == "authorize" else True

    definition = agentfx.define(agentfx.expose(_Do, agentfx.variant(_Do, "Do", name="do", authorize=authorize)))
    log = agentfx.audit_log()
    runtime = agentfx.bind(definition, host=agentfx.Host(model=lambda: None, dispatch=dispatch), audit=log)
    controller = agentfx.AbortController()
    results: dict[int, object] = {}

    async def one(index: int, signal: agentfx.AbortSignal | None) -> None:
        invocation = agentfx.Invocation(id=f"c{index}", signal=signal)
        results[index] = await runtime.messages.attempt("do", {"id": f"c{index}"}, invocation)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(one, 0, controller.signal)  # only the first has the signal
            for index in (1, 2, 3):
                group.start_soon(one, index, None)
            await anyio.wait_all_tasks_blocked()
            controller.abort()
            await anyio.wait_all_tasks_blocked()
            assert not flush.cancelled() and not check.cancelled()
            (flush.set_result(None) if shared == "host" else check.set_result(True))
    assert isinstance(results[0], agentfx.AgentCancelledError)
    assert all(type(results[index]) is DispatchResult for index in (1, 2, 3))
    assert sorted((e.invocation, e.outcome) for e in log.entries()) == [
        ("c0", "AgentCancelledError"),
        *((f"c{i}", "dispatched") for i in (1, 2, 3)),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("ending", ["deadline", "abort"])
async def test_a_correlated_completion_met_while_the_host_still_dispatches_tells_on_dispatched(
    anyio_backend: str, ending: str
) -> None:
    # The completion proves the Message reached update, so the call is a
    # dispatched one; whoever waits to hear the host accepted it hears it too.
    listeners: list[Callable[[object], None]] = []
    never = anyio.Event()

    def observe(listener: Callable[[object], None]) -> Callable[[], None]:
        listeners.append(listener)
        return lambda: listeners.remove(listener)

    def dispatch(message: object) -> object:
        for listener in list(listeners):
            listener(message)
        if isinstance(message, _Do):
            for listener in list(listeners):
                listener(_Done(message.id))

        async def acknowledged() -> None:
            await never.wait()  # the host's acknowledgement never comes

        return acknowledged()

    def correlate(request: _Do, result: _Done, call: agentfx.CallInfo[Any]) -> bool:
        return result.id == request.id

    completion: agentfx.Completion[_Do, _Done] = agentfx.Completion(_Done, correlate=correlate, timeout=0.3)
    definition = agentfx.define(agentfx.expose(_Do | _Done, agentfx.variant(_Do, "Do", name="do", completion=completion)))
    log = agentfx.audit_log()
    runtime = agentfx.bind(definition, host=agentfx.Host(model=lambda: None, dispatch=dispatch, observe=observe), audit=log)
    controller = agentfx.AbortController()
    told: list[int] = []
    outcomes: list[object] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            if ending == "abort":
                group.start_soon(_abort_soon, controller)
            invocation = agentfx.Invocation(signal=controller.signal)
            outcomes.append(await runtime.messages.attempt("do", {"id": "x"}, invocation, on_dispatched=lambda: told.append(1)))
    (outcome,) = outcomes
    assert type(outcome) is DispatchResult and outcome.completion is not None
    assert [(e.decision, e.outcome) for e in log.entries()] == [("dispatched", "completed")]
    assert told == [1]
    assert listeners == []


async def _abort_soon(controller: agentfx.AbortController) -> None:
    await anyio.sleep(0.05)
    controller.abort()
