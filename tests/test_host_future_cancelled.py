"""A future that the host or a hook hands out, and then cancels itself, is their defect.

So is a coroutine that raises a ``CancelledError`` of its own (it awaited a
task someone else cancelled). Its ``CancelledError`` would pass for the caller's own cancellation: audited
``interrupted``, and inside a task group a child that nobody cancelled would
end without a trace. It raises a defect instead, audited ``AgentDefect``;
the caller's own abort, deadline or cancellation still ends only its own
wait, never the future other invocations may share.

asyncio only: futures are asyncio's, and a trio host has none to hand out
(an asyncio ``CancelledError`` raised on trio is tested at the end).
"""
# pyright: reportPrivateUsage=false
# (the composed run is reached through the runtime's internal entry, on purpose)

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec
import pytest

import agentfx
from agentfx import DispatchResult

pytestmark = pytest.mark.anyio

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


class _Do(msgspec.Struct, frozen=True, tag=True):
    id: str


class _Done(msgspec.Struct, frozen=True, tag=True):
    id: str


_ROLES = {
    # what hands the future out, and where the call stood when it failed
    "host": ("host.dispatch", "unknown"),
    "host-completion": ("host.dispatch", "unknown"),
    "host-watched": ("host.dispatch", "unknown"),
    "authorize": ("authorize", "refused"),
    "confirm": ("confirm", "refused"),
}


def _no_model() -> None:
    return None


class _Setup:
    """One capability whose host, ``authorize`` or ``confirm`` answers with the future :attr:`handed`."""

    def __init__(self, shared: str, kind: str = "future") -> None:
        self.shared = shared
        self.kind = kind
        self.handed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent: list[object] = []
        self.listeners: list[Callable[[object], None]] = []
        self.log = agentfx.audit_log()
        completion: agentfx.Completion[_Do, _Done] | None = (
            agentfx.Completion(_Done, timeout=5) if shared == "host-completion" else None
        )
        authorize: Callable[[Any], Any] | None = None
        if shared == "authorize":
            authorize = self.authorize
        elif shared == "confirm":
            authorize = self.confirming
        variant = agentfx.variant(_Do, "Do", name="do", authorize=authorize, completion=completion)
        definition = agentfx.define(agentfx.expose(_Do | _Done, variant))
        host: agentfx.Host[None, Any, None] = agentfx.Host(model=_no_model, dispatch=self.dispatch, observe=self.observe)
        self.runtime = agentfx.bind(definition, host=host, audit=self.log)

    def dispatch(self, message: object) -> object:
        self.sent.append(message)
        return self.hand() if self.shared.startswith("host") else None

    def hand(self) -> Awaitable[Any]:
        """The future itself, or a coroutine of the hook's own that awaits it (shielded, so a cancel of the caller leaves it)."""
        if self.kind == "future":
            return self.handed

        async def awaiting() -> Any:
            return await asyncio.shield(self.handed)

        return awaiting()

    def observe(self, listener: Callable[[object], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def authorize(self, request: Any) -> Any:
        return self.hand()

    def confirming(self, request: Any) -> Any:
        return agentfx.Confirm("Do it?")

    def ask(self, request: agentfx.ConfirmationRequest) -> Awaitable[bool]:
        return self.hand()

    def call(self, runner: str, signal: agentfx.AbortSignal | None = None) -> Awaitable[object]:
        confirm = self.ask if self.shared == "confirm" else None
        invocation = agentfx.Invocation(id="i1", signal=signal, confirm=confirm)
        if runner == "composed":
            return self.runtime._dispatch_composed("do", {"id": "a"}, invocation)
        told = (lambda: None) if self.shared == "host-watched" else None
        return self.runtime.messages.attempt("do", {"id": "a"}, invocation, on_dispatched=told)


KINDS = pytest.mark.parametrize("kind", ["future", "coroutine"])


@ASYNCIO
@KINDS
@pytest.mark.parametrize("runner", ["direct", "composed"])
@pytest.mark.parametrize("signalled", [False, True], ids=["no-signal", "signal"])
@pytest.mark.parametrize("shared", list(_ROLES))
@pytest.mark.parametrize("when", ["while-awaited", "before"])
async def test_a_future_cancelled_by_whoever_handed_it_out_is_their_defect(
    anyio_backend: str, shared: str, signalled: bool, runner: str, when: str, kind: str
) -> None:
    setup = _Setup(shared, kind)
    role, decision = _ROLES[shared]
    controller = agentfx.AbortController()
    if when == "before":
        setup.handed.cancel()
    else:
        asyncio.get_running_loop().call_later(0.01, setup.handed.cancel)
    with anyio.fail_after(5), pytest.raises(RuntimeError) as raised:
        await setup.call(runner, controller.signal if signalled else None)
    noun, article = ("future", "a") if kind == "future" else ("awaitable", "an")
    assert str(raised.value) == (
        f'{article.capitalize()} {noun} that "{role}" handed out was cancelled while an invocation awaited it, '
        f"though nothing cancelled the invocation: such {article} {noun} must end with a result or an exception"
    )
    assert [(e.decision, e.outcome) for e in setup.log.entries()] == [(decision, "AgentDefect")]
    assert setup.listeners == []
    # The caller itself was never cancelled: it goes on as it was.
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await anyio.lowlevel.checkpoint()


@ASYNCIO
@KINDS
@pytest.mark.parametrize("shared", list(_ROLES))
async def test_in_a_task_group_the_defect_reaches_the_parent(anyio_backend: str, shared: str, kind: str) -> None:
    # The CancelledError, raised in a child nobody cancelled, ended the child
    # and was swallowed by the group: the call vanished without a trace.
    setup = _Setup(shared, kind)
    finished: list[object] = []

    async def child() -> None:
        finished.append(await setup.call("direct"))

    asyncio.get_running_loop().call_later(0.01, setup.handed.cancel)
    with anyio.fail_after(5), pytest.raises(ExceptionGroup) as raised:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(child)
    assert raised.group_contains(RuntimeError, match="was cancelled while an invocation awaited it")
    assert finished == []


@ASYNCIO
@pytest.mark.parametrize("runner", ["direct", "composed"])
@pytest.mark.parametrize("shared", list(_ROLES))
async def test_a_future_that_ends_otherwise_is_awaited_as_it_ends(anyio_backend: str, shared: str, runner: str) -> None:
    answer = {"authorize": True, "confirm": True}.get(shared)
    setup = _Setup(shared)
    asyncio.get_running_loop().call_later(0.01, setup.handed.set_result, answer)
    if shared == "host-completion":
        asyncio.get_running_loop().call_later(0.02, lambda: [listener(_Done("a")) for listener in list(setup.listeners)])
    with anyio.fail_after(5):
        outcome: Any = await setup.call(runner)
    result = outcome.unwrap() if runner == "composed" else outcome
    assert type(result) is DispatchResult and setup.sent == [_Do("a")]
    failing = _Setup(shared)
    asyncio.get_running_loop().call_later(0.01, failing.handed.set_exception, ConnectionError("host down"))
    with anyio.fail_after(5), pytest.raises(ConnectionError, match="host down"):
        await failing.call(runner)
    assert [e.outcome for e in failing.log.entries()] == ["AgentDefect"]


@ASYNCIO
@KINDS
@pytest.mark.parametrize("shared", list(_ROLES))
async def test_the_callers_own_cancellation_is_still_interrupted_and_leaves_the_future_alone(
    anyio_backend: str, shared: str, kind: str
) -> None:
    setup = _Setup(shared, kind)
    with anyio.fail_after(5):
        with anyio.move_on_after(0.01):
            await setup.call("direct")
    _, decision = _ROLES[shared]
    assert [(e.decision, e.outcome) for e in setup.log.entries()] == [(decision, "interrupted")]
    assert not setup.handed.done()
    # The future's later cancellation is its other waiters' business: this call is over.
    setup.handed.cancel()
    await anyio.lowlevel.checkpoint()


@ASYNCIO
@KINDS
@pytest.mark.parametrize("shared", list(_ROLES))
async def test_an_abort_and_the_futures_cancellation_together_are_the_abort(
    anyio_backend: str, shared: str, kind: str
) -> None:
    # The invocation's own abort lands first: its wait was cut short, and what
    # becomes of the future afterwards is no longer this call's.
    setup = _Setup(shared, kind)
    controller = agentfx.AbortController()

    def both() -> None:
        controller.abort()
        setup.handed.cancel()

    asyncio.get_running_loop().call_later(0.01, both)
    with anyio.fail_after(5):
        outcome = await setup.call("direct", controller.signal)
    assert isinstance(outcome, agentfx.AgentCancelledError)
    assert [e.outcome for e in setup.log.entries()] == ["AgentCancelledError"]


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_on_trio_an_asyncio_cancelled_error_from_the_host_is_its_defect(anyio_backend: str) -> None:
    # trio's cancellation is trio.Cancelled: an asyncio CancelledError raised
    # on trio cancelled nothing, and must not end a trio task as if it had.
    log = agentfx.audit_log()

    async def dispatch(message: object) -> None:
        await anyio.lowlevel.checkpoint()
        raise asyncio.CancelledError

    host: agentfx.Host[None, Any, None] = agentfx.Host(model=_no_model, dispatch=dispatch)
    runtime = agentfx.bind(agentfx.define(agentfx.expose(_Do, agentfx.variant(_Do, "Do", name="do"))), host=host, audit=log)
    with anyio.fail_after(5), pytest.raises(RuntimeError, match='An awaitable that "host.dispatch" handed out was cancelled'):
        await runtime.messages.attempt("do", {"id": "a"})
    assert [(e.decision, e.outcome) for e in log.entries()] == [("unknown", "AgentDefect")]
