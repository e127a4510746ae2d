"""What an MCP client is shown and told, with the SDK's real ``mcp.Client`` in-process (§9).

Titles, annotations and output schemas (validated by the client on every
success), the reply text, ``list_changed`` before the answer of a call that
changed availability, progress while a completion is awaited, and resources
that announce their changes. Every connected test runs on both protocol eras
the SDK speaks in-process (``legacy``: 2025-11-25; ``auto``: 2026-07-28) and on
asyncio and trio.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import anyio
import jsonschema
import mcp
import mcp_types as types
import msgspec
import pytest
from mcp.shared.subscriptions import ResourceUpdated, ToolsListChanged

import agentfx
from agentfx.app import App
from agentfx.mcp import server
from agentfx.mcp._server import LIST_CHANGED_DEBOUNCE, PROGRESS_INTERVAL
from agentfx.mcp._watch import ResourceWatch
from agentfx.program import Program
from agentfx.runtime import AgentRuntime
from examples.orders import app as orders
from examples.todo import app as todo
from tests.mcp_app import Finished, Model, User
from tests.mcp_app import app as items
from tests.mcp_wire import text

pytestmark = pytest.mark.anyio

MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])

CLERK = orders.Customer(id="clerk", role="clerk")
ADDRESS = {"name": "Ada", "street": "1 Road", "city": "London", "postal_code": "SW1 4JH", "country": "GB"}
ORDER: dict[str, Any] = {"items": [{"sku": "TEA-0001", "quantity": 2}], "shipping": ADDRESS}


@dataclass
class Wire:
    """Every notification a client's message handler saw, in order, with what the test did in between."""

    events: list[object] = field(default_factory=list[object])

    async def handler(self, message: types.ServerNotification | Exception) -> None:
        self.events.append(message)

    def mark(self, label: str) -> None:
        self.events.append(label)

    def of(self, kind: type[object]) -> list[object]:
        return [event for event in self.events if isinstance(event, kind)]


class _Validator(Protocol):
    def is_valid(self, instance: object) -> bool: ...

    def validate(self, instance: object) -> None: ...


def validator(schema: dict[str, Any]) -> _Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return cast(_Validator, jsonschema.Draft202012Validator(schema))


async def settle() -> None:
    await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)


# --- tools as listed ----------------------------------------------------------------------


@MODES
async def test_tools_have_titles_annotations_and_output_schemas(mode: str) -> None:
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        await client.call_tool("select_todo", {"id": "todo-1"})
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        views = {view.name: view for view in agentfx.tool_views(runtime)}
    assert list(listed) == ["create_todo", "delete_selected_todo", "select_todo", "cleared_selection"]
    delete = listed["delete_selected_todo"]
    assert delete.title == "Delete selected todo"
    assert delete.annotations == types.ToolAnnotations(read_only_hint=False, destructive_hint=True)
    assert listed["create_todo"].annotations == types.ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False
    )
    for name, tool in listed.items():
        assert tool.output_schema == views[name].output_schema
        assert tool.input_schema == views[name].input_schema
        assert tool.description == views[name].description


@MODES
async def test_a_tool_without_title_or_hints_has_none(mode: str) -> None:
    async with items.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        [add, *_] = (await client.list_tools()).tools
    assert (add.name, add.title, add.annotations) == ("add", None, None)
    assert add.output_schema is not None and add.output_schema["required"] == ["capability", "tag"]


# --- output schemas, validated by the client on every success ------------------------------------------


@MODES
async def test_every_success_is_validated_by_the_client_against_its_output_schema(mode: str) -> None:
    app = App(orders.AppAgent, init=orders.INITIAL, update=orders.update, principal=CLERK)
    too_many = {**ORDER, "items": [{"sku": "TEA-0001", "quantity": 99}] * 6}
    calls: list[tuple[str, dict[str, Any], str | None, bool]] = [
        ("place_order", ORDER, "completed", False),
        ("place_order", too_many, "failed", True),
        ("cancel_order", {"order_id": "order-1", "reason": "changed mind"}, "completed", False),
        ("cancel_order", {"order_id": "order-1", "reason": "again"}, "failed", True),
        ("change_priority", {"order_id": "order-3", "priority": "express"}, None, False),
    ]
    async with app.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        schemas = {tool.name: tool.output_schema for tool in (await client.list_tools()).tools}
        for name, payload, status, failed in calls:
            # The client raises on structured content its tool's schema rejects.
            result = await client.call_tool(name, payload)
            assert result.is_error is failed, text(result)
            schema = schemas[name]
            assert schema is not None and result.structured_content is not None
            # A declared failure is an error result, which the client does not validate: check it here.
            validator(schema).validate(result.structured_content)
            assert result.structured_content.get("completion", {}).get("status") == status
            # The first line is the summary; the rest is the same data as JSON.
            summary, *rest = text(result).split("\n")
            assert summary.split(" ")[0] in {"Completed:", "Failed:", "Dispatched"}
            if status is not None:
                assert msgspec.json.decode(rest[0]) == result.structured_content


class Measure(msgspec.Struct, frozen=True, tag=True):
    pass


class Measured(msgspec.Struct, frozen=True, tag=True):
    value: float


@MODES
@pytest.mark.parametrize("value", [1.5, float("nan"), float("inf"), -float("inf")], ids=str)
async def test_a_settling_message_with_a_float_that_is_not_finite_is_within_its_schema(mode: str, value: float) -> None:
    # msgspec encodes NaN and the infinities as null (JSON has neither): the
    # advertised schema admits it, or the client would refuse a completed call.
    def update(model: None, message: Measure | Measured) -> tuple[None, list[Any]] | None:
        async def measured() -> Measured:
            return Measured(value)

        return (model, [measured]) if isinstance(message, Measure) else model

    measure = agentfx.variant(Measure, "Measure", completion=agentfx.Completion(success=Measured, timeout=5.0))
    app = App(agentfx.define(agentfx.expose(Measure | Measured, measure)), None, update)
    async with app.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        # The client raises on structured content its tool's schema rejects.
        result = await client.call_tool("measure", {})
    assert not result.is_error and result.structured_content is not None
    shown = result.structured_content["completion"]["message"]["value"]
    assert shown == (value if value == 1.5 else None)


class Gauge(msgspec.Struct, frozen=True):
    value: float
    readings: list[float]


@MODES
@pytest.mark.parametrize("value", [1.5, float("nan"), float("inf"), -float("inf")], ids=str)
async def test_a_resource_or_context_with_a_float_that_is_not_finite_is_within_its_schema(mode: str, value: float) -> None:
    # Served as null, like a settling Message's float: what the manifest lists says so.
    contract = agentfx.define(
        agentfx.expose(Measure, agentfx.variant(Measure, "Measure")),
        [
            agentfx.resource("value", "The value", schema=float, read=lambda m: m),
            agentfx.resource("gauge", "The gauge", schema=Gauge, read=lambda m: Gauge(m, [m, 0.0])),
        ],
        agentfx.projection(Gauge, lambda m: Gauge(m, [m])),
    )
    manifest = agentfx.to_manifest(contract)
    schemas = {f"app://{r['name']}": r["schema"] for r in manifest["resources"]} | {"app://context": manifest["context"]}
    shown = value if value == 1.5 else None
    app = App(contract, value, lambda model, _message: model)
    async with app.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        served: dict[str, object] = {}
        for uri, listed in schemas.items():
            [content] = (await client.read_resource(uri)).contents
            assert isinstance(content, types.TextResourceContents)
            served[uri] = msgspec.json.decode(content.text)
            validator(listed).validate(served[uri])
    assert served == {
        "app://value": shown,
        "app://gauge": {"value": shown, "readings": [shown, 0.0]},
        "app://context": {"value": shown, "readings": [shown]},
    }
    assert [r.schema for r in agentfx.resources(contract)] == [r["schema"] for r in manifest["resources"]]
    assert agentfx.context_schema(contract) == manifest["context"]


@MODES
async def test_the_client_would_reject_a_result_outside_the_schema(mode: str) -> None:
    # The check above bites: data that breaks the advertised schema is refused.
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        [create, *_] = (await client.list_tools()).tools
        assert create.output_schema is not None
        check = validator(create.output_schema)
        good = (await client.call_tool("create_todo", {"title": "x"})).structured_content
        assert good is not None and check.is_valid(good)
        assert not check.is_valid({**good, "capability": "select_todo"})
        assert not check.is_valid({**good, "extra": 1})
        assert not check.is_valid({"capability": "create_todo", "tag": "RequestedCreateTodo"})


# --- what the text says ------------------------------------------------------------------------------


@MODES
async def test_a_create_returns_the_new_id_and_an_invalid_input_says_what_to_fix(mode: str) -> None:
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        created = await client.call_tool("create_todo", {"title": "Call the plumber"})
        invalid = await client.call_tool("create_todo", {})
        select = await client.call_tool("select_todo", {"id": 7})
    assert created.structured_content is not None
    made = created.structured_content["completion"]["message"]
    assert text(created) == "Completed: CreatedTodo\n" + msgspec.json.encode(created.structured_content).decode()
    assert f'"id":"{made["id"]}"' in text(created)
    assert invalid.is_error and text(invalid) == 'Invalid input for "create_todo": "title" is required'
    assert text(select) == 'Invalid input for "select_todo": "id" must be a string'
    assert invalid.structured_content is not None
    assert invalid.structured_content["problem"] == '"title" is required'


# --- list_changed before the answer ---------------------------------------------------------------------


async def test_a_call_that_changes_availability_announces_it_before_its_answer() -> None:
    wire = Wire()
    async with todo.app.run() as runtime:
        async with mcp.Client(server(runtime), mode="legacy", message_handler=wire.handler) as client:
            await client.list_tools()
            await client.call_tool("select_todo", {"id": "todo-1"})
            wire.mark("answered")
            changed = [i for i, e in enumerate(wire.events) if isinstance(e, types.ToolListChangedNotification)]
            assert changed and changed[0] < wire.events.index("answered"), wire.events
            # The debounced watcher saw the same change: no second notification.
            await settle()
            assert len(wire.of(types.ToolListChangedNotification)) == 1
            # A call that changes nothing announces nothing.
            await client.call_tool("create_todo", {"title": "x"})
            await settle()
            assert len(wire.of(types.ToolListChangedNotification)) == 1


async def test_a_2026_client_hears_of_the_change_on_its_listen_stream_before_the_answer() -> None:
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode="auto") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("select_todo", {"id": "todo-1"})
            # Already delivered when the answer arrived: taking it needs no wait.
            event: object = None
            with anyio.CancelScope() as scope:
                scope.cancel()
                event = await subscription.__anext__()
            assert event == ToolsListChanged()
            await settle()
            with anyio.move_on_after(LIST_CHANGED_DEBOUNCE * 2):
                assert await subscription.__anext__() is None, "announced twice"


@MODES
async def test_without_a_listing_a_call_announces_nothing(mode: str) -> None:
    wire = Wire()
    async with todo.app.run() as runtime:
        async with mcp.Client(server(runtime), mode=mode, message_handler=wire.handler) as client:
            await client.call_tool("select_todo", {"id": "todo-1"})
            await settle()
    assert wire.of(types.ToolListChangedNotification) == []


# --- progress while waiting --------------------------------------------------------------------------


@asynccontextmanager
async def waiting(mode: str, wire: Wire | None = None) -> AsyncGenerator[tuple[mcp.Client, Program[Model, Any]]]:
    async with items.program() as program:
        runtime: AgentRuntime[Model, User] = items.bind(program)
        handler = None if wire is None else wire.handler
        async with mcp.Client(server(runtime), mode=mode, message_handler=handler) as client:
            yield client, program


@MODES
async def test_a_call_waiting_for_its_completion_reports_progress(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._server.PROGRESS_INTERVAL", 0.05)
    seen: list[tuple[float, float | None, str | None]] = []
    late: list[str | None] = []
    answered = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        # Recorded, not asserted: the SDK swallows what a progress callback raises.
        if answered.is_set():
            late.append(message)
        else:
            seen.append((progress, total, message))

    async with waiting(mode) as (client, program):
        result: list[types.CallToolResult] = []

        async def call() -> None:
            result.append(await client.call_tool("wait", {}, progress_callback=on_progress))
            answered.set()

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call)
            with anyio.fail_after(5):
                while len(seen) < 3:
                    await anyio.sleep(0.01)
            await program.send(Finished())
        await anyio.sleep(0.2)
    assert late == [], "progress after the answer"
    assert text(result[0]).startswith("Completed: Finished")
    assert seen[0] == (1.0, None, "Dispatched Waited; waiting for Finished")
    assert [step for step, _, _ in seen] == [float(i) for i in range(1, len(seen) + 1)]
    assert all(message is not None and message.startswith("Still waiting for Finished after ") for _, _, message in seen[1:])


@MODES
async def test_no_progress_without_a_completion_or_without_a_token(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._server.PROGRESS_INTERVAL", 0.01)
    seen: list[object] = []
    wire = Wire()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with waiting(mode, wire) as (client, program):
        await client.call_tool("add", {"title": "a"}, progress_callback=on_progress)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call_wait, client)
            with anyio.fail_after(5):
                while not program.model.waiting:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.05)
            await program.send(Finished())
        # A refusal never reached the host: nothing to report.
        refused = await client.call_tool("clear", {}, progress_callback=on_progress)
        assert refused.is_error
    assert seen == []
    assert wire.of(types.ProgressNotification) == []


async def call_wait(client: mcp.Client) -> None:
    await client.call_tool("wait", {})


def test_the_progress_interval_is_ten_seconds() -> None:
    assert PROGRESS_INTERVAL == 10.0


# --- resources that change ------------------------------------------------------------------------------


async def subscribe(client: mcp.Client, uri: str) -> None:
    await client.session.send_request(
        types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)), types.EmptyResult
    )


async def unsubscribe(client: mcp.Client, uri: str) -> None:
    await client.session.send_request(
        types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)), types.EmptyResult
    )


def updated(wire: Wire) -> list[str]:
    return [str(e.params.uri) for e in wire.events if isinstance(e, types.ResourceUpdatedNotification)]


async def test_a_subscribed_resource_announces_a_changed_value_once_per_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    # A window wide enough that three calls in a row fall into one burst on a
    # loaded machine too; an announcement is awaited, an absence given a window and a half.
    window = 0.2
    monkeypatch.setattr("agentfx.mcp._server.LIST_CHANGED_DEBOUNCE", window)
    wire = Wire()

    async def announced(expected: list[str]) -> None:
        with anyio.fail_after(5):
            while len(updated(wire)) < len(expected):
                await anyio.sleep(0.01)
        await anyio.sleep(window * 1.5)
        assert updated(wire) == expected

    async with todo.app.run() as runtime:
        async with mcp.Client(server(runtime), mode="legacy", message_handler=wire.handler) as client:
            capabilities = client.server_capabilities.resources
            assert capabilities is not None and capabilities.subscribe is True
            await subscribe(client, "app://todos")
            # Selecting changes the Model and the context, not the todos' encoding.
            await client.call_tool("select_todo", {"id": "todo-1"})
            await announced([])
            for title in ("a", "b", "c"):
                await client.call_tool("create_todo", {"title": title})
            await announced(["app://todos"])  # a burst is announced once
            await subscribe(client, "app://context")
            await client.call_tool("cleared_selection", {})
            await announced(["app://todos", "app://context"])
            await unsubscribe(client, "app://todos")
            await unsubscribe(client, "app://context")
            await client.call_tool("create_todo", {"title": "d"})
            await announced(["app://todos", "app://context"])


async def test_subscribing_to_an_unknown_resource_is_a_protocol_error() -> None:
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode="legacy") as client:
        with pytest.raises(mcp.MCPError) as raised:
            await subscribe(client, "app://nope")
        assert raised.value.error.code == types.INVALID_PARAMS
        assert raised.value.error.message == 'Cannot read resource "app://nope": no such resource'


async def test_a_2026_client_listens_to_resource_uris() -> None:
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode="auto") as client:
        capabilities = client.server_capabilities.resources
        assert capabilities is not None and capabilities.subscribe is True
        async with client.listen(resource_subscriptions=["app://todos", "app://nope"]) as subscription:
            await client.call_tool("select_todo", {"id": "todo-1"})
            await client.call_tool("create_todo", {"title": "a"})
            with anyio.fail_after(2):
                event = await subscription.__anext__()
            assert event == ResourceUpdated(uri="app://todos")


async def test_a_listen_stream_acknowledges_only_what_it_will_carry() -> None:
    # Known URIs once each, in the client's order; an unknown one is left out,
    # as resources/subscribe refuses it. No list change is sent but the tools'.
    wanted = ["app://context", "app://nope", "app://todos", "app://context", "app://todos/"]
    async with todo.app.run() as runtime, mcp.Client(server(runtime), mode="auto") as client:
        async with client.listen(
            tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True, resource_subscriptions=wanted
        ) as subscription:
            assert subscription.honored == types.SubscriptionFilter(
                tools_list_changed=True, resource_subscriptions=["app://context", "app://todos"]
            )
            await client.call_tool("create_todo", {"title": "a"})
            updates: set[object] = set()
            with anyio.fail_after(2):
                while len(updates) < 2:
                    event = await subscription.__anext__()
                    if isinstance(event, ResourceUpdated):
                        updates.add(event)
            assert updates == {ResourceUpdated(uri="app://context"), ResourceUpdated(uri="app://todos")}
        async with client.listen(resource_subscriptions=["app://nope"]) as subscription:
            assert subscription.honored == types.SubscriptionFilter()


@MODES
async def test_a_host_that_reports_no_changes_offers_no_subscriptions(mode: str) -> None:
    contract = agentfx.define(
        agentfx.expose(todo.SelectedTodo, agentfx.variant(todo.SelectedTodo, "Select")),
        [agentfx.resource("todos", "The todos", schema=list[todo.Todo], read=lambda m: m.todos)],
    )
    blind = agentfx.bind(contract, host=agentfx.Host(model=lambda: todo.INITIAL, dispatch=lambda m: None))
    async with mcp.Client(server(blind), mode=mode) as client:
        capabilities = client.server_capabilities.resources
        assert capabilities is not None and not capabilities.subscribe


async def test_the_resource_watch_compares_encodings_and_counts_subscribers() -> None:
    values = {"app://a": b"1"}
    announced: list[str] = []

    async def announce(uri: str) -> None:
        announced.append(uri)

    watch = ResourceWatch(values.get, announce)
    watch.subscribe("app://a")
    watch.subscribe("app://a")
    await watch.check()
    assert announced == []
    values["app://a"] = b"2"
    await watch.check()
    await watch.check()
    assert announced == ["app://a"]
    watch.unsubscribe("app://a")
    assert watch.subscribed == {"app://a"}
    watch.unsubscribe("app://a")
    assert watch.subscribed == frozenset()
    values["app://a"] = b"3"
    await watch.check()
    assert announced == ["app://a"]


async def test_a_uri_unsubscribed_during_a_check_is_not_announced() -> None:
    values = {"app://a": b"1", "app://b": b"1"}
    announced: list[str] = []

    async def announce(uri: str) -> None:
        # The first announcement's client drops its other subscription before the watch reaches it.
        announced.append(uri)
        watch.unsubscribe("app://b")

    watch = ResourceWatch(values.get, announce)
    watch.subscribe("app://a")
    watch.subscribe("app://b")
    values.update({"app://a": b"2", "app://b": b"2"})
    await watch.check()
    assert announced == ["app://a"]
