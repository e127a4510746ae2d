"""The recording host processes Messages in the reference program's order and keeps its scripts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any
from unittest.mock import Mock

import anyio
import msgspec
import pytest

import agentfx
from agentfx import program as program_module
from agentfx.host import Host, Unsubscribe
from agentfx.program import run_program
from agentfx.testing import RecordingHost


class Req(msgspec.Struct, frozen=True, tag=True):
    pass


class Done(msgspec.Struct, frozen=True, tag=True):
    step: str


Observe = Callable[[Callable[[Any], object]], Unsubscribe]


def _reacting(host: Host[Any, Any, Any], observe: Observe) -> list[tuple[str, object]]:
    """Two observers, the first dispatching a follow-up for 1: what each heard, in order."""
    heard: list[tuple[str, object]] = []

    def first(message: object) -> None:
        heard.append(("first", message))
        if message == 1:
            host.dispatch(2)

    observe(first)
    observe(lambda message: heard.append(("second", message)))
    host.dispatch(1)
    return heard


def _program() -> AbstractAsyncContextManager[program_module.Program[int, int]]:
    return run_program(init=0, update=lambda model, message: model + message)


async def test_a_message_sent_by_a_listener_waits_for_the_current_ones_listeners_as_in_the_program(
    anyio_backend: str,
) -> None:
    recorder: RecordingHost[int, int, None] = RecordingHost(0, update=lambda model, message: model + message)
    recorded = _reacting(recorder.host, recorder.observe)
    async with _program() as program:
        expected = _reacting(program.host(), program.observe)
    assert recorded == expected == [("first", 1), ("second", 1), ("first", 2), ("second", 2)]
    assert recorder.dispatched == [1, 2]
    assert recorder.model() == 3


def test_a_listener_sees_the_model_of_the_message_it_hears() -> None:
    recorder: RecordingHost[int, int, None] = RecordingHost(0, update=lambda model, message: model + message)
    seen: list[tuple[int, int]] = []

    def observer(message: int) -> None:
        seen.append((message, recorder.model()))
        if message == 1:
            recorder.emit(10)

    recorder.observe(observer)
    recorder.subscribe(lambda: seen.append((0, recorder.model())))
    recorder.emit(1)
    assert seen == [(0, 1), (1, 1), (0, 11), (10, 11)]


def test_a_listener_removed_during_a_notification_is_not_called() -> None:
    recorder: RecordingHost[None, int, None] = RecordingHost(None)
    heard: list[str] = []
    removals: list[Unsubscribe] = []

    def first(_: int) -> None:
        heard.append("first")
        removals[0]()

    recorder.observe(first)
    removals.append(recorder.observe(lambda _: heard.append("removed")))
    recorder.host.dispatch(1)
    assert heard == ["first"]
    assert recorder.listener_count == 1


def test_a_subscriber_removed_by_another_during_a_notification_is_not_called() -> None:
    recorder: RecordingHost[int, int, None] = RecordingHost(0)
    heard: list[str] = []
    removals: list[Unsubscribe] = []

    def first() -> None:
        heard.append("first")
        removals[0]()

    recorder.subscribe(first)
    removals.append(recorder.subscribe(lambda: heard.append("removed")))
    recorder.set_model(1)
    assert heard == ["first"]


def test_a_listener_added_during_a_notification_hears_the_next_one() -> None:
    recorder: RecordingHost[None, int, None] = RecordingHost(None)
    heard: list[tuple[str, int]] = []

    def first(message: int) -> None:
        heard.append(("first", message))
        if message == 1:
            recorder.observe(lambda later: heard.append(("added", later)))

    recorder.observe(first)
    recorder.emit(1)
    recorder.emit(2)
    assert heard == [("first", 1), ("first", 2), ("added", 2)]


async def test_first_match_wins_settles_as_under_the_program(anyio_backend: str) -> None:
    # The application answers the request with "first", and reacts to "first" with "second":
    # the call settles with the first success processed, whichever host runs it.
    contract = agentfx.define(
        agentfx.expose(Req | Done, agentfx.variant(Req, "Request", completion=agentfx.Completion(success=Done, timeout=5)))
    )

    def follow_up(host: Host[Any, Any, Any]) -> Callable[[object], None]:
        def on(message: object) -> None:
            if message == Done("first"):
                host.dispatch(Done("second"))

        return on

    async def settled(host: Host[Any, Any, Any]) -> object:
        runtime = agentfx.bind(contract, host=host)
        result = await runtime.messages.call(Req, {})
        assert result.completion is not None
        return result.completion.message

    recorder: RecordingHost[None, Any, None] = RecordingHost(None, responses={Req: [Done("first")]})
    recorder.observe(follow_up(recorder.host))
    assert await settled(recorder.host) == Done("first")

    def update(model: tuple[object, ...], message: object) -> tuple[object, ...]:
        return (*model, message)

    async with run_program(init=(), update=update) as program:
        host = program.host()
        program.observe(lambda message: host.dispatch(Done("first")) if isinstance(message, Req) else None)
        program.observe(follow_up(host))
        assert await settled(host) == Done("first")
        assert program.model == (Req(), Done("first"), Done("second"))


def _answering(*, async_dispatch: bool = False) -> tuple[RecordingHost[None, Any, None], list[object]]:
    """A recorder that answers ``Req`` with a scripted response, and an observer that reacts to it first."""
    recorder: RecordingHost[None, Any, None] = RecordingHost(
        None, responses={Req: [Done("response")]}, async_dispatch=async_dispatch
    )
    heard: list[object] = []

    def reacting(message: object) -> None:
        heard.append(message)
        if isinstance(message, Req):
            recorder.emit(Done("reaction"))

    recorder.observe(reacting)
    return recorder, heard


def test_responses_follow_what_the_listeners_sent() -> None:
    recorder, heard = _answering()
    recorder.host.dispatch(Req())
    assert heard == [Req(), Done("reaction"), Done("response")]
    # A Message dispatched from a listener is answered too, after its own listeners.
    heard.clear()
    recorder.observe(lambda message: recorder.host.dispatch(Req()) if message == Done("go") else None)
    recorder.emit(Done("go"))
    assert heard == [Done("go"), Req(), Done("reaction"), Done("response")]


def test_every_queued_message_is_processed_past_a_listener_that_raised() -> None:
    recorder: RecordingHost[None, int, None] = RecordingHost(None)
    heard: list[int] = []

    def observer(message: int) -> None:
        heard.append(message)
        if message == 1:
            recorder.emit(2)
            recorder.emit(3)
        if message == 2:
            raise ValueError("two")

    recorder.observe(observer)
    with pytest.raises(ValueError, match="two"):
        recorder.emit(1)
    assert heard == [1, 2, 3]
    recorder.emit(4)  # nothing is left queued or half-processed
    assert heard == [1, 2, 3, 4]


def test_a_listener_that_never_lets_the_host_settle_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx._sequencing.NESTED_MAX", 5)
    recorder: RecordingHost[None, int, None] = RecordingHost(None)
    heard: list[int] = []

    def forever(message: int) -> None:
        heard.append(message)
        recorder.emit(message + 1)

    recorder.observe(forever)
    with pytest.raises(RuntimeError, match="reaction to 5 reactions in a row"):
        recorder.emit(0)
    assert heard == [0, 1, 2, 3, 4]


async def test_an_async_dispatch_processes_responses_after_its_checkpoint(anyio_backend: str) -> None:
    recorder, heard = _answering(async_dispatch=True)
    assert recorder.host.dispatch == recorder.dispatch_async
    await recorder.dispatch_async(Req())
    assert heard == [Req(), Done("reaction"), Done("response")]


# --- scripted responses and principals ------------------------------------------------


def test_responses_given_as_a_generator_answer_every_dispatch() -> None:
    recorder: RecordingHost[None, Any, None] = RecordingHost(
        None, responses={Req: (Done(step) for step in ("one", "two"))}
    )
    heard: list[object] = []
    recorder.observe(heard.append)
    recorder.host.dispatch(Req())
    recorder.host.dispatch(Req())
    assert heard == [Req(), Done("one"), Done("two"), Req(), Done("one"), Done("two")]


def test_responses_are_read_when_the_host_is_made() -> None:
    script = [Done("one")]
    scripts: dict[type[Any], Any] = {Req: script}
    recorder: RecordingHost[None, Any, None] = RecordingHost(None, responses=scripts)
    script.append(Done("later"))
    scripts[Done] = [Done("never")]
    heard: list[object] = []
    recorder.observe(heard.append)
    recorder.host.dispatch(Req())
    assert heard == [Req(), Done("one")]


def test_a_response_function_is_called_per_dispatch() -> None:
    calls: list[object] = []

    def answer(message: object) -> Iterator[object]:
        calls.append(message)
        yield Done(str(len(calls)))

    recorder: RecordingHost[None, Any, None] = RecordingHost(None, responses={Req: answer})
    heard: list[object] = []
    recorder.observe(heard.append)
    recorder.host.dispatch(Req())
    recorder.host.dispatch(Req())
    assert heard == [Req(), Done("1"), Req(), Done("2")]


def test_a_callable_principal_is_a_resolver_and_a_wrapped_one_a_value() -> None:
    service = Mock(return_value="resolved")
    invocation = agentfx.Invocation()
    resolving: RecordingHost[None, Any, Any] = RecordingHost(None, principal=service)
    assert resolving.principal(invocation) == "resolved"
    service.assert_called_once_with(invocation)
    wrapped: RecordingHost[None, Any, Any] = RecordingHost(None, principal=lambda _: service)
    assert wrapped.principal(invocation) is service
    plain: RecordingHost[None, Any, str] = RecordingHost(None, principal="ann")
    assert plain.principal(invocation) == "ann"
    assert (resolving.principal_calls, wrapped.principal_calls, plain.principal_calls) == (1, 1, 1)


async def test_the_recording_host_serves_a_runtime_on_both_backends(anyio_backend: str) -> None:
    recorder: RecordingHost[None, Any, None] = RecordingHost(None)
    contract = agentfx.define(agentfx.expose(Req | Done, agentfx.variant(Req, "Request")))
    runtime = agentfx.bind(contract, host=recorder.host)
    with anyio.fail_after(5):
        await runtime.messages.call(Req, {})
    assert recorder.dispatched == [Req()]


class Count(msgspec.Struct, frozen=True):
    n: int = 0


async def _save() -> Done:
    return Done("saved")


def _counting(model: Count, message: Req | Done) -> Count | tuple[Count, agentfx.program.Commands[Req | Done]]:
    """An application's update: a Model, or ``(Model, commands)`` as DESIGN §2 allows."""
    if isinstance(message, Req):
        return Count(model.n + 1), [_save]
    return model


@pytest.mark.anyio
async def test_an_update_returning_model_and_commands_sets_the_model_as_the_program_does(anyio_backend: str) -> None:
    async with run_program(init=Count(), update=_counting) as program:
        await program.send(Req())
        expected = program.model
    recorder = RecordingHost(Count(), update=_counting)
    changes: list[Count] = []
    recorder.subscribe(lambda: changes.append(recorder.model()))
    recorder.host.dispatch(Req())
    assert recorder.model() == expected == Count(1)
    assert changes == [Count(1)]
    # Kept, not run: nothing was sent back in.
    assert recorder.commands == [_save]
    assert recorder.dispatched == [Req()]
    recorder.host.dispatch(Done("x"))
    assert recorder.model() == Count(1) and recorder.commands == [_save]


def test_a_model_that_is_a_tuple_is_read_by_the_program_s_rule() -> None:
    # A 2-tuple whose second item is not a list of callables is the Model itself.
    recorder = RecordingHost((0, (1, 2)), update=lambda model, message: (model[0] + 1, model[1]))
    recorder.host.dispatch(Req())
    assert recorder.model() == (1, (1, 2)) and recorder.commands == []

    def calls_its_command(model: int, message: object) -> Any:
        return model, [_save()]  # a command called where it should be named

    called = RecordingHost(0, update=calls_its_command)
    with pytest.raises(TypeError):
        called.host.dispatch(Req())
