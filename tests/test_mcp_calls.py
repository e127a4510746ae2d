"""How an MCP call runs: inline in its request handler, shielded, its controller registered per connection.

Every way a call can end leaves the connection's table of calls in flight
empty; every way a request can be cancelled (the client's
``notifications/cancelled``, a cancelled in-process call awaiting its
completion, the connection closing, the server stopping) reaches the
pipeline as an abort of the call's signal, so the audit records a
cancellation; and a call starts no task unless something must run beside it
(the progress of a completion, which is also the watch on its cancellation).
Each test runs on asyncio and trio, and on both eras the SDK speaks in-process.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp
import mcp_types as types
import msgspec
import pytest
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

import agentfx
from agentfx.audit import AuditEntry, AuditLog
from agentfx.mcp import server
from agentfx.mcp._server import Connection
from agentfx.runtime import AgentRuntime
from tests.mcp_wire import INITIALIZE, call, text

pytestmark = pytest.mark.anyio

MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])


class Poke(msgspec.Struct, frozen=True, tag=True):
    """Answered at once."""


class Hang(msgspec.Struct, frozen=True, tag=True):
    """The host never finishes dispatching it."""


class Wait(msgspec.Struct, frozen=True, tag=True):
    """Accepted at once, completed by ``Done``."""


class Done(msgspec.Struct, frozen=True, tag=True):
    pass


class Nope(msgspec.Struct, frozen=True, tag=True):
    """Always refused."""


class Boom(msgspec.Struct, frozen=True, tag=True):
    """``authorize`` raises."""


class Ponder(msgspec.Struct, frozen=True, tag=True):
    """Awaits its completion, behind an ``authorize`` that never answers."""


class Linger(msgspec.Struct, frozen=True, tag=True):
    """Awaits its completion, and the host never finishes dispatching it."""


Msg = Poke | Hang | Wait | Done | Nope | Boom | Ponder | Linger

PONDERING: list[anyio.Event] = []


async def _ponder(_request: object) -> bool:
    PONDERING[-1].set()
    await anyio.sleep_forever()
    raise AssertionError("never answered")


def _boom(_request: object) -> bool:
    raise RuntimeError("authorize broke")


definition = agentfx.define(
    agentfx.expose(
        Msg,
        agentfx.variant(Poke, "Poke", name="poke"),
        agentfx.variant(Hang, "Hang", name="hang"),
        agentfx.variant(Wait, "Wait", name="wait", completion=agentfx.Completion(success=Done)),
        agentfx.variant(Nope, "Nope", name="nope", authorize=lambda _: False),
        agentfx.variant(Boom, "Boom", name="boom", authorize=_boom),
        agentfx.variant(Ponder, "Ponder", name="ponder", authorize=_ponder, completion=agentfx.Completion(success=Done)),
        agentfx.variant(Linger, "Linger", name="linger", completion=agentfx.Completion(success=Done)),
    )
)


@dataclass
class Host:
    """A host recording the task each Message is dispatched in; ``Hang`` never returns from its dispatch."""

    listeners: list[Callable[[Any], None]] = field(default_factory=lambda: [])
    tasks: list[int] = field(default_factory=lambda: [])
    hanging: list[anyio.Event] = field(default_factory=lambda: [])

    def model(self) -> int:
        return 0

    def dispatch(self, message: Any) -> object:
        self.tasks.append(anyio.get_current_task().id)
        if isinstance(message, Hang | Linger):
            return self._hang()
        for listener in list(self.listeners):
            listener(message)
        return None

    async def _hang(self) -> None:
        self.hanging[-1].set()
        await anyio.sleep_forever()

    def observe(self, listener: Callable[[Any], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None

    def finish(self) -> None:
        for listener in list(self.listeners):
            listener(Done())


@dataclass
class Served:
    """A runtime over :class:`Host`, its MCP server, and what a middleware saw of each ``tools/call``."""

    host: Host
    log: AuditLog
    runtime: AgentRuntime[Any, Any]
    connections: list[Connection] = field(default_factory=lambda: [])
    handler_tasks: list[int] = field(default_factory=lambda: [])

    def mcp_server(self) -> Any:
        mcp_server = server(self.runtime)

        async def seen(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
            # Runs in the request handler's task, where the call itself must run.
            if ctx.method == "tools/call":
                self.handler_tasks.append(anyio.get_current_task().id)
                if ctx.lifespan_context not in self.connections:
                    self.connections.append(ctx.lifespan_context)
            return await call_next(ctx)

        mcp_server.middleware.append(seen)
        return mcp_server

    @property
    def in_flight(self) -> int:
        return sum(len(connection.calls) for connection in self.connections)

    async def hanging(self) -> None:
        with anyio.fail_after(5):
            await self.host.hanging[-1].wait()

    def start_hanging(self) -> None:
        self.host.hanging.append(anyio.Event())


def served(*, host: Host | None = None) -> Served:
    host = host if host is not None else Host()
    log = agentfx.audit_log()
    runtime = agentfx.bind(
        definition, host=agentfx.Host(model=host.model, dispatch=host.dispatch, observe=host.observe), audit=log
    )
    return Served(host, log, runtime)


CANCELLED_WHILE_SENDING = {
    # legacy: the client's notifications/cancelled aborts the shielded call
    # through its registered controller: a cancellation, recorded as such.
    "legacy": ("hang", "unknown", "AgentCancelledError"),
    # auto: the in-process 2026-07-28 client cancels by cancelling the handler
    # itself, which no shielded call could hear of; such a call runs
    # unshielded, so waiting on a host that never returns it is interrupted.
    "auto": ("hang", "unknown", "interrupted"),
}


@asynccontextmanager
async def connected(mode: str, s: Served) -> AsyncGenerator[mcp.Client]:
    async with mcp.Client(s.mcp_server(), mode=mode) as client:
        yield client


async def audited(log: AuditLog, count: int) -> list[AuditEntry]:
    with anyio.fail_after(5):
        while len(log.entries()) < count:
            await anyio.sleep(0.01)
    return log.entries()


async def dispatched(host: Host, count: int) -> None:
    with anyio.fail_after(5):
        while len(host.tasks) < count:
            await anyio.sleep(0.01)


def outcomes(log: AuditLog) -> list[tuple[str, str, str]]:
    return [(entry.capability, entry.decision, entry.outcome) for entry in log.entries()]


# --- every exit path leaves the table empty ----------------------------------------------


@MODES
async def test_no_call_stays_registered_after_any_way_it_ends(mode: str) -> None:
    s = served()
    async with connected(mode, s) as client:
        assert text(await client.call_tool("poke", {})) == "Dispatched Poke"
        assert s.in_flight == 0
        assert (await client.call_tool("nope", {})).is_error
        assert s.in_flight == 0
        assert (await client.call_tool("boom", {})).is_error
        assert s.in_flight == 0
        assert (await client.call_tool("poke", {"unexpected": 1})).is_error
        assert s.in_flight == 0
        with pytest.raises(mcp.MCPError):
            await client.call_tool("no_such_tool", {})
        assert s.in_flight == 0

        # While a call is in flight, it is there: the table is the one that counts.
        s.start_hanging()
        # Bounded, in case the cancellation left the call waiting.
        with anyio.fail_after(5):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(client.call_tool, "hang", None)
                await s.hanging()
                assert s.in_flight == 1
                task_group.cancel_scope.cancel()
        await audited(s.log, 6)
        assert s.in_flight == 0
    assert outcomes(s.log) == [
        ("poke", "dispatched", "dispatched"),
        ("nope", "refused", "AgentAuthorizationError"),
        ("boom", "refused", "AgentDefect"),
        ("poke", "refused", "AgentInvalidInputError"),
        ("no_such_tool", "refused", "AgentUnknownCapabilityError"),
        CANCELLED_WHILE_SENDING[mode],
    ]


# --- cancellation reaches the pipeline as an abort -----------------------------------------


@MODES
async def test_a_cancelled_call_whose_host_never_returns_ends_audited_and_removed(mode: str) -> None:
    s = served()
    async with connected(mode, s) as client:
        s.start_hanging()
        # Bounded, in case the cancellation left the call waiting.
        with anyio.fail_after(5):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(client.call_tool, "hang", None)
                await s.hanging()
                task_group.cancel_scope.cancel()
        (entry,) = await audited(s.log, 1)
        # The host was called and its dispatch cut short: whether update saw the Message is unknown.
        assert (entry.capability, entry.decision, entry.outcome) == CANCELLED_WHILE_SENDING[mode]
        assert s.in_flight == 0
        assert text(await client.call_tool("poke", {})) == "Dispatched Poke", "the connection serves on"


@MODES
async def test_a_cancelled_completion_wait_is_aborted_audited_and_removed(mode: str) -> None:
    s = served()
    async with connected(mode, s) as client:
        # Bounded, in case the cancellation left the call waiting.
        with anyio.fail_after(5):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(client.call_tool, "wait", None)
                await dispatched(s.host, 1)
                task_group.cancel_scope.cancel()
        (entry,) = await audited(s.log, 1)
        assert (entry.capability, entry.decision, entry.outcome) == ("wait", "dispatched", "AgentCancelledError")
        assert s.in_flight == 0


@MODES
@pytest.mark.parametrize(
    ("tool", "expected"),
    [("ponder", ("ponder", "refused", "AgentCancelledError")), ("linger", ("linger", "unknown", "AgentCancelledError"))],
    ids=["while authorize is pending", "while the host is still dispatching"],
)
async def test_a_call_awaiting_its_completion_cancelled_before_the_host_accepted_it_is_aborted_at_once(
    mode: str, tool: str, expected: tuple[str, str, str]
) -> None:
    # Such a call runs shielded; in process (2026-07-28) its cancellation is
    # only the handler's cancelled scope, so what watches beside the call must
    # be watching from its start, not once the host accepted the Message.
    s = served()
    PONDERING.append(anyio.Event())
    s.start_hanging()
    async with connected(mode, s) as client:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(client.call_tool, tool, None)
                with anyio.fail_after(5):
                    await (PONDERING[-1] if tool == "ponder" else s.host.hanging[-1]).wait()
                task_group.cancel_scope.cancel()
        (entry,) = await audited(s.log, 1)
        assert (entry.capability, entry.decision, entry.outcome) == expected
        assert s.in_flight == 0
    # Refused before the host: nothing was sent.
    assert len(s.host.tasks) == (0 if tool == "ponder" else 1)


async def test_a_notification_for_another_request_aborts_nothing() -> None:
    s = served()
    async with raw(s) as wire:
        s.start_hanging()
        await wire.send(call(1, "hang", {}))
        await s.hanging()
        for other in (2, "1x", None):
            await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": other}})
        await wire.send(call(3, "poke", {}))
        assert "result" in await wire.answer(3)
        assert s.in_flight == 1 and s.log.entries()[-1].capability == "poke"
        # The id as a string names the same request (the SDK's own correlation).
        await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "1"}})
        await audited(s.log, 2)
        assert outcomes(s.log) == [("poke", "dispatched", "dispatched"), ("hang", "unknown", "AgentCancelledError")]
        assert s.in_flight == 0


# --- the connection's end aborts every call in flight ----------------------------------------


class Raw:
    """A 2025-11-25 client spoken by hand; everything the server writes is read as it comes."""

    def __init__(self, streams: Any) -> None:
        self.read, self.write = streams
        self.answers: list[dict[str, Any]] = []
        self.arrived = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        await self.write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))

    async def drain(self) -> None:
        async for item in self.read:
            assert isinstance(item, SessionMessage)
            message = item.message.model_dump(by_alias=True, exclude_unset=True)
            if "id" in message:
                self.answers.append(message)
                self.arrived.set()
                self.arrived = anyio.Event()

    async def answer(self, request_id: int) -> dict[str, Any]:
        with anyio.fail_after(5):
            while True:
                for message in self.answers:
                    if message["id"] == request_id:
                        return message
                await self.arrived.wait()


@asynccontextmanager
async def raw(s: Served, *, stop: list[anyio.CancelScope] | None = None) -> AsyncGenerator[Raw]:
    """A connection spoken by hand, its server run by ``Server.run`` (as stdio runs it)."""
    async with create_client_server_memory_streams() as (client, serving):
        mcp_server = s.mcp_server()
        async with anyio.create_task_group() as task_group:
            scope = anyio.CancelScope()
            if stop is not None:
                stop.append(scope)

            async def run() -> None:
                with scope:
                    await mcp_server.run(*serving, mcp_server.create_initialization_options())

            task_group.start_soon(run)
            wire = Raw(client)
            task_group.start_soon(wire.drain)
            await wire.send(INITIALIZE)
            await wire.answer(INITIALIZE["id"])
            await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield wire
            task_group.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["closed", "stopped"])
async def test_the_connections_end_aborts_every_call_in_flight(how: str) -> None:
    # Three calls with nothing beside them (a sync host awaited by nothing
    # but the shielded call itself would hold the loop's join forever): the
    # connection's end is the only thing that can abort them.
    host = Host()
    s = served(host=host)
    stop: list[anyio.CancelScope] = []
    with anyio.fail_after(5):
        async with raw(s, stop=stop) as wire:
            for request_id in (1, 2, 3):
                s.start_hanging()
                await wire.send(call(request_id, "hang", {}))
                await s.hanging()
            await wire.send(call(4, "wait", {}))
            await dispatched(host, 4)
            if how == "closed":
                await wire.write.aclose()
            else:
                stop[0].cancel()
            await audited(s.log, 4)
            if how == "stopped":
                # Cut short by the server stopping: each is told so, none is answered twice.
                for request_id in (1, 2, 3, 4):
                    assert (await wire.answer(request_id))["error"]["code"] == types.CONNECTION_CLOSED
    assert sorted(outcomes(s.log)) == [("hang", "unknown", "AgentCancelledError")] * 3 + [
        ("wait", "dispatched", "AgentCancelledError")
    ]
    assert s.in_flight == 0


# --- nothing runs beside a call that does not need it ---------------------------------------


@MODES
async def test_a_call_runs_in_its_request_handlers_own_task(mode: str) -> None:
    # A synchronous host: the host is called from the very task the SDK runs
    # the handler in, never from a task started for the call (a completion's
    # progress and watch run beside it, in a task of their own).
    s = served()
    async with connected(mode, s) as client:
        await client.call_tool("poke", {})
        await client.call_tool("nope", {})
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(client.call_tool, "wait", None)
            await dispatched(s.host, 2)
            s.host.finish()
    poke, wait = s.host.tasks
    assert poke == s.handler_tasks[0]
    assert wait == s.handler_tasks[2]


async def test_a_completion_that_settles_inside_dispatch_sends_no_progress_after_its_result() -> None:
    # Done is observed during the host's own dispatch of Wait, so the call
    # settles before anything could report: whatever progress is sent comes
    # before the answer, and nothing after it.
    host = Host()
    original = host.dispatch

    def settles_at_once(message: Any) -> object:
        sent = original(message)
        if isinstance(message, Wait):
            host.finish()
        return sent

    host.dispatch = settles_at_once
    s = served(host=host)
    order: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        order.append("progress")

    async with connected("legacy", s) as client:
        result = await client.call_tool("wait", {}, progress_callback=on_progress)
        order.append("result")
        assert text(result).startswith("Completed: Done")
        await anyio.sleep(0.05)
    assert order[-1] == "result"
    assert s.in_flight == 0


async def test_a_call_that_outlives_its_abort_is_cut_short_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever waits where the signal cannot reach (here, the whole call)
    # cannot hold a stopping server: the aborted call's shield is cancelled
    # after ABORT_GRACE, the request goes unanswered, and it leaves the table.
    monkeypatch.setattr("agentfx.mcp._server.ABORT_GRACE", 0.05)
    started = anyio.Event()

    async def unreachable(*_: object, **__: object) -> object:
        started.set()
        await anyio.sleep_forever()

    monkeypatch.setattr("agentfx.mcp._server._dispatch", unreachable)
    s = served()
    with anyio.fail_after(5):
        async with raw(s) as wire:
            await wire.send(call(1, "poke", {}))
            await started.wait()
            assert s.in_flight == 1
            await wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
            while s.in_flight:
                await anyio.sleep(0.01)
            await wire.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            await wire.answer(2)
            assert [answer["id"] for answer in wire.answers] == [INITIALIZE["id"], 2], "request 1 was never answered"


# --- list_changed only where it was promised --------------------------------------------------


class Toggle(msgspec.Struct, frozen=True, tag=True):
    """Flip the switch."""


class Lamp(msgspec.Struct, frozen=True, tag=True):
    """Available while the switch is on."""


switch = agentfx.define(
    agentfx.expose(
        Toggle | Lamp,
        agentfx.variant(Toggle, "Toggle", name="toggle"),
        agentfx.variant(Lamp, "Lamp", name="lamp", available=lambda on: bool(on)),
    )
)


@MODES
async def test_a_host_that_cannot_report_changes_is_never_re_read_after_a_call(mode: str) -> None:
    # Without observe or subscribe nothing can keep a listChanged promise, so
    # none is made, and a call that changes availability sends nothing either
    # (nor re-reads availability after the call to find out).
    on = [False]
    reads: list[None] = []

    def model() -> bool:
        reads.append(None)
        return on[0]

    def dispatch(_message: object) -> None:
        on[0] = not on[0]

    seen: list[object] = []

    async def handler(message: object) -> None:
        seen.append(message)

    runtime = agentfx.bind(switch, host=agentfx.Host(model=model, dispatch=dispatch))
    async with mcp.Client(server(runtime), mode=mode, message_handler=handler) as client:
        capabilities = client.server_capabilities
        assert capabilities is not None and capabilities.tools is not None
        assert not capabilities.tools.list_changed
        assert [tool.name for tool in (await client.list_tools()).tools] == ["toggle"]
        before = len(reads)
        assert text(await client.call_tool("toggle", {})) == "Dispatched Toggle"
        # One snapshot for the call itself; none after it.
        assert len(reads) == before + 1
        assert [tool.name for tool in (await client.list_tools()).tools] == ["toggle", "lamp"]
    assert not [message for message in seen if isinstance(message, types.ToolListChangedNotification)]
