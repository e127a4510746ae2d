"""No leaks on any exit path: every listener released and no task left behind, asserted per path.

Each scenario runs against two hosts: the in-memory :class:`RecordingHost` (results answered
synchronously inside dispatch) and the reference program from :func:`agentfx.run_program`
(results arriving later, from commands), on asyncio and on trio.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import msgspec
import pytest

import agentfx
from agentfx import AbortController, CallInfo, Completion, Host, Invocation, when
from agentfx.program import Commands, run_program
from agentfx.testing.recording import RecordingHost
from tests.completion_support import (
    A,
    Create,
    Created,
    CreateFailed,
    Model,
    Rename,
    TitleInput,
    create_variant,
    request_key,
    result_key,
    until,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _no_long_collection() -> Iterator[None]:
    # The scenarios race real deadlines of a fraction of a second. Late in a
    # long test run the heap is large, and one full collection over it can
    # stall the loop past such a deadline: what the run left is kept out of
    # the collector's walks while a scenario runs, then handed back.
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class CreateKeyed(msgspec.Struct, frozen=True, tag=True):
    title: str
    request: str = ""


class Ping(msgspec.Struct, frozen=True, tag=True):
    title: str


Message = Create | CreateKeyed | Created | CreateFailed | Rename | Ping

TIMEOUT = 0.3
"""Waited out by the silent scenarios; long enough that a loaded machine does not time out the others first."""


def correlate(request: TitleInput, result: Created | CreateFailed, call: CallInfo) -> bool:
    if result.title == "bad-correlate":
        raise LookupError("correlate failed")
    return result.request == call.message.request


def renamed(name: str, request: Rename) -> bool:
    if name == "bad":
        raise LookupError("predicate failed")
    return name == request.name


DEFINITION = A.define(
    A.expose(
        Message,
        create_variant(Completion(success=Created, failure=CreateFailed, correlate=correlate, timeout=TIMEOUT)),
        A.variant(
            CreateKeyed,
            "Create, matched by key",
            input=TitleInput,
            to_message=lambda i, ctx: CreateKeyed(i.title, ctx.invocation.id or ""),
            completion=Completion(
                success=Created, failure=CreateFailed, correlate_key=(request_key, result_key), timeout=TIMEOUT
            ),
        ),
        A.variant(Rename, "Rename", completion=when(projection=lambda m: m.name, predicate=renamed, timeout=TIMEOUT)),
        A.variant(Ping, "Ping"),
    )
)


def result_of(message: object) -> Created | CreateFailed | None:
    """The result the application eventually produces for a create Message, if any."""
    if isinstance(message, Create | CreateKeyed):
        if message.title in ("ok", "bad-correlate"):
            return Created(message.title, message.request)
        if message.title == "fail":
            return CreateFailed(message.title, message.request)
    return None


def model_update(model: Model, message: object) -> Model:
    if isinstance(message, Create | CreateKeyed) and message.title == "boom":
        raise RuntimeError("update failed")
    if isinstance(message, Rename) and message.name != "silent":
        return Model(message.name)
    return model


def program_update(model: Model, message: object) -> Model | tuple[Model, Commands[object]]:
    new = model_update(model, message)
    result = result_of(message)
    if result is None:
        return new

    async def command() -> object:
        await anyio.sleep(0)
        return result

    return new, [command]


@dataclass
class Kit:
    """One host under test: its ``Host``, a live listener count, and what reached it."""

    host: Host[Model, Any, None]
    listeners: Callable[[], int]
    sent: list[object] = field(default_factory=lambda: [])


def wrapped(base: Host[Model, Any, None], sent: list[object]) -> Host[Model, Any, None]:
    """``base`` with dispatches that hang or raise, chosen by the Message's title or name."""

    async def hang() -> None:
        await anyio.sleep_forever()

    async def raise_later() -> None:
        await anyio.sleep(0)
        raise ConnectionError("async host failure")

    def dispatch(message: Any) -> object:
        sent.append(message)
        word = getattr(message, "title", None) or getattr(message, "name", None)
        if word == "hang":
            return hang()
        if word == "raise":
            raise ConnectionError("sync host failure")
        if word == "araise":
            return raise_later()
        return base.dispatch(message)

    return Host(model=base.model, dispatch=dispatch, observe=base.observe, subscribe=base.subscribe)


@asynccontextmanager
async def recording_kit() -> AsyncGenerator[Kit]:
    def respond(message: object) -> list[object]:
        result = result_of(message)
        return [] if result is None else [result]

    recorder: RecordingHost[Model, Any, None] = RecordingHost(
        Model(), responses={Create: respond, CreateKeyed: respond}, update=model_update
    )
    sent: list[object] = []
    yield Kit(wrapped(recorder.host, sent), lambda: recorder.listener_count, sent)


@asynccontextmanager
async def program_kit() -> AsyncGenerator[Kit]:
    async with run_program(init=Model(), update=program_update) as program:
        sent: list[object] = []
        yield Kit(wrapped(program.host(), sent), lambda: program.listener_count, sent)


KITS = {"recording": recording_kit, "program": program_kit}

Action = Literal["none", "abort", "cancel", "pre-abort"]


@dataclass(frozen=True)
class Scenario:
    id: str
    target: type[Any]
    payload: dict[str, object]
    decision: str
    outcome: str
    action: Action = "none"


SCENARIOS = [
    Scenario("success", Create, {"title": "ok"}, "dispatched", "completed"),
    Scenario("failure", Create, {"title": "fail"}, "dispatched", "failed"),
    Scenario("timeout", Create, {"title": "silent"}, "dispatched", "timeout"),
    Scenario("abort-waiting", Create, {"title": "silent"}, "dispatched", "AgentCancelledError", "abort"),
    Scenario("abort-sending", Create, {"title": "hang"}, "unknown", "AgentCancelledError", "abort"),
    Scenario("deadline-sending", Create, {"title": "hang"}, "unknown", "timeout"),
    Scenario("cancel-waiting", Create, {"title": "silent"}, "dispatched", "interrupted", "cancel"),
    Scenario("cancel-sending", Create, {"title": "hang"}, "unknown", "interrupted", "cancel"),
    Scenario("refused-input", Create, {"title": 3}, "refused", "AgentInvalidInputError"),
    Scenario("refused-aborted", Create, {"title": "ok"}, "refused", "AgentCancelledError", "pre-abort"),
    Scenario("update-raises", Create, {"title": "boom"}, "unknown", "AgentDefect"),
    Scenario("host-raises-sync", Create, {"title": "raise"}, "unknown", "AgentDefect"),
    Scenario("host-raises-async", Create, {"title": "araise"}, "unknown", "AgentDefect"),
    Scenario("correlate-raises", Create, {"title": "bad-correlate"}, "dispatched", "AgentDefect"),
    Scenario("keyed-success", CreateKeyed, {"title": "ok"}, "dispatched", "completed"),
    Scenario("keyed-failure", CreateKeyed, {"title": "fail"}, "dispatched", "failed"),
    Scenario("keyed-timeout", CreateKeyed, {"title": "silent"}, "dispatched", "timeout"),
    Scenario("keyed-abort", CreateKeyed, {"title": "silent"}, "dispatched", "AgentCancelledError", "abort"),
    Scenario("keyed-host-raises", CreateKeyed, {"title": "raise"}, "unknown", "AgentDefect"),
    Scenario("state-success", Rename, {"name": "ok"}, "dispatched", "completed"),
    Scenario("state-timeout", Rename, {"name": "silent"}, "dispatched", "timeout"),
    Scenario("state-predicate-raises", Rename, {"name": "bad"}, "dispatched", "AgentDefect"),
    Scenario("state-abort", Rename, {"name": "silent"}, "dispatched", "AgentCancelledError", "abort"),
    Scenario("state-abort-sending", Rename, {"name": "hang"}, "unknown", "AgentCancelledError", "abort"),
    Scenario("state-cancel", Rename, {"name": "hang"}, "unknown", "interrupted", "cancel"),
    Scenario("state-host-raises", Rename, {"name": "raise"}, "unknown", "AgentDefect"),
    Scenario("plain-success", Ping, {"title": "ok"}, "dispatched", "dispatched"),
    Scenario("plain-abort-sending", Ping, {"title": "hang"}, "unknown", "AgentCancelledError", "abort"),
    Scenario("plain-host-raises", Ping, {"title": "araise"}, "unknown", "AgentDefect"),
]


def task_ids() -> set[int]:
    return {task.id for task in anyio.get_running_tasks()}


@pytest.mark.parametrize("kit_name", list(KITS))
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
async def test_no_listener_or_task_outlives_an_invocation(anyio_backend: str, kit_name: str, scenario: Scenario) -> None:
    async with KITS[kit_name]() as kit:
        log = agentfx.audit_log()
        runtime = A.bind(DEFINITION, host=kit.host, audit=log)
        controller = AbortController()
        if scenario.action == "pre-abort":
            controller.abort()
        before = task_ids()
        assert kit.listeners() == 0

        async def call() -> None:
            invocation = Invocation(signal=controller.signal)
            try:
                await runtime.messages.dispatch(scenario.target, scenario.payload, invocation)
            except (ConnectionError, RuntimeError, LookupError):
                pass  # a defect propagates; the audit entry below says which path ran

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                if scenario.action in ("abort", "cancel"):
                    await until(lambda: len(kit.sent) == 1)
                    # A sent Message means a listener is attached (except without a contract).
                    assert kit.listeners() == (0 if scenario.target is Ping else 1)
                    if scenario.action == "abort":
                        controller.abort()
                    else:
                        tasks.cancel_scope.cancel()

        assert [(e.decision, e.outcome) for e in log.entries()] == [(scenario.decision, scenario.outcome)]
        assert kit.listeners() == 0
        assert task_ids() == before


async def test_one_observer_is_shared_by_every_pending_invocation(anyio_backend: str) -> None:
    async with recording_kit() as kit:
        runtime = A.bind(DEFINITION, host=kit.host)

        async def call(target: type[Any]) -> None:
            await runtime.messages.dispatch(target, {"title": "silent"})

        async with anyio.create_task_group() as tasks:
            for _ in range(20):
                tasks.start_soon(call, Create)
                tasks.start_soon(call, CreateKeyed)
            await until(lambda: len(kit.sent) == 40)
            assert kit.listeners() == 1  # forty pending, one observe listener
            tasks.cancel_scope.cancel()
        assert kit.listeners() == 0
