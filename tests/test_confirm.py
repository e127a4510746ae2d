"""Human confirmation (DESIGN §10): ``authorize`` answering ``Confirm``, step 7's second half."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from returns.result import Failure, Success

import agentfx
from agentfx import Confirm, ConfirmationRequest, ContractError
from agentfx.pipeline import DispatchResult
from agentfx.testing import RecordingHost
from tests.support import (
    ConfirmingAgent,
    DeletedTodo,
    Message,
    Model,
    NoInput,
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

PROMPT = 'Delete the todo "Milk"?'
ADMIN = User("root", admin=True)


class Asker:
    """An ``Invocation.confirm`` that records each question and answers as told."""

    def __init__(self, answer: object = True, *, wait: anyio.Event | None = None) -> None:
        self.answer = answer
        self.wait = wait
        self.asked: list[ConfirmationRequest] = []

    async def __call__(self, request: ConfirmationRequest) -> bool:
        self.asked.append(request)
        if self.wait is not None:
            await self.wait.wait()
        else:
            await anyio.lowlevel.checkpoint()
        answer: Any = self.answer
        return answer


def _bound(
    principal: User = User("u1"), *, audit: agentfx.AuditSink | None = None
) -> tuple[RecordingHost[Model, Any, User], agentfx.AgentRuntime[Model, User]]:
    rec = recorder(principal=principal)
    return rec, agentfx.bind(ConfirmingAgent, host=rec.host, audit=audit)


def _log() -> agentfx.AuditLog:
    return agentfx.audit_log(clock=fixed_clock)


# --- the values -------------------------------------------------------------------------------------


@pytest.mark.parametrize("prompt", ["", "   ", None, 3])
def test_a_confirm_without_a_prompt_is_a_contract_error(prompt: Any) -> None:
    with pytest.raises(ContractError, match="Confirm needs a prompt"):
        Confirm(prompt)


def test_the_confirmation_required_failure_round_trips_through_the_dispatch_error_union() -> None:
    error = agentfx.AgentConfirmationRequiredError.of("delete_selected_todo", "RequestedDeleteTodo", PROMPT)
    assert error.message == '"delete_selected_todo" needs a person to confirm: Delete the todo "Milk"?'
    wire = msgspec.json.encode(error)
    assert json.loads(wire) == {
        "_tag": "AgentConfirmationRequiredError",
        "capability": "delete_selected_todo",
        "tag": "RequestedDeleteTodo",
        "prompt": PROMPT,
        "message": error.message,
    }
    back = msgspec.json.decode(wire, type=agentfx.DispatchError)
    assert type(back) is agentfx.AgentConfirmationRequiredError
    assert back == error


def test_an_invocation_keeps_its_confirmation_when_its_id_is_filled() -> None:
    asker = Asker()
    filled = agentfx.Invocation(transport="mcp", confirm=asker, confirmed=True).filled()
    assert filled.id is not None
    assert (filled.transport, filled.confirm, filled.confirmed) == ("mcp", asker, True)


# --- step 7 -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_without_a_way_to_ask_the_call_is_refused_and_nothing_is_sent(anyio_backend: str) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    outcome = await run(runtime, RequestedDeleteTodo, {})
    assert outcome == Failure(
        agentfx.AgentConfirmationRequiredError("delete_selected_todo", "RequestedDeleteTodo", PROMPT, f'"delete_selected_todo" needs a person to confirm: {PROMPT}')
    )
    assert rec.dispatched == []
    assert rec.listener_count == 0
    [entry] = log.entries()
    assert (entry.decision, entry.outcome, entry.confirmed) == ("refused", "AgentConfirmationRequiredError", msgspec.UNSET)


@pytest.mark.anyio
async def test_a_confirmed_invocation_proceeds_without_asking_and_the_audit_says_so(anyio_backend: str) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    asker = Asker(answer=False)
    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(id="c1", confirm=asker, confirmed=True))
    assert isinstance(outcome, Success)
    assert rec.dispatched == [RequestedDeleteTodo(id="t1")]
    assert asker.asked == []
    [entry] = log.entries()
    assert (entry.decision, entry.outcome, entry.confirmed) == ("dispatched", "completed", True)
    assert b'"outcome":"completed","confirmed":true' in msgspec.json.encode(entry)


@pytest.mark.anyio
async def test_a_person_who_approves_lets_the_call_through(anyio_backend: str) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    asker = Asker(answer=True)
    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(id="c1", transport="mcp", confirm=asker))
    assert isinstance(outcome, Success)
    assert outcome.unwrap().completion == agentfx.CompletionOutcome("completed", DeletedTodo(id="t1"))
    assert rec.dispatched == [RequestedDeleteTodo(id="t1")]
    [request] = asker.asked
    assert (request.capability, request.tag, request.prompt) == ("delete_selected_todo", "RequestedDeleteTodo", PROMPT)
    assert request.invocation.id == "c1"
    assert request.invocation.transport == "mcp"
    assert [e.confirmed for e in log.entries()] == [True]


@pytest.mark.anyio
async def test_the_person_is_asked_with_a_filled_invocation_id(anyio_backend: str) -> None:
    _, runtime = _bound()
    asker = Asker(answer=True)
    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=asker))
    [request] = asker.asked
    assert request.invocation.id is not None
    assert request.invocation.id == outcome.unwrap().invocation.id


@pytest.mark.anyio
async def test_a_person_who_declines_refuses_the_call(anyio_backend: str) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    asker = Asker(answer=False)
    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=asker))
    assert outcome == Failure(agentfx.AgentAuthorizationError("delete_selected_todo", "RequestedDeleteTodo", f"Declined: {PROMPT}"))
    assert rec.dispatched == []
    assert len(asker.asked) == 1
    [entry] = log.entries()
    assert (entry.decision, entry.outcome, entry.confirmed) == ("refused", "AgentAuthorizationError", msgspec.UNSET)


@pytest.mark.anyio
async def test_a_synchronous_answer_is_accepted(anyio_backend: str) -> None:
    rec, runtime = _bound()
    answers: list[ConfirmationRequest] = []

    def ask(request: ConfirmationRequest) -> Any:
        answers.append(request)
        return False

    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=ask))
    assert outcome.failure().message == f"Declined: {PROMPT}"
    assert len(answers) == 1
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_an_async_authorize_may_ask_too(anyio_backend: str) -> None:
    rec, runtime = _bound(ADMIN)
    asker = Asker(answer=True)
    payload = {"id": "t1", "title": "Oat milk"}
    outcome = await run(runtime, "rename_todo", payload, agentfx.Invocation(confirm=asker))
    assert isinstance(outcome, Success)
    assert [r.prompt for r in asker.asked] == ['Rename "t1" to "Oat milk"?']
    assert rec.dispatched == [RequestedRenameTodo(id="t1", title="Oat milk")]


@pytest.mark.anyio
async def test_confirmation_approves_a_confirm_and_nothing_else(anyio_backend: str) -> None:
    # ``confirmed`` answers a Confirm; a refusal from authorize stays a refusal.
    rec, runtime = _bound(User("u1", can_delete=False))
    asker = Asker(answer=True)
    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=asker, confirmed=True))
    assert outcome.failure() == agentfx.AgentAuthorizationError.of("delete_selected_todo", "RequestedDeleteTodo")
    rec2, runtime2 = _bound(User("u2"))
    refused = await run(runtime2, "rename_todo", {"id": "t1", "title": "x"}, agentfx.Invocation(confirm=asker, confirmed=True))
    assert refused.failure().message == "Only an admin may rename a todo"
    assert rec.dispatched == rec2.dispatched == []
    assert asker.asked == []


@pytest.mark.anyio
async def test_nobody_is_asked_when_authorize_allows_outright(anyio_backend: str) -> None:
    rec, runtime = _bound()
    asker = Asker(answer=False)
    outcome = await run(runtime, "requested_create_todo", {"title": "Tea"}, agentfx.Invocation(confirm=asker))
    assert isinstance(outcome, Success)
    assert asker.asked == []
    assert len(rec.dispatched) == 1


@pytest.mark.anyio
async def test_the_raise_style_call_raises_the_confirmation_failure(anyio_backend: str) -> None:
    _, runtime = _bound()
    with pytest.raises(agentfx.DispatchFailed) as raised:
        await runtime.messages.call(RequestedDeleteTodo, {})
    assert isinstance(raised.value.error, agentfx.AgentConfirmationRequiredError)
    assert str(raised.value) == f'"delete_selected_todo" needs a person to confirm: {PROMPT}'


# --- the snapshot, the signal and defects -----------------------------------------------------------


@pytest.mark.anyio
async def test_a_model_change_while_the_person_decides_does_not_retarget_the_call(anyio_backend: str) -> None:
    rec, runtime = _bound()
    decided = anyio.Event()
    asker = Asker(answer=True, wait=decided)
    outcome: list[Any] = []

    async def call() -> None:
        outcome.append(await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=asker)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        while not asker.asked:
            await anyio.lowlevel.checkpoint()
        rec.set_model(Model(todos=(Todo("t1", "Milk"), Todo("t2", "Tea")), selected="t2"))
        decided.set()
    assert isinstance(outcome[0], Success)
    # The prompt and the Message both come from the snapshot taken before asking.
    assert asker.asked[0].prompt == PROMPT
    assert rec.dispatched == [RequestedDeleteTodo(id="t1")]
    assert rec.model_reads == 1


@pytest.mark.anyio
async def test_an_abort_while_the_person_decides_refuses_and_sends_nothing(anyio_backend: str) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    controller = agentfx.AbortController()
    asker = Asker(answer=True, wait=anyio.Event())  # never answers
    outcome: list[Any] = []

    async def call() -> None:
        invocation = agentfx.Invocation(signal=controller.signal, confirm=asker)
        outcome.append(await run(runtime, RequestedDeleteTodo, {}, invocation))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        while not asker.asked:
            await anyio.lowlevel.checkpoint()
        controller.abort("stop")
    assert outcome == [Failure(agentfx.AgentCancelledError.before_dispatch("delete_selected_todo"))]
    assert rec.dispatched == []
    assert rec.listener_count == 0
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentCancelledError")]


@pytest.mark.anyio
async def test_an_approval_that_lands_after_an_abort_sends_nothing(anyio_backend: str) -> None:
    rec, runtime = _bound()
    controller = agentfx.AbortController()

    async def ask(request: ConfirmationRequest) -> bool:
        # The person approves in the same instant the caller gives up: no
        # checkpoint lets the signal interrupt this answer.
        controller.abort()
        return True

    outcome = await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(signal=controller.signal, confirm=ask))
    assert outcome == Failure(agentfx.AgentCancelledError.before_dispatch("delete_selected_todo"))
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_outer_cancellation_while_the_person_decides_propagates(anyio_backend: str) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    asker = Asker(answer=True, wait=anyio.Event())
    with anyio.move_on_after(0.01):
        await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=asker))
    assert rec.dispatched == []
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "interrupted")]


@pytest.mark.anyio
@pytest.mark.parametrize("answer", [None, 1, "yes"])
async def test_an_answer_that_is_not_a_bool_is_a_defect(anyio_backend: str, answer: object) -> None:
    log = _log()
    rec, runtime = _bound(audit=log)
    with pytest.raises(ContractError, match='The confirmation of "delete_selected_todo" answered'):
        await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=Asker(answer=answer)))
    assert rec.dispatched == []
    assert [(e.decision, e.outcome) for e in log.entries()] == [("refused", "AgentDefect")]


@pytest.mark.anyio
async def test_a_confirmer_that_raises_is_a_defect_and_sends_nothing(anyio_backend: str) -> None:
    rec, runtime = _bound()

    async def ask(request: ConfirmationRequest) -> bool:
        raise OSError("the connection went away")

    with pytest.raises(OSError, match="went away"):
        await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirm=ask))
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_a_confirm_built_without_a_prompt_at_dispatch_is_a_defect(anyio_backend: str) -> None:
    contract = TodoAgent.define(
        messages=TodoAgent.expose(
            Message,
            TodoAgent.variant(
                RequestedDeleteTodo,
                "Delete",
                input=NoInput,
                to_message=lambda _, ctx: RequestedDeleteTodo(id="t1"),
                authorize=lambda req: Confirm(""),
            ),
        )
    )
    rec = recorder()
    runtime = agentfx.bind(contract, host=rec.host)
    with pytest.raises(ContractError, match="Confirm needs a prompt"):
        await run(runtime, RequestedDeleteTodo, {}, agentfx.Invocation(confirmed=True))
    assert rec.dispatched == []


@pytest.mark.anyio
async def test_the_composed_pipeline_asks_the_same_way(anyio_backend: str) -> None:
    asked: list[str] = []

    async def ask(request: ConfirmationRequest) -> bool:
        asked.append(request.prompt)
        return False

    _, runtime = _bound()
    outcome = await runtime._dispatch_composed(RequestedDeleteTodo, {}, agentfx.Invocation(confirm=ask))  # pyright: ignore[reportPrivateUsage]
    assert outcome.failure().message == f"Declined: {PROMPT}"
    assert asked == [PROMPT]


# --- declaring and documenting ----------------------------------------------------------------------


def _asks(req: agentfx.AuthorizationRequest[Any, Any, Any]) -> Confirm:
    return Confirm("Delete?")


def _declared(**kwargs: Any) -> agentfx.Definition[Any, Any]:
    return agentfx.define(agentfx.expose(RequestedDeleteTodo, agentfx.variant(RequestedDeleteTodo, "Delete a todo", **kwargs)))


def test_may_confirm_is_described_in_the_descriptor_manifest_and_markdown() -> None:
    declared = _declared(authorize=_asks, may_confirm=True)
    [descriptor] = agentfx.messages(declared)
    assert descriptor.may_confirm is True
    assert descriptor.requires_authorization is True
    [entry] = agentfx.to_manifest(declared)["capabilities"]
    assert list(entry) == [
        "name",
        "tag",
        "description",
        "inputSchema",
        "modelDependent",
        "requiresAuthorization",
        "mayConfirm",
    ]
    assert entry["mayConfirm"] is True
    markdown = agentfx.to_markdown(declared)
    assert (
        "Runs an authorization check before dispatching.\n\nMay ask a person to confirm before dispatching.\n\nInput:"
        in markdown
    )


def test_an_undeclared_confirm_is_not_documented_but_still_works_at_dispatch() -> None:
    undeclared = _declared(authorize=_asks)
    [descriptor] = agentfx.messages(undeclared)
    assert descriptor.may_confirm is False
    assert "mayConfirm" not in agentfx.to_manifest(undeclared)["capabilities"][0]
    assert "May ask a person" not in agentfx.to_markdown(undeclared)
    rec = recorder()
    runtime = agentfx.bind(undeclared, host=rec.host)

    async def main() -> Any:
        return await run(runtime, RequestedDeleteTodo, {"id": "t1"})

    assert isinstance(anyio.run(main).failure(), agentfx.AgentConfirmationRequiredError)


def test_may_confirm_without_authorize_is_a_contract_error() -> None:
    with pytest.raises(
        ContractError,
        match='Cannot expose "RequestedDeleteTodo": "may_confirm" was declared without "authorize"',
    ):
        _declared(may_confirm=True)


class DeleteInput(msgspec.Struct, frozen=True):
    id: str


def test_an_action_may_declare_confirmation_too() -> None:
    delete = agentfx.Action(
        "delete_todo", "Delete a todo", DeleteInput, lambda i, ctx: RequestedDeleteTodo(id=i.id), message=RequestedDeleteTodo
    )
    confirming = agentfx.action(delete, authorize=lambda req: Confirm(f"Delete {req.input.id}?"), may_confirm=True)
    typed = TodoAgent.action(delete, authorize=lambda req: Confirm(f"Delete {req.input.id}?"), may_confirm=True)
    for variant in (confirming, typed):
        [capability] = agentfx.expose(RequestedDeleteTodo, variant).capabilities
        assert capability.may_confirm is True
    assert agentfx.action(delete, authorize=lambda req: True).may_confirm is False
    with pytest.raises(ContractError, match='"may_confirm" was declared without "authorize"'):
        agentfx.expose(RequestedDeleteTodo, agentfx.action(delete, may_confirm=True))


# Typed as the design says an adapter's confirmer is: a callable answering an awaitable bool.
_CONFIRMER: Callable[[ConfirmationRequest], Awaitable[bool]] = Asker()
_TYPED = agentfx.Invocation(confirm=_CONFIRMER)


# --- confirmation refusals kept for reuse -----------------------------------------------------------


class _Ask(msgspec.Struct, tag=True):
    prompt: str


def _asking_runtime(audit: agentfx.AuditSink | None = None) -> tuple[list[object], agentfx.AgentRuntime[None, None]]:
    sent: list[object] = []

    def ask(request: agentfx.AuthorizationRequest[None, _Ask, None]) -> Confirm:
        return Confirm(request.input.prompt)

    contract = agentfx.define(agentfx.expose(_Ask, agentfx.variant(_Ask, "Ask", name="ask", authorize=ask, may_confirm=True)))
    return sent, agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=sent.append), audit=audit)


@pytest.mark.anyio
async def test_a_repeated_decline_or_missing_confirmer_is_the_same_refusal_in_one_shared_container() -> None:
    from agentfx.pipeline import run_direct

    sent, runtime = _asking_runtime()
    executor = runtime._executor  # pyright: ignore[reportPrivateUsage]
    no = agentfx.Invocation(confirm=Asker(False))
    declined = [await executor.run(_Ask, {"prompt": "Sure?"}, no, run_direct) for _ in range(2)]
    unasked = [await executor.run(_Ask, {"prompt": "Sure?"}, None, run_direct) for _ in range(2)]

    assert declined[0] is declined[1]
    assert declined[0] == Failure(agentfx.AgentAuthorizationError.declined("ask", "_Ask", "Sure?"))
    assert unasked[0] is unasked[1]
    assert unasked[0] == Failure(agentfx.AgentConfirmationRequiredError.of("ask", "_Ask", "Sure?"))
    assert sent == []


@pytest.mark.anyio
async def test_past_its_bound_or_for_a_long_prompt_each_confirmation_refusal_is_made_afresh_and_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentfx import pipeline

    monkeypatch.setattr(pipeline, "ASKED_MAX", 3)
    log = _log()
    sent, runtime = _asking_runtime(audit=log)
    no = agentfx.Invocation(confirm=Asker(False))
    prompts = [f"Ask {i}?" for i in range(6)] + ["x" * (pipeline.ASKED_PROMPT_MAX + 1)]
    for prompt in prompts:
        for _ in range(2):
            outcome = outcome_of(await runtime.messages.dispatch(_Ask, {"prompt": prompt}, no))
            assert outcome == Failure(agentfx.AgentAuthorizationError.declined("ask", "_Ask", prompt))
    kept = runtime._executor.bound.declined["ask"]  # pyright: ignore[reportPrivateUsage]
    assert list(kept) == prompts[:3]
    assert [entry.outcome for entry in log.entries()] == ["AgentAuthorizationError"] * 2 * len(prompts)
    assert sent == []


@pytest.mark.anyio
async def test_the_bound_on_kept_confirmation_refusals_holds_for_calls_an_adapter_watches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An adapter that asks to be told of the dispatch (on_dispatched) runs each
    # call over a copy of the runtime's tables: the bound must count them all.
    from agentfx import pipeline

    monkeypatch.setattr(pipeline, "ASKED_MAX", 3)
    sent, runtime = _asking_runtime()
    no = agentfx.Invocation(confirm=Asker(False))
    told: list[None] = []
    prompts = [f"Ask {i}?" for i in range(6)]
    for prompt in prompts:
        outcome = await runtime.messages.attempt("ask", {"prompt": prompt}, no, on_dispatched=lambda: told.append(None))
        assert outcome == agentfx.AgentAuthorizationError.declined("ask", "_Ask", prompt)
        outcome = await runtime.messages.attempt("ask", {"prompt": prompt}, on_dispatched=lambda: told.append(None))
        assert outcome == agentfx.AgentConfirmationRequiredError.of("ask", "_Ask", prompt)
    bound = runtime._executor.bound  # pyright: ignore[reportPrivateUsage]
    assert (list(bound.declined["ask"]), list(bound.unasked["ask"])) == (prompts[:2], prompts[:1])
    assert (sent, told) == ([], [])


@pytest.mark.anyio
async def test_a_confirmation_settled_at_once_runs_without_a_coroutine_and_one_to_wait_for_is_handed_back() -> None:
    from agentfx.pipeline import InvocationEnv, run_direct

    sent, runtime = _asking_runtime()
    bound = runtime._executor.bound  # pyright: ignore[reportPrivateUsage]

    def direct(invocation: agentfx.Invocation) -> object:
        return run_direct(InvocationEnv(bound, _Ask, {"prompt": "Sure?"}, invocation.filled()))

    def answers(answer: object) -> Any:
        # An adapter may answer a plain bool, or break the promise.
        def confirm(request: ConfirmationRequest) -> object:
            return answer

        return confirm

    # Confirmed out of band, and a confirm that answers a plain bool: settled in the plain run.
    assert type(direct(agentfx.Invocation(confirmed=True))) is DispatchResult
    assert type(direct(agentfx.Invocation(confirm=answers(True)))) is DispatchResult
    assert direct(agentfx.Invocation(confirm=answers(False))) == agentfx.AgentAuthorizationError.declined("ask", "_Ask", "Sure?")
    assert direct(agentfx.Invocation()) == agentfx.AgentConfirmationRequiredError.of("ask", "_Ask", "Sure?")
    assert sent == [_Ask("Sure?"), _Ask("Sure?")]
    # An awaitable answer: the rest of the call is the coroutine's, and nothing is sent before it runs.
    asker = Asker(True)
    waiting = direct(agentfx.Invocation(confirm=asker))
    assert inspect.iscoroutine(waiting)
    assert [r.prompt for r in asker.asked] == [] and len(sent) == 2
    done = await waiting
    assert type(done) is DispatchResult and len(sent) == 3
    assert [r.prompt for r in asker.asked] == ["Sure?"]
    with pytest.raises(agentfx.ContractError, match="answered str; answer a bool"):
        direct(agentfx.Invocation(confirm=answers("yes")))


# --- an answer that comes after the call that asked has ended ---------------------------------------


class _Maybe(msgspec.Struct, tag=True):
    pass


def _verdicts() -> dict[str, Callable[[], object]]:
    async def later_true() -> bool:
        await anyio.lowlevel.checkpoint()
        return True

    async def later_confirm() -> Confirm:
        await anyio.lowlevel.checkpoint()
        return Confirm("Shown?")

    return {
        "allowed outright": lambda: True,
        "allowed outright, later": later_true,
        "asks the shown prompt": lambda: Confirm("Shown?"),
        "asks the shown prompt, later": later_confirm,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("verdict", list(_verdicts()))
async def test_a_call_a_person_declined_is_refused_whatever_authorize_answers_now(verdict: str) -> None:
    answer = _verdicts()[verdict]
    sent: list[object] = []
    principals: list[agentfx.Invocation] = []
    log = _log()

    def principal(invocation: agentfx.Invocation) -> User:
        principals.append(invocation)
        return User("u1")

    def authorize(request: agentfx.AuthorizationRequest[User, _Maybe, None]) -> Any:
        return answer()

    contract = agentfx.define(agentfx.expose(_Maybe, agentfx.variant(_Maybe, "Maybe", name="maybe", authorize=authorize)))
    host = agentfx.Host(model=lambda: None, dispatch=sent.append, principal=principal)
    runtime = agentfx.bind(contract, host=host, audit=log)
    asker = Asker(False)
    outcome = await runtime.messages.attempt("maybe", {}, agentfx.Invocation(confirm=asker), declined="Shown?")

    assert outcome == agentfx.AgentAuthorizationError.declined("maybe", "_Maybe", "Shown?")
    assert sent == []
    # Steps 1–7 ran as for any call: the principal was resolved once, and the call audited as refused.
    assert len(principals) == 1
    [entry] = log.entries()
    assert (entry.capability, entry.decision, entry.outcome) == ("maybe", "refused", "AgentAuthorizationError")
    # The same call without a "no" goes on (or asks), so only the "no" refused it.
    again = await runtime.messages.attempt("maybe", {}, agentfx.Invocation(confirm=Asker(True)))
    assert type(again) is DispatchResult and sent == [_Maybe()]


@pytest.mark.anyio
async def test_a_declined_call_keeps_its_own_refusals_and_a_new_prompt_goes_to_the_invocations_confirm() -> None:
    sent: list[object] = []
    verdict: list[object] = [False]

    def authorize(request: agentfx.AuthorizationRequest[None, _Maybe, None]) -> Any:
        return verdict[0]

    available = [False]
    contract = agentfx.define(
        agentfx.expose(
            _Maybe, agentfx.variant(_Maybe, "Maybe", name="maybe", available=lambda _: available[0], authorize=authorize)
        )
    )
    runtime = agentfx.bind(contract, host=agentfx.Host(model=lambda: None, dispatch=sent.append))

    async def declined(invocation: agentfx.Invocation | None = None) -> object:
        return await runtime.messages.attempt("maybe", {}, invocation, declined="Shown?")

    assert await declined() == agentfx.AgentCapabilityUnavailableError.of("maybe", "_Maybe")
    available[0] = True
    assert await declined() == agentfx.AgentAuthorizationError.of("maybe", "_Maybe")
    assert type(await runtime.messages.attempt("maybe", {"x": 1}, declined="Shown?")) is agentfx.AgentInvalidInputError
    # A prompt the person never saw: the invocation's confirm decides, as for any call.
    verdict[0] = Confirm("Other?")
    asker = Asker(False)
    other = agentfx.AgentAuthorizationError.declined("maybe", "_Maybe", "Other?")
    assert await declined(agentfx.Invocation(confirm=asker)) == other
    assert [r.prompt for r in asker.asked] == ["Other?"]
    assert await declined() == agentfx.AgentConfirmationRequiredError.of("maybe", "_Maybe", "Other?")
    assert sent == []
