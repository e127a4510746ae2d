"""Invocations and abort signals, on their own and as dispatch sees them."""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

import threading
from typing import Any

import anyio
import msgspec
import pytest
from returns.result import Failure, Success

import agentfx
from agentfx.invocation import new_invocation_id
from tests.support import (
    AppAgent,
    DeletedTodo,
    Message,
    Model,
    RequestedCreateTodo,
    RequestedDeleteTodo,
    RequestedRenameTodo,
    outcome_of,
    recorder,
)


def test_invocation_defaults() -> None:
    invocation = agentfx.Invocation()
    assert (invocation.id, invocation.transport, invocation.signal) == (None, "in-app", None)


def test_filled_generates_an_id_only_when_missing() -> None:
    supplied = agentfx.Invocation(id="call-1", transport="mcp")
    assert supplied.filled() is supplied
    blank = agentfx.Invocation(transport="mcp")
    first, second = blank.filled(), blank.filled()
    assert first.id is not None and second.id is not None and first.id != second.id
    assert first.transport == "mcp"
    assert blank.id is None


def test_ids_are_unique() -> None:
    ids = {new_invocation_id() for _ in range(1000)}
    assert len(ids) == 1000


def test_abort_is_idempotent_and_keeps_the_first_reason() -> None:
    controller = agentfx.AbortController()
    signal = controller.signal
    assert (signal.aborted, signal.reason) == (False, None)
    controller.abort("first")
    controller.abort("second")
    assert (signal.aborted, signal.reason) == (True, "first")
    assert repr(signal) == "AbortSignal(aborted=True, reason='first')"


@pytest.mark.anyio
async def test_abort_cancels_every_attached_scope() -> None:
    controller = agentfx.AbortController()
    signal = controller.signal
    caught: list[bool] = []

    async def wait() -> None:
        with anyio.CancelScope() as scope:
            signal.attach(scope)
            try:
                await anyio.sleep_forever()
            finally:
                signal.detach(scope)
        caught.append(scope.cancelled_caught)

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(wait)
        await anyio.wait_all_tasks_blocked()
        controller.abort()
    assert caught == [True, True, True]
    # Aborting released every scope it cancelled: a later abort finds none.
    assert not controller._state.scopes


@pytest.mark.anyio
async def test_attaching_to_an_aborted_signal_cancels_at_once() -> None:
    controller = agentfx.AbortController()
    controller.abort()
    with anyio.CancelScope() as scope:
        controller.signal.attach(scope)
        await anyio.sleep_forever()
    assert scope.cancelled_caught
    assert not controller._state.scopes


# As dispatch sees them


@pytest.mark.anyio
async def test_each_dispatch_gets_a_fresh_id_and_in_app_transport() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    results = [outcome_of(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"})) for _ in range(3)]
    invocations = [r.unwrap().invocation for r in results]
    assert len({i.id for i in invocations}) == 3
    assert all(i.id for i in invocations)
    assert {i.transport for i in invocations} == {"in-app"}


@pytest.mark.anyio
async def test_a_supplied_invocation_is_kept() -> None:
    runtime = agentfx.bind(AppAgent, host=recorder().host)
    invocation = agentfx.Invocation(id="call-7", transport="mcp")
    outcome = outcome_of(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, invocation))
    assert outcome.unwrap().invocation is invocation


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("invocation", "said"),
    [
        (agentfx.Invocation(id=42), "Invocation id must be a string or None, not int"),  # pyright: ignore[reportArgumentType]
        (agentfx.Invocation(transport=None), "Invocation transport must be a string, not NoneType"),  # pyright: ignore[reportArgumentType]
        (agentfx.Invocation(signal="x"), "Invocation signal must be an AbortSignal or None, not str"),  # pyright: ignore[reportArgumentType]
        (agentfx.Invocation(confirm="yes"), "Invocation confirm must be a callable or None, not str"),  # pyright: ignore[reportArgumentType]
        (agentfx.Invocation(confirmed=1), "Invocation confirmed must be a bool, not int"),  # pyright: ignore[reportArgumentType]
        ("call-1", "An invocation must be an agentfx.Invocation, not str"),
    ],
)
async def test_an_invocation_of_the_wrong_shape_is_refused_at_the_call_and_nothing_runs(invocation: Any, said: str) -> None:
    rec = recorder()
    log = agentfx.audit_log()
    runtime = agentfx.bind(AppAgent, host=rec.host, audit=log)
    calls = (
        lambda: runtime.messages.call(RequestedCreateTodo, {"title": "a"}, invocation),
        lambda: runtime.messages.attempt("create_todo", {"title": "a"}, invocation),
        lambda: runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, invocation),
    )
    for call in calls:
        with pytest.raises(TypeError) as refused:
            await call()
        assert str(refused.value) == said
    assert rec.dispatched == [] and log.entries() == []


@pytest.mark.anyio
async def test_an_invocation_of_subclassed_values_is_taken() -> None:
    class Name(str):
        pass

    runtime = agentfx.bind(AppAgent, host=recorder().host)
    invocation = agentfx.Invocation(id=Name("call-8"), transport=Name("mcp"))
    outcome = outcome_of(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, invocation))
    assert outcome.unwrap().invocation is invocation


@pytest.mark.anyio
async def test_a_shared_signal_refuses_every_later_dispatch() -> None:
    rec = recorder()
    runtime = agentfx.bind(AppAgent, host=rec.host)
    controller = agentfx.AbortController()
    invocation = agentfx.Invocation(signal=controller.signal)
    first = outcome_of(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "a"}, invocation))
    assert isinstance(first, Success)
    controller.abort()
    reads = rec.model_reads
    for _ in range(2):
        later = outcome_of(await runtime.messages.dispatch(RequestedCreateTodo, {"title": "b"}, invocation))
        assert later == Failure(agentfx.AgentCancelledError.before_dispatch("requested_create_todo"))
    assert rec.model_reads == reads
    assert len(rec.dispatched) == 1


@pytest.mark.anyio
async def test_one_abort_cancels_every_pending_invocation_sharing_the_signal() -> None:
    rec = recorder(responses={})

    async def waits(req: Any) -> bool:
        await anyio.sleep_forever()
        return True

    async def send(message: object) -> None:
        if isinstance(message, RequestedCreateTodo):
            await anyio.sleep_forever()
        rec.dispatch(message)

    defn = agentfx.define(
        agentfx.expose(
            Message,
            agentfx.variant(RequestedRenameTodo, "Rename", name="authorizing", authorize=waits),
            agentfx.variant(RequestedCreateTodo, "Create", name="sending"),
            agentfx.variant(RequestedDeleteTodo, "Delete", name="waiting", completion=agentfx.Completion(DeletedTodo)),
        )
    )
    host: agentfx.Host[Model, Any, Any] = agentfx.Host(model=rec.model, dispatch=send, observe=rec.observe)
    runtime = agentfx.bind(defn, host=host)
    controller = agentfx.AbortController()
    outcomes: dict[str, object] = {}

    async def go(name: str, payload: object) -> None:
        invocation = agentfx.Invocation(signal=controller.signal)
        outcomes[name] = outcome_of(await runtime.messages.dispatch(name, payload, invocation))

    async with anyio.create_task_group() as group:
        group.start_soon(go, "authorizing", {"id": "t1", "title": "x"})
        group.start_soon(go, "sending", {"title": "x"})
        group.start_soon(go, "waiting", {"id": "t1"})
        await anyio.wait_all_tasks_blocked()
        assert len(controller._state.scopes) == 3
        controller.abort()
    assert outcomes == {
        "authorizing": Failure(agentfx.AgentCancelledError.before_dispatch("authorizing")),
        "sending": Failure(agentfx.AgentCancelledError.while_sending("sending")),
        "waiting": Failure(agentfx.AgentCancelledError.while_waiting("waiting")),
    }
    assert rec.dispatched == [RequestedDeleteTodo("t1")]
    assert rec.listener_count == 0
    assert not controller._state.scopes


def test_a_forked_child_starts_its_own_sequence_of_ids() -> None:
    import os
    import subprocess
    import sys

    if not hasattr(os, "fork"):
        pytest.skip("no fork on this platform")
    # Forked in a fresh single-threaded interpreter, not in the test process.
    program = (
        "import os\n"
        "from agentfx.invocation import new_invocation_id\n"
        "parent = new_invocation_id()\n"
        "read, write = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.write(write, new_invocation_id().encode())\n"
        "    os._exit(0)\n"
        "os.close(write)\n"
        "child = os.read(read, 100).decode()\n"
        "os.waitpid(pid, 0)\n"
        "print(parent, child)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=30)
    parent, child = done.stdout.split()
    assert child.rsplit("-", 1)[0] != parent.rsplit("-", 1)[0]
    assert child.endswith("-1")


@pytest.mark.anyio
async def test_an_abort_from_another_thread_while_a_call_waits_raises_there_and_changes_nothing() -> None:
    # A cancel scope can only be cancelled on its own loop: cancelled from
    # another thread, it lost its deadline and never heard the cancellation,
    # so the call waited forever. Refused instead; the loop's way works.
    rec = recorder(responses={})
    defn = agentfx.define(
        agentfx.expose(
            Message, agentfx.variant(RequestedDeleteTodo, "Delete", name="waiting", completion=agentfx.Completion(DeletedTodo))
        )
    )
    runtime = agentfx.bind(defn, host=agentfx.Host(model=rec.model, dispatch=rec.dispatch, observe=rec.observe))
    controller = agentfx.AbortController()
    outcomes: list[object] = []
    refused: list[BaseException] = []

    def abort_from_a_plain_thread() -> None:
        try:
            controller.abort("from a thread")
        except RuntimeError as exc:
            refused.append(exc)

    async def go() -> None:
        invocation = agentfx.Invocation(signal=controller.signal)
        outcomes.append(outcome_of(await runtime.messages.dispatch("waiting", {"id": "t1"}, invocation)))

    async with anyio.create_task_group() as group:
        group.start_soon(go)
        await anyio.wait_all_tasks_blocked()
        thread = threading.Thread(target=abort_from_a_plain_thread)
        thread.start()
        await anyio.to_thread.run_sync(thread.join)
        assert [str(exc) for exc in refused] == [
            "AbortController.abort() was called from another thread than the event loop's, whose invocations "
            "wait on it; call it on the loop, e.g. anyio.from_thread.run_sync(controller.abort)"
        ]
        assert (controller.signal.aborted, controller.signal.reason, outcomes) == (False, None, [])
        with anyio.fail_after(2):
            await anyio.to_thread.run_sync(lambda: anyio.from_thread.run_sync(controller.abort, "on the loop"))
    assert outcomes == [Failure(agentfx.AgentCancelledError.while_waiting("waiting"))]
    assert controller.signal.reason == "on the loop"
    assert rec.listener_count == 0 and not controller._state.scopes


def test_an_abort_from_another_thread_with_nothing_waiting_aborts() -> None:
    controller = agentfx.AbortController()
    thread = threading.Thread(target=controller.abort, args=("elsewhere",))
    thread.start()
    thread.join()
    assert (controller.signal.aborted, controller.signal.reason) == (True, "elsewhere")


def test_filling_in_an_id_keeps_every_other_field_and_a_subclass_stays_one() -> None:
    async def ask(request: object) -> bool:
        return True

    signal = agentfx.AbortController().signal
    given = agentfx.Invocation(transport="mcp", signal=signal, confirm=ask, confirmed=True)
    filled = given.filled()
    assert filled.id is not None
    assert msgspec.structs.replace(filled, id=None) == given

    class Tagged(agentfx.Invocation, frozen=True):
        tag: str = "kept"

    tagged = Tagged(transport="a2a", tag="mine").filled()
    assert type(tagged) is Tagged and (tagged.tag, tagged.transport) == ("mine", "a2a") and tagged.id is not None
