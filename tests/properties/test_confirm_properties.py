"""Laws of human confirmation over random Models, principals, calls and ways of answering.

Each invocation runs over :data:`tests.support.ConfirmingAgent` with a
:class:`~tests.support.ConfirmationScript` answering as drawn (no way to ask,
approved out of band, approve, decline, approve at once, abort then approve,
abort while asking), sometimes changing the Model while the person decides.
An oracle written out independently of the contract says whether ``authorize``
asks, and what the outcome must be.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from returns.result import Failure, Success

import agentfx
from tests.support import (
    CONFIRMATION_MODES,
    ConfirmationScript,
    ConfirmingAgent,
    Model,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    RequestedRenameTodo,
    Todo,
    User,
    fixed_clock,
    recorder,
    run,
)

PROPERTY = settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

ids = st.sampled_from(["t1", "t2", "keep"])
models = st.builds(
    Model,
    todos=st.lists(st.builds(Todo, id=ids, title=st.text(max_size=5)), max_size=3).map(tuple),
    selected=st.none() | ids,
    locked=st.booleans(),
)
principals = st.builds(User, id=st.just("u"), can_delete=st.booleans(), admin=st.booleans())
later_models = st.none() | models
"""A Model the host switches to while the person decides, or ``None`` for no change."""


@st.composite
def calls(draw: st.DrawFn) -> tuple[type[Any], dict[str, object]]:
    target = draw(st.sampled_from([RequestedDeleteTodo, RequestedRenameTodo, RequestedCreateTodo]))
    if target is RequestedDeleteTodo:
        return target, {}
    if target is RequestedRenameTodo:
        return target, {"id": draw(ids), "title": draw(st.text(max_size=5))}
    return target, {"title": draw(st.text(max_size=5))}


NAMES = {
    RequestedDeleteTodo: "delete_selected_todo",
    RequestedRenameTodo: "rename_todo",
    RequestedCreateTodo: "requested_create_todo",
}


def prompt_for(target: type[Any], payload: dict[str, object], model: Model, principal: User) -> str | None | bool:
    """What ``authorize`` answers, written out: a prompt, ``True`` to allow outright, ``False`` to refuse."""
    if target is RequestedDeleteTodo:
        if not principal.can_delete:
            return False
        title = next((t.title for t in model.todos if t.id == model.selected), model.selected)
        return f'Delete the todo "{title}"?'
    if target is RequestedRenameTodo:
        return f'Rename "{payload["id"]}" to "{payload["title"]}"?' if principal.admin else False
    return True


def available(target: type[Any], model: Model) -> bool:
    if target is RequestedDeleteTodo:
        return model.selected is not None
    if target is RequestedCreateTodo:
        return not model.locked
    return True


@pytest.mark.anyio
@PROPERTY
@given(
    call=calls(),
    model=models,
    principal=principals,
    mode=st.sampled_from(CONFIRMATION_MODES),
    later=later_models,
    slow_host=st.booleans(),
)
async def test_only_an_approval_in_time_reaches_the_host_and_everything_else_refuses(
    call: tuple[type[Any], dict[str, object]],
    model: Model,
    principal: User,
    mode: str,
    later: Model | None,
    slow_host: bool,
) -> None:
    target, payload = call
    rec = recorder(model, principal=principal, async_dispatch=slow_host)
    log = agentfx.audit_log(clock=fixed_clock)
    runtime = agentfx.bind(ConfirmingAgent, host=rec.host, audit=log)
    script = ConfirmationScript(mode, on_ask=None if later is None else lambda: rec.set_model(later))
    outcome = await run(runtime, target, payload, script.invocation())

    answer = prompt_for(target, payload, model, principal) if available(target, model) else None
    asks = isinstance(answer, str)
    # The confirmer is asked exactly when authorize answers Confirm and the call is not
    # already confirmed, and never more than once.
    assert len(script.asked) == (1 if asks and mode not in ("none", "confirmed") else 0)
    name = NAMES[target]
    for request in script.asked:
        assert (request.capability, request.tag, request.prompt) == (name, target.__name__, answer)
        assert request.invocation.id == "call-1"

    # The Model is read once per invocation, however long the person took.
    assert rec.model_reads == 1

    goes_through = answer is True or (asks and script.approves)
    if not goes_through:
        # A declined, unanswered, aborted or refused call never reaches the host.
        assert isinstance(outcome, Failure), outcome
        assert rec.dispatched == []
        assert rec.listener_count == 0
        failure = outcome.failure()
        if answer is None:
            assert type(failure) is agentfx.AgentCapabilityUnavailableError
        elif answer is False:
            assert type(failure) is agentfx.AgentAuthorizationError
            assert not failure.message.startswith("Declined")
        elif mode == "none":
            assert failure == agentfx.AgentConfirmationRequiredError.of(name, target.__name__, str(answer))
        elif mode == "decline":
            assert failure == agentfx.AgentAuthorizationError.declined(name, target.__name__, str(answer))
        else:
            # An abort while asking, or one landing with the approval: nothing sent.
            assert failure == agentfx.AgentCancelledError.before_dispatch(name)
        assert [e.confirmed for e in log.entries()] == [msgspec.UNSET]
        return

    assert isinstance(outcome, Success), outcome
    result = outcome.unwrap()
    # The Message comes from the snapshot read before asking, whatever the Model became.
    assert rec.dispatched == [result.message]
    if target is RequestedDeleteTodo:
        assert result.message == RequestedDeleteTodo(id=model.selected or "")
    [entry] = log.entries()
    assert entry.confirmed == (True if asks else msgspec.UNSET)


@pytest.mark.anyio
@PROPERTY
@given(model=models, principal=principals, mode=st.sampled_from(CONFIRMATION_MODES), repeats=st.integers(1, 3))
async def test_the_confirmer_is_asked_at_most_once_per_invocation_and_once_for_each(
    model: Model, principal: User, mode: str, repeats: int
) -> None:
    # One script shared by several invocations: each asks at most once, and an
    # invocation that asks asks exactly once, also on the composed pipeline.
    rec = recorder(model, principal=principal)
    runtime = agentfx.bind(ConfirmingAgent, host=rec.host)
    asks = model.selected is not None and principal.can_delete and mode not in ("none", "confirmed")
    script = ConfirmationScript(mode)
    for index in range(repeats):
        if script.controller.signal.aborted:
            script.controller = agentfx.AbortController()
        rec.set_model(model)  # a completed delete cleared the selection
        invocation = script.invocation(id=f"call-{index}")
        if index % 2:
            await runtime._dispatch_composed(RequestedDeleteTodo, {}, invocation)  # pyright: ignore[reportPrivateUsage]
        else:
            await run(runtime, RequestedDeleteTodo, {}, invocation)
    assert [r.invocation.id for r in script.asked] == ([f"call-{i}" for i in range(repeats)] if asks else [])
    assert rec.model_reads == repeats
