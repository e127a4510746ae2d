"""agentfx.redis's SubscriptionBus against a real redis-server, and under the MCP SDK's own listen streams.

Two buses on one namespace stand for two server processes: each has its
own Redis connection and listeners. asyncio only (redis-py's client).
"""

from __future__ import annotations

import uuid

import anyio
import anyio.abc
import mcp
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import ResourceUpdated, ServerEvent, ToolsListChanged
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from agentfx.contract import ContractError
from agentfx.redis import subscription_bus
from agentfx.redis import _client as raw_client
from tests.redis_server import RedisServer, free_port
from tests.redis_server import anyio_backend as anyio_backend
from tests.redis_server import server as server

pytestmark = pytest.mark.anyio


def namespace() -> str:
    return f"bus-{uuid.uuid4().hex[:10]}"


async def received(events: list[ServerEvent], count: int) -> None:
    with anyio.fail_after(5):
        while len(events) < count:
            await anyio.sleep(0.005)


async def test_a_bus_refuses_a_malformed_namespace_and_says_at_once_that_redis_is_unreachable(server: RedisServer) -> None:
    with pytest.raises(ContractError, match="namespace must be a non-empty string"):
        async with subscription_bus(server.url, namespace=""):
            pass
    # A port nothing listens on: the connection is refused at once, and said
    # bare, not as a listener's timeout wrapped in an exception group.
    with anyio.fail_after(5), pytest.raises(RedisConnectionError):
        async with subscription_bus(f"redis://127.0.0.1:{free_port()}/0", namespace=namespace()):
            pass


async def test_an_event_published_on_one_process_reaches_the_others_once_each(server: RedisServer) -> None:
    ns = namespace()
    async with subscription_bus(server.url, namespace=ns) as a, subscription_bus(server.url, namespace=ns) as b:
        on_a: list[ServerEvent] = []
        on_b: list[ServerEvent] = []
        a.subscribe(on_a.append)
        b.subscribe(on_b.append)
        sent: list[ServerEvent] = [
            ToolsListChanged(),
            ResourceUpdated(uri="app://total"),
            PromptsListChanged(),
            ResourcesListChanged(),
        ]
        for event in sent:
            await a.publish(event)
        await received(on_b, 4)
        assert on_b == sent
        # The publisher's own listeners hear it at once, and not a second time from Redis:
        # Redis delivers a channel's messages in order, so an echo of a's own
        # events would reach a before b's marker does.
        await b.publish(ToolsListChanged())
        await received(on_a, 5)
        assert on_a == [*sent, ToolsListChanged()]


async def test_other_namespaces_hear_nothing(server: RedisServer) -> None:
    ns = namespace()
    async with subscription_bus(server.url, namespace=namespace()) as a, subscription_bus(
        server.url, namespace=ns
    ) as elsewhere, subscription_bus(server.url, namespace=ns) as neighbour:
        heard: list[ServerEvent] = []
        elsewhere.subscribe(heard.append)
        await a.publish(ToolsListChanged())
        # A marker published after it in elsewhere's own namespace: once it
        # arrives, anything a's publication could have delivered has arrived too.
        await neighbour.publish(ResourceUpdated(uri="app://marker"))
        await received(heard, 1)
        assert heard == [ResourceUpdated(uri="app://marker")]


async def test_unsubscribe_is_idempotent_and_a_raising_listener_is_skipped(server: RedisServer) -> None:
    ns = namespace()
    async with subscription_bus(server.url, namespace=ns) as a, subscription_bus(server.url, namespace=ns) as b:
        heard: list[ServerEvent] = []

        def bad(_event: ServerEvent) -> None:
            raise RuntimeError("listener bug")

        b.subscribe(bad)
        gone = b.subscribe(heard.append)
        kept: list[ServerEvent] = []
        b.subscribe(kept.append)
        await a.publish(ToolsListChanged())
        await received(kept, 1)
        assert heard == [ToolsListChanged()]
        gone()
        gone()
        assert b.listener_count == 2
        await a.publish(ToolsListChanged())
        await received(kept, 2)
        assert heard == [ToolsListChanged()]


async def test_malformed_payloads_on_the_channel_are_ignored(server: RedisServer) -> None:
    ns = namespace()
    async with subscription_bus(server.url, namespace=ns) as bus:
        heard: list[ServerEvent] = []
        bus.subscribe(heard.append)
        connection = raw_client.client(server.url)
        try:
            for junk in (b"not json", b'{"origin":"x","kind":"nope"}', b'{"origin":"x","kind":"resource"}'):
                await raw_client.publish(connection, bus.channel, junk)
            await raw_client.publish(connection, bus.channel, b'{"origin":"x","kind":"tools"}')
        finally:
            await connection.aclose()
        await received(heard, 1)
        assert heard == [ToolsListChanged()]


async def test_publishing_something_else_is_a_type_error(server: RedisServer) -> None:
    async with subscription_bus(server.url, namespace=namespace()) as bus:
        with pytest.raises(TypeError, match="not an MCP ServerEvent"):
            await bus.publish("tools")  # pyright: ignore[reportArgumentType]


async def test_two_sdk_servers_share_listen_streams_through_the_bus(server: RedisServer) -> None:
    ns = namespace()
    async with subscription_bus(server.url, namespace=ns) as a, subscription_bus(server.url, namespace=ns) as b:
        # pyright checks here that the bus is the SDK's SubscriptionBus protocol.
        replica_a: MCPServer[object] = MCPServer("a", subscriptions=a)
        replica_b: MCPServer[object] = MCPServer("b", subscriptions=b)

        @replica_a.tool()
        async def change(ctx: Context) -> str:
            """Change the tools and a resource."""
            await ctx.notify_tools_changed()
            await ctx.notify_resource_updated("app://total")
            return "changed"

        async with mcp.Client(replica_a) as on_a, mcp.Client(replica_b) as on_b:
            async with on_b.listen(tools_list_changed=True, resource_subscriptions=["app://total"]) as stream:
                await on_a.call_tool("change", {})
                events: list[ServerEvent] = []
                with anyio.fail_after(5):
                    async for event in stream:
                        events.append(event)
                        if len(events) == 2:
                            break
        assert events == [ToolsListChanged(), ResourceUpdated(uri="app://total")]


def test_the_bus_refuses_to_run_on_trio(server: RedisServer) -> None:
    async def scenario() -> None:
        async with subscription_bus(server.url, namespace=namespace()):
            pass

    with pytest.raises(RuntimeError, match="agentfx.redis runs on asyncio only"):
        anyio.run(scenario, backend="trio")


class Stall:
    """A TCP proxy in front of Redis that, once stalled, forwards nothing and closes nothing: a partition."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.stalled = False
        self.url = ""
        self._opened = 0
        self._stalled_below = 0

    def stall_open_connections(self) -> None:
        """Stall only the connections open now (their NAT state gone, say); new ones go through."""
        self._stalled_below = self._opened

    async def _pipe(self, source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream, index: int) -> None:
        try:
            async for chunk in source:
                if not self.stalled and index >= self._stalled_below:
                    await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass

    async def _serve(self, client: anyio.abc.SocketStream) -> None:
        index = self._opened
        self._opened += 1
        async with client, await anyio.connect_tcp("127.0.0.1", self.target_port) as upstream:
            async with anyio.create_task_group() as group:
                group.start_soon(self._pipe, client, upstream, index)
                group.start_soon(self._pipe, upstream, client, index)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0) as listener:
            self.url = f"redis://127.0.0.1:{listener.extra(anyio.abc.SocketAttribute.local_port)}/0"
            task_status.started()
            await listener.serve(self._serve)


async def test_publishing_while_redis_stops_answering_fails_within_a_bound(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentfx.redis._bus._TIMEOUT", 0.2)
    stall = Stall(server.port)
    async with anyio.create_task_group() as group:
        await group.start(stall.run)
        async with subscription_bus(stall.url, namespace=namespace()) as bus:
            heard: list[ServerEvent] = []
            bus.subscribe(heard.append)
            await bus.publish(ToolsListChanged())
            stall.stalled = True
            # One retry at most: twice the timeout, then the caller hears of it (its own listeners already did).
            with anyio.fail_after(2), pytest.raises(RedisError):
                await bus.publish(ToolsListChanged())
            assert heard == [ToolsListChanged(), ToolsListChanged()]
        group.cancel_scope.cancel()


async def test_a_listening_connection_that_went_silent_is_replaced_and_events_arrive_again(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("agentfx.redis._bus._HEARTBEAT", 0.2)
    monkeypatch.setattr("agentfx.redis._bus._TIMEOUT", 0.2)
    stall = Stall(server.port)
    ns = namespace()
    async with anyio.create_task_group() as group:
        await group.start(stall.run)
        async with subscription_bus(stall.url, namespace=ns) as cut_off, subscription_bus(server.url, namespace=ns) as other:
            heard: list[ServerEvent] = []
            cut_off.subscribe(heard.append)
            await other.publish(ToolsListChanged())
            await received(heard, 1)
            # Quiet but answering its pings: kept.
            await anyio.sleep(1.0)
            assert not any("stopped answering" in record.getMessage() for record in caplog.records)
            # The listening connection stays open and silent: no reset, no refusal, nothing.
            stall.stall_open_connections()
            with anyio.fail_after(5):
                while len(heard) < 2:
                    await other.publish(ResourceUpdated(uri="app://again"))
                    await anyio.sleep(0.05)
            assert heard[-1] == ResourceUpdated(uri="app://again")
        assert any("stopped answering" in record.getMessage() for record in caplog.records)
        group.cancel_scope.cancel()
