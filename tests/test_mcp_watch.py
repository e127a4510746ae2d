"""One watcher per server: Model changes cost the connections that listen, each told once, nothing leaked."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import ToolsListChanged

import agentfx
from agentfx.mcp import server
from agentfx.mcp._server import LIST_CHANGED_DEBOUNCE, AgentServer
from agentfx.mcp._watch import NOTICE_WAIT, Burst, ListWatch, ResourceWatch, Watcher
from agentfx.testing import RecordingHost
from tests.mcp_app import ADMIN, Model, User, definition
from tests.mcp_wire import INITIALIZE

pytestmark = pytest.mark.anyio


class Heard:
    """One in-process client's notifications, and an event per tool list change."""

    def __init__(self) -> None:
        self.changes = 0
        self.moved = anyio.Event()

    async def handler(self, message: types.ServerNotification | Exception) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changes += 1
            self.moved.set()
            self.moved = anyio.Event()

    async def until(self, changes: int) -> None:
        with anyio.fail_after(5):
            while self.changes < changes:
                await self.moved.wait()


def recorded() -> tuple[RecordingHost[Model, Any, User], AgentServer, Watcher]:
    """A recording host, the server over it, and the server's watcher."""
    recording: RecordingHost[Model, Any, User] = RecordingHost(Model(), principal=ADMIN)
    mcp_server = server(agentfx.bind(definition, host=recording.host))
    assert isinstance(mcp_server, AgentServer) and mcp_server.watcher is not None
    return recording, mcp_server, mcp_server.watcher


def selected(recording: RecordingHost[Model, Any, User], item: str | None) -> None:
    """Change the Model so that what is available changes (``clear`` needs a selection)."""
    recording.set_model(Model(items=("milk",), selected=item))


async def test_many_listing_connections_share_one_runtime_subscription_and_each_hears_a_change_once() -> None:
    recording, mcp_server, watcher = recorded()
    heard = [Heard() for _ in range(4)]
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(mcp.Client(mcp_server, mode="legacy", message_handler=h.handler))
            for h in heard
        ]
        silent = Heard()
        await stack.enter_async_context(mcp.Client(mcp_server, mode="legacy", message_handler=silent.handler))
        assert recording.listener_count == 0, "nobody listed"
        for client in clients:
            await client.list_tools()
        assert (recording.listener_count, watcher.listening, watcher.tasks) == (1, 4, 1)
        selected(recording, "milk")
        for h in heard:
            await h.until(1)
        # Each once: a second window passes without another announcement.
        selected(recording, "milk")
        await anyio.sleep(LIST_CHANGED_DEBOUNCE * 3)
        assert [h.changes for h in heard] == [1, 1, 1, 1]
        assert silent.changes == 0, "a connection that never listed is told nothing"
    assert (recording.listener_count, watcher.listening) == (0, 0)
    await anyio.wait_all_tasks_blocked()
    assert watcher.tasks == 0


async def test_a_closed_connection_leaves_the_fan_out_and_the_watcher_carries_on_for_the_rest() -> None:
    recording, mcp_server, watcher = recorded()
    first, second = Heard(), Heard()
    async with mcp.Client(mcp_server, mode="legacy", message_handler=second.handler) as staying:
        # The first connection hosts the watcher's task; it leaves first.
        async with mcp.Client(mcp_server, mode="legacy", message_handler=first.handler) as leaving:
            await leaving.list_tools()
            await staying.list_tools()
            assert watcher.listening == 2
        assert (watcher.listening, recording.listener_count) == (1, 1)
        selected(recording, "milk")
        await second.until(1)
        assert first.changes == 0
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 1
    assert (watcher.listening, recording.listener_count) == (0, 0)
    await anyio.wait_all_tasks_blocked()
    assert watcher.tasks == 0


async def test_a_cancelled_connection_releases_the_runtime_and_ends_the_watcher() -> None:
    recording, mcp_server, watcher = recorded()
    listed = anyio.Event()

    async def connect() -> None:
        async with mcp.Client(mcp_server, mode="legacy") as client:
            await client.list_tools()
            listed.set()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(connect)
        with anyio.fail_after(5):
            await listed.wait()
        assert (recording.listener_count, watcher.tasks) == (1, 1)
        selected(recording, "milk")  # a burst is pending when the cancellation comes
        task_group.cancel_scope.cancel()
    assert (recording.listener_count, watcher.listening, watcher.subscribed) == (0, 0, False)
    await anyio.wait_all_tasks_blocked()
    assert watcher.tasks == 0


async def test_a_2026_connection_listens_only_while_its_listen_stream_is_open() -> None:
    recording, mcp_server, watcher = recorded()
    async with mcp.Client(mcp_server, mode="auto") as client:
        await client.list_tools()
        assert recording.listener_count == 0, "a 2026-era listing opens no stream"
        async with client.listen(tools_list_changed=True) as subscription:
            assert (recording.listener_count, watcher.listening) == (1, 1)
            selected(recording, "milk")
            with anyio.fail_after(5):
                await subscription.__anext__()
        with anyio.fail_after(5):
            while watcher.listening:
                await anyio.sleep(0.01)
        assert recording.listener_count == 0


def names(result: types.ListToolsResult) -> set[str]:
    return {tool.name for tool in result.tools}


async def no_change(subscription: Any) -> object:
    """The next event of a listen stream within a few debounce windows, or ``None``."""
    event: object = None
    with anyio.move_on_after(LIST_CHANGED_DEBOUNCE * 10):
        event = await subscription.__anext__()
    return event


@pytest.mark.parametrize("first_stream", [True, False], ids=["reopened", "listed-first"])
async def test_a_reopened_2026_listen_stream_compares_with_what_its_client_refetched(first_stream: bool) -> None:
    # While no stream is open the client hears nothing, so the baseline it
    # was given before is stale; opening a stream (after which the client
    # re-lists) is where the comparison starts again.
    recording, mcp_server, watcher = recorded()
    async with mcp.Client(mcp_server, mode="auto") as client:
        assert client.session.protocol_version == "2026-07-28"
        if first_stream:
            async with client.listen(tools_list_changed=True):
                assert "clear" not in names(await client.list_tools())
        else:
            assert "clear" not in names(await client.list_tools())
        with anyio.fail_after(5):
            while watcher.listening:  # the stream's end reaches the server a moment later
                await anyio.sleep(0.01)
        selected(recording, "milk")  # heard by nobody
        await anyio.sleep(LIST_CHANGED_DEBOUNCE * 2)
        async with client.listen(tools_list_changed=True) as subscription:
            assert "clear" in names(await client.list_tools())
            selected(recording, None)  # back to what the first baseline was
            with anyio.fail_after(5):
                assert isinstance(await subscription.__anext__(), ToolsListChanged)
            assert "clear" not in names(await client.list_tools())
            # Told once: the baseline is now what it was told.
            selected(recording, None)
            assert await no_change(subscription) is None


async def test_a_second_listen_stream_keeps_the_baseline_its_first_one_keeps_current() -> None:
    # A listing while a stream is open (the client SDK's own, say) moves
    # nothing: a change inside the window is still announced.
    recording, mcp_server, _ = recorded()
    async with mcp.Client(mcp_server, mode="auto") as client:
        async with client.listen(tools_list_changed=True) as first:
            selected(recording, "milk")
            assert "clear" in names(await client.list_tools())  # inside the window
            async with client.listen(tools_list_changed=True) as second:
                with anyio.fail_after(5):
                    assert isinstance(await first.__anext__(), ToolsListChanged)
                    assert isinstance(await second.__anext__(), ToolsListChanged)


class Unread:
    """A 2025-11-25 client spoken by hand that, past its first listing, reads nothing the server writes."""

    def __init__(self, streams: Any) -> None:
        self.read, self.write = streams

    async def send(self, message: dict[str, Any]) -> None:
        await self.write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))

    async def answer(self) -> None:
        with anyio.fail_after(5):
            while True:
                item = await self.read.receive()
                assert isinstance(item, SessionMessage)
                if isinstance(item.message, types.JSONRPCResponse):
                    return


async def test_a_connection_that_stops_reading_holds_up_no_other_connections_news() -> None:
    recording, mcp_server, watcher = recorded()
    heard = Heard()
    # The healthy client comes first, so its connection hosts the watcher.
    async with mcp.Client(mcp_server, mode="legacy", message_handler=heard.handler) as healthy:
        await healthy.list_tools()
        async with create_client_server_memory_streams() as (client_streams, served):
            async with anyio.create_task_group() as task_group:
                task_group.start_soon(mcp_server.run, *served, mcp_server.create_initialization_options())
                stuck = Unread(client_streams)
                await stuck.send(INITIALIZE)
                await stuck.answer()
                await stuck.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                await stuck.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
                await stuck.answer()
                assert watcher.listening == 2
                # From here on nothing is read: the first announcement fills
                # the stream's buffer, the next one blocks.
                for changes, item in enumerate(["milk", None, "milk", None], start=1):
                    selected(recording, item)
                    # Well inside NOTICE_WAIT: nobody waits for the stuck client.
                    with anyio.fail_after(NOTICE_WAIT / 4):
                        await heard.until(changes)
                await anyio.wait_all_tasks_blocked()
                # The watcher's task, and one (not one per burst) still telling the stuck client.
                assert watcher.tasks == 2
                task_group.cancel_scope.cancel()  # it goes away mid-notice
        await anyio.wait_all_tasks_blocked()
        assert (watcher.listening, watcher.tasks) == (1, 1), "nothing of the closed connection is left"
        selected(recording, "milk")
        await heard.until(5)
    assert (recording.listener_count, watcher.listening) == (0, 0)
    await anyio.wait_all_tasks_blocked()
    assert watcher.tasks == 0


# --- the watcher alone -----------------------------------------------------------------


class Runtime:
    """What a watcher subscribes to: listeners called on every change."""

    def __init__(self) -> None:
        self.names: tuple[str, ...] = ()
        self.listeners: list[Callable[[], None]] = []

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def change(self, names: tuple[str, ...]) -> None:
        self.names = names
        for listener in list(self.listeners):
            listener()


class Client:
    """A listener with its own baseline, recording how each announcement reached it."""

    def __init__(self, runtime: Runtime) -> None:
        self.heard: list[str] = []

        async def announce() -> None:
            self.heard.append("watch")

        self.watch = ListWatch(lambda: runtime.names, announce)

    async def notice(self, burst: Burst) -> None:
        await self.watch.update(burst.names())

    async def called(self) -> None:
        async def now() -> None:
            self.heard.append("call")

        await self.watch.check(now)


@asynccontextmanager
async def two_hosts(watcher: Watcher) -> AsyncGenerator[anyio.Event]:
    """The watcher hosted twice, the oldest first; setting the event yielded ends the oldest host alone."""

    async def host(done: anyio.Event) -> None:
        async with watcher.hosting():
            await done.wait()

    oldest, other = anyio.Event(), anyio.Event()
    async with anyio.create_task_group() as group:
        group.start_soon(host, oldest)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(host, other)
        await anyio.wait_all_tasks_blocked()
        try:
            yield oldest
        finally:
            oldest.set()
            other.set()


async def test_the_watcher_task_moves_to_another_host_when_its_own_leaves() -> None:
    runtime = Runtime()
    watcher = Watcher(runtime.subscribe, lambda: runtime.names, lambda _uri: None, delay=0)
    client = Client(runtime)
    client.watch.listed(())
    # The hosts end out of the order they came in: the oldest, whose task
    # group runs the watcher's task, leaves while the other stays.
    async with two_hosts(watcher) as oldest:
        watcher.join(client)
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 1
        oldest.set()
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 1
        runtime.change(("a",))
        await anyio.wait_all_tasks_blocked()
        assert client.heard == ["watch"]
        watcher.leave(client)
        assert (watcher.subscribed, runtime.listeners) == (False, [])
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 0


async def test_the_watcher_runs_only_while_a_host_is_lent_and_stops_with_the_last_one() -> None:
    runtime = Runtime()
    watcher = Watcher(runtime.subscribe, lambda: runtime.names, lambda _uri: None, delay=0)
    client = Client(runtime)
    client.watch.listed(())
    watcher.join(client)
    assert (watcher.subscribed, runtime.listeners) == (False, []), "nothing can run it yet"
    async with watcher.hosting():
        assert watcher.subscribed and len(runtime.listeners) == 1
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 1
    # Its connection still listens, but nothing is left to run the watcher: nothing is held.
    assert (watcher.listening, watcher.subscribed, runtime.listeners, watcher.tasks) == (1, False, [], 0)
    async with watcher.hosting():
        runtime.change(("a",))
        await anyio.wait_all_tasks_blocked()
        assert client.heard == ["watch"]
        watcher.leave(client)
    assert (watcher.subscribed, runtime.listeners, watcher.tasks) == (False, [], 0)


class Blocked:
    """A listener whose notices wait until released, recording the names each was given."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, ...] | None] = []
        self.bursts: list[Burst] = []
        self.release = anyio.Event()
        self.cancelled = 0

    async def notice(self, burst: Burst) -> None:
        self.bursts.append(burst)
        self.seen.append(burst.names())
        try:
            await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise


async def test_a_busy_listener_is_told_only_the_newest_burst_once_done_and_holds_up_nobody() -> None:
    runtime = Runtime()
    watcher = Watcher(runtime.subscribe, lambda: runtime.names, lambda _uri: None, delay=0)
    blocked, client = Blocked(), Client(runtime)
    client.watch.listed(())
    async with watcher.hosting():
        watcher.join(blocked)
        watcher.join(client)
        for count, names in enumerate([("a",), ("b",), ("a", "b")], start=1):
            runtime.change(names)
            await anyio.wait_all_tasks_blocked()
            assert client.heard == ["watch"] * count, "the others are told on time"
        assert (blocked.seen, watcher.tasks) == ([("a",)], 2), "one task for it, not one per burst"
        released = Burst(lambda: (), lambda _uri: None).made
        blocked.release.set()
        await anyio.wait_all_tasks_blocked()
        # The bursts it missed while busy come as one, the newest, read once
        # it is free: its baselines may have moved meanwhile (it listed, or
        # subscribed), past what the others' burst read before.
        assert (blocked.seen, watcher.tasks) == ([("a",), ("a", "b")], 1)
        assert blocked.bursts[1].made > released
        # Leaving mid-notice cancels it: no task outlives its listener.
        blocked.release = anyio.Event()
        runtime.change(("b",))
        await anyio.wait_all_tasks_blocked()
        assert (len(blocked.seen), watcher.tasks) == (3, 2)
        watcher.leave(blocked)
        await anyio.wait_all_tasks_blocked()
        assert (blocked.cancelled, watcher.tasks) == (1, 1)
        runtime.change(("a",))
        await anyio.wait_all_tasks_blocked()
        assert len(blocked.seen) == 3 and client.heard == ["watch"] * 5
        watcher.leave(client)
    assert watcher.tasks == 0


async def test_a_burst_waiting_for_a_busy_listener_is_told_after_its_host_goes() -> None:
    runtime = Runtime()
    watcher = Watcher(runtime.subscribe, lambda: runtime.names, lambda _uri: None, delay=0)
    blocked = Blocked()
    async with two_hosts(watcher) as oldest:
        watcher.join(blocked)
        runtime.change(("a",))
        await anyio.wait_all_tasks_blocked()
        runtime.change(("b",))  # waits for the notice in flight
        await anyio.wait_all_tasks_blocked()
        assert blocked.seen == [("a",)]
        # The host running the watcher (and the notice) goes: the notice is
        # cancelled, the waiting burst is not lost.
        oldest.set()
        await anyio.wait_all_tasks_blocked()
        assert (blocked.cancelled, blocked.seen, watcher.tasks) == (1, [("a",), ("b",)], 2)
        blocked.release.set()
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 1
        watcher.leave(blocked)
        await anyio.wait_all_tasks_blocked()
        assert watcher.tasks == 0


async def test_a_subscription_the_host_refuses_is_logged_and_holds_nothing(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(_listener: Callable[[], None]) -> Callable[[], None]:
        raise RuntimeError("host down")

    watcher = Watcher(refuse, lambda: (), lambda _uri: None, delay=0)
    client = Client(Runtime())
    async with watcher.hosting():
        watcher.join(client)
        await anyio.wait_all_tasks_blocked()
        assert (watcher.listening, watcher.subscribed, watcher.tasks) == (1, False, 0)
        watcher.leave(client)
    assert "subscribing to the runtime's Model changes failed" in caplog.text


CLIENTS = 3
NAMES = st.sampled_from([(), ("a",), ("a", "b"), ("b",)])
# Each step: what happens, to which connection, and (for a change) the names now available.
STEPS = st.lists(
    st.tuples(
        st.sampled_from(["list", "reset", "join", "leave", "call", "change", "settle"]),
        st.integers(0, CLIENTS - 1),
        NAMES,
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(steps=STEPS)
def test_each_listening_connection_hears_each_change_once_and_no_other_hears_it(
    steps: list[tuple[str, int, tuple[str, ...]]],
) -> None:
    """Against a model: a burst tells exactly the connections in the fan-out when it runs, each once.

    A change is announced to a connection when the names at its burst (or at
    a call's check) differ from what that connection was last told; a join
    starts a burst too. One it already heard of (a call's check came first)
    is not told again, and a connection that left, or never listed, is told
    nothing. A later listing moves nothing; a reset (a listing while it heard
    nothing) is the new baseline.
    """

    async def main() -> tuple[list[list[str]], list[list[str]]]:
        runtime = Runtime()
        watcher = Watcher(runtime.subscribe, lambda: runtime.names, lambda _uri: None, delay=0)
        clients = [Client(runtime) for _ in range(CLIENTS)]
        joined = [False] * CLIENTS
        baselines: list[tuple[str, ...] | None] = [None] * CLIENTS
        expected: list[list[str]] = [[] for _ in range(CLIENTS)]
        pending = False

        def burst() -> None:
            for k in range(CLIENTS):
                if joined[k] and baselines[k] is not None and baselines[k] != runtime.names:
                    baselines[k] = runtime.names
                    expected[k].append("watch")

        async with watcher.hosting():
            for step, i, names in [*steps, ("settle", 0, ())]:
                if step == "list":
                    clients[i].watch.listed(runtime.names)
                    baselines[i] = baselines[i] if baselines[i] is not None else runtime.names
                elif step == "reset":
                    # Shown while it heard nothing: compared against from now on.
                    clients[i].watch.reset(runtime.names)
                    baselines[i] = runtime.names
                elif step == "join":
                    watcher.join(clients[i])
                    # A connection that starts listening is told of a burst even with no change:
                    # what changed while it heard nothing is news to its client.
                    pending = pending or not joined[i]
                    joined[i] = True
                elif step == "leave":
                    watcher.leave(clients[i])
                    joined[i] = False
                    # The last one to leave ends the watcher, and its pending burst.
                    pending = pending and any(joined)
                elif step == "call":
                    await clients[i].called()
                    if baselines[i] is not None and baselines[i] != runtime.names:
                        baselines[i] = runtime.names
                        expected[i].append("call")
                elif step == "change":
                    runtime.change(names)
                    pending = pending or any(joined)
                else:
                    await anyio.wait_all_tasks_blocked()
                    if pending:
                        burst()
                    pending = False
            # One subscription while anyone listens, however many do.
            assert len(runtime.listeners) == (1 if any(joined) else 0)
            for client in clients:
                watcher.leave(client)
            assert (watcher.subscribed, runtime.listeners) == (False, [])
        return [client.heard for client in clients], expected

    for backend in ("asyncio", "trio"):
        heard, expected = anyio.run(main, backend=backend)
        assert heard == expected, backend


async def test_a_resource_watch_reset_is_what_a_change_is_measured_from() -> None:
    value = b"[]"
    announced: list[str] = []

    async def announce(uri: str) -> None:
        announced.append(uri)

    watch = ResourceWatch(lambda _uri: value, announce)
    watch.subscribe("app://items")  # subscribed at "[]"
    watch.reset("app://items", b'["x"]')  # served while nothing could be announced
    await watch.check()
    assert announced == ["app://items"], "back to the subscribed value, but not to what was last served"
    await watch.check()
    assert announced == ["app://items"], "told once"
    watch.reset("app://other", b"1")
    assert watch.subscribed == {"app://items"} and watch.last("app://other") is None, "an unsubscribed URI is not kept"


async def test_a_burst_read_before_a_baseline_was_set_is_not_compared_with_it() -> None:
    # A burst's reads are shared: another connection may have made them before
    # this one subscribed (or was shown the tool list) anew. Compared with the
    # newer baseline, that older read would announce a change the client knows.
    values: list[bytes] = [b'["milk"]']
    names: list[tuple[str, ...]] = [("a",)]
    announced: list[str] = []

    async def announce_resource(uri: str) -> None:
        announced.append(uri)

    async def announce_tools() -> None:
        announced.append("tools")

    def burst() -> Burst:
        return Burst(lambda: names[-1], lambda _uri: values[-1])

    resources, tools = ResourceWatch(lambda _uri: values[-1], announce_resource), ListWatch(lambda: names[-1], announce_tools)
    tools.listed(names[-1])
    older = burst()
    assert (older.resource("app://items"), older.names()) == (b'["milk"]', ("a",))  # read for another connection
    values.append(b'["milk","tea"]')
    names.append(("a", "b"))
    resources.subscribe("app://items")  # at ["milk","tea"]
    tools.reset(names[-1])  # shown ("a", "b") while hearing nothing
    await resources.notice(older)
    await tools.notice(older)
    assert announced == [], "nothing changed since the client's baselines"
    values.append(b'["tea"]')
    names.append(("b",))
    newer = burst()
    await resources.notice(newer)
    await tools.notice(newer)
    assert announced == ["app://items", "tools"]


async def test_a_resumed_resource_is_measured_from_its_next_read_until_a_burst_compares_it() -> None:
    values = [b"[]"]
    announced: list[str] = []

    async def announce(uri: str) -> None:
        announced.append(uri)

    watch = ResourceWatch(lambda _uri: values[-1], announce)
    watch.subscribe("app://items")  # at "[]"
    values.append(b'["x"]')  # changed while nothing heard
    watch.resume(["app://items", "app://other"])
    assert watch.resuming("app://items") and not watch.resuming("app://other"), "only subscribed URIs are kept"
    await watch.check()
    assert announced == ["app://items"] and not watch.resuming("app://items"), "compared: no longer resuming"
    watch.resume(["app://items"])
    watch.unsubscribe("app://items")
    assert not watch.resuming("app://items"), "the last unsubscriber forgets it"


@pytest.mark.parametrize("how", ["cut-off", "failed"])
async def test_a_notice_that_did_not_leave_is_told_at_the_next_check(how: str) -> None:
    names: list[tuple[str, ...]] = [("a",)]
    values: list[bytes] = [b"[]"]
    sent: list[str] = []
    stuck = [True]

    async def announce(what: str) -> None:
        if stuck[0]:
            if how == "failed":
                raise OSError("the connection went away")
            await anyio.sleep_forever()  # a client that reads nothing: its wait runs out
        sent.append(what)

    tools = ListWatch(lambda: names[-1], lambda: announce("tools"))
    resources = ResourceWatch(lambda _uri: values[-1], announce)
    tools.listed(("a",))
    resources.subscribe("app://items")
    names.append(("a", "b"))
    values.append(b'["x"]')
    with anyio.move_on_after(0.05):
        await tools.check()
    with anyio.move_on_after(0.05):
        await resources.check()
    assert sent == []
    assert (tools.last, resources.last("app://items")) == (("a",), b"[]"), "not told: the baseline is put back"
    stuck[0] = False
    await tools.check()
    await resources.check()
    assert sent == ["tools", "app://items"]
    await tools.check()
    await resources.check()
    assert sent == ["tools", "app://items"], "told once"
