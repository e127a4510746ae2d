"""The MCP adapter end to end in-process, with the SDK's real ``mcp.Client``.

Every connected test runs on both protocol eras the SDK speaks in-process
(``legacy``: the 2025-11-25 handshake over JSON-RPC streams; ``auto``: the
2026-07-28 per-request path) and on asyncio and trio.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx
import mcp
import mcp_types as types
import msgspec
import pytest
from mcp.shared.memory import MessageStream, create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import ToolsListChanged

import agentfx
from agentfx.audit import AuditEntry, AuditLog
from agentfx.app import App
from agentfx.mcp import http_app, server
from agentfx.mcp import _wire as wire
from agentfx.mcp._server import LIST_CHANGED_DEBOUNCE
from agentfx.mcp._watch import Burst, ListWatch, Watcher
from agentfx.mcp._stdio import protocol_error
from agentfx.program import Program
from agentfx.runtime import AgentRuntime
from tests.http_support import MODERN, modern, open_session, post
from tests.mcp_app import ADMIN, GUEST, SECRET, Added, Cleared, Finished, Model, Selected, User, Waited, app
from tests.mcp_wire import INITIALIZE, call, text, tools_changed

pytestmark = pytest.mark.anyio

MODES = pytest.mark.parametrize("mode", ["legacy", "auto"])


@dataclass
class Connected:
    client: mcp.Client
    runtime: AgentRuntime[Model, User]
    program: Program[Model, Any]
    log: AuditLog
    wire: list[object]


@asynccontextmanager
async def connected(mode: str, *, principal: User = ADMIN) -> AsyncGenerator[Connected]:
    """A client connected in-process to the test app's runtime; ``wire`` collects every notification."""
    log = agentfx.audit_log(principal=lambda user: user.name)
    seen: list[object] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        seen.append(message)

    async with app.program() as program:
        runtime = app.bind(program, principal=principal, audit=log)
        async with mcp.Client(server(runtime), mode=mode, message_handler=handler) as client:
            yield Connected(client, runtime, program, log, seen)


def decoded(result: types.CallToolResult) -> agentfx.DispatchError:
    return msgspec.convert(result.structured_content, agentfx.DispatchError)


async def entries(log: AuditLog, count: int) -> list[AuditEntry]:
    with anyio.fail_after(5):
        while len(log.entries()) < count:
            await anyio.sleep(0.01)
    return log.entries()


# --- tools/list -------------------------------------------------------------------


@MODES
async def test_tools_list_the_capabilities_available_in_the_current_model(mode: str) -> None:
    async with connected(mode) as c:
        listed = await c.client.list_tools()
        available = c.runtime.messages.available()
        assert [tool.name for tool in listed.tools] == [d.name for d in available]
        assert "remove_selected" not in [tool.name for tool in listed.tools]
        for tool, descriptor in zip(listed.tools, available, strict=True):
            assert tool.description == descriptor.description
            assert tool.input_schema == descriptor.input_schema

        await c.program.send(Added("a"))
        await c.program.send(Selected("a"))
        # The listing depends on the Model, so a fresh list shows the change at once.
        relisted = await c.client.list_tools()
        assert {"remove_selected", "clear"} <= {tool.name for tool in relisted.tools}


async def test_the_server_names_itself_agentfx_with_agentfxs_version() -> None:
    async with connected("legacy") as c:
        assert c.client.server_info is not None
        assert (c.client.server_info.name, c.client.server_info.version) == ("agentfx", agentfx.__version__)
    async with app.run() as runtime, mcp.Client(server(runtime, name="items", version="9"), mode="legacy") as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("items", "9")


# --- tools/call: success ----------------------------------------------------------


@MODES
async def test_a_call_dispatches_and_summarizes(mode: str) -> None:
    async with connected(mode) as c:
        result = await c.client.call_tool("add", {"title": "milk"})
        assert not result.is_error
        assert text(result) == "Dispatched Added"
        assert result.structured_content == {"capability": "add", "tag": "Added"}
        assert c.program.model.items == ("milk",)
        (entry,) = c.log.entries()
        assert (entry.transport, entry.capability, entry.principal) == ("mcp", "add", "ann")
        assert (entry.decision, entry.outcome) == ("dispatched", "dispatched")


@MODES
async def test_a_completed_call_names_the_message_that_settled_it(mode: str) -> None:
    async with connected(mode) as c:
        await c.program.send(Added("milk"))
        await c.program.send(Selected("milk"))
        result = await c.client.call_tool("remove_selected", {})
        assert not result.is_error
        assert text(result) == 'Completed: Removed\n{"capability":"remove_selected","tag":"RequestedRemove","completion":{"status":"completed","message":{"type":"Removed","item":"milk"}}}'
        assert result.structured_content == {
            "capability": "remove_selected",
            "tag": "RequestedRemove",
            "completion": {"status": "completed", "message": {"type": "Removed", "item": "milk"}},
        }
        assert c.program.model.items == ()


@MODES
async def test_a_declared_failure_is_an_error_result(mode: str) -> None:
    async with connected(mode) as c:
        await c.program.send(Added("locked"))
        await c.program.send(Selected("locked"))
        result = await c.client.call_tool("remove_selected", {})
        assert result.is_error
        # The reason reaches a model that reads only text, too.
        assert text(result) == (
            "Failed: RemoveFailed\n"
            '{"capability":"remove_selected","tag":"RequestedRemove","completion":{"status":"failed",'
            '"message":{"type":"RemoveFailed","item":"locked","reason":"This item is locked"}}}'
        )
        assert result.structured_content == {
            "capability": "remove_selected",
            "tag": "RequestedRemove",
            "completion": {
                "status": "failed",
                "message": {"type": "RemoveFailed", "item": "locked", "reason": "This item is locked"},
            },
        }


@MODES
async def test_omitted_arguments_are_an_empty_payload(mode: str) -> None:
    async with connected(mode) as c:
        await c.program.send(Added("a"))
        await c.program.send(Selected("a"))
        result = await c.client.call_tool("clear")
        assert text(result) == "Dispatched Cleared"
        assert c.program.model.selected is None


# --- tools/call: refusals -----------------------------------------------------------


@MODES
async def test_an_unknown_tool_is_a_protocol_error(mode: str) -> None:
    async with connected(mode) as c:
        with pytest.raises(mcp.MCPError) as raised:
            await c.client.call_tool("no_such_tool", {})
        assert raised.value.error.code == types.INVALID_PARAMS
        assert raised.value.error.message == "No such capability: no_such_tool"
        # The connection keeps serving.
        assert text(await c.client.call_tool("add", {"title": "x"})) == "Dispatched Added"


@MODES
async def test_invalid_input_is_an_error_result_carrying_the_failure(mode: str) -> None:
    async with connected(mode) as c:
        wrong_type = await c.client.call_tool("add", {"title": 3})
        unknown_field = await c.client.call_tool("add", {"title": "x", "extra": 1})
        for result, path, problem in (
            (wrong_type, "$.title", '"title" must be a string'),
            (unknown_field, "$", '"extra" is not a field of this input'),
        ):
            assert result.is_error
            assert text(result) == f'Invalid input for "add": {problem}'
            assert decoded(result) == agentfx.AgentInvalidInputError("add", "Added", 'Invalid input for "add"', path, problem)
        assert c.program.model.items == ()


@MODES
async def test_an_unavailable_capability_is_an_error_result(mode: str) -> None:
    async with connected(mode) as c:
        result = await c.client.call_tool("remove_selected", {})
        assert result.is_error
        assert decoded(result) == agentfx.AgentCapabilityUnavailableError.of("remove_selected", "RequestedRemove")
        assert text(result) == 'Capability "remove_selected" is not available right now'


@MODES
async def test_an_unauthorized_call_is_an_error_result_with_the_refusal_reason(mode: str) -> None:
    async with connected(mode, principal=GUEST) as c:
        await c.program.send(Added("a"))
        await c.program.send(Selected("a"))
        result = await c.client.call_tool("remove_selected", {})
        assert result.is_error
        assert text(result) == "Only admins may remove items"
        assert decoded(result) == agentfx.AgentAuthorizationError(
            "remove_selected", "RequestedRemove", "Only admins may remove items"
        )
        assert c.program.model.items == ("a",)


@MODES
async def test_a_completion_timeout_is_an_error_result(mode: str) -> None:
    async with connected(mode) as c:
        result = await c.client.call_tool("stall", {})
        assert result.is_error
        error = decoded(result)
        assert isinstance(error, agentfx.AgentCompletionTimeoutError)
        assert text(result) == error.message == (
            '"stall" was dispatched but did not complete within 0.05s. The Message still reached update.'
        )


# --- defects ----------------------------------------------------------------------


@MODES
async def test_no_defect_text_ever_reaches_the_client(mode: str) -> None:
    async with connected(mode) as c:
        seen: list[str] = []

        exploded = await c.client.call_tool("explode", {})
        assert exploded.is_error
        assert text(exploded) == 'Capability "explode" failed unexpectedly'
        assert exploded.structured_content == {
            "_tag": "AgentDefect",
            "capability": "explode",
            "message": 'Capability "explode" failed unexpectedly',
        }
        seen.append(exploded.model_dump_json())

        before = [tool.name for tool in (await c.client.list_tools()).tools]
        await c.client.call_tool("break", {})
        # An availability rule that raises hides its own tool, not the listing.
        listing = await c.client.list_tools()
        assert "fragile" in before and [tool.name for tool in listing.tools] == [n for n in before if n != "fragile"]
        seen.append(listing.model_dump_json())

        fragile = await c.client.call_tool("fragile", {})
        assert text(fragile) == 'Capability "fragile" failed unexpectedly'
        seen.append(fragile.model_dump_json())

        with pytest.raises(mcp.MCPError) as read:
            await c.client.read_resource("app://fragile")
        assert read.value.error.code == types.INTERNAL_ERROR
        seen.append(repr(read.value.error))

        await anyio.sleep(LIST_CHANGED_DEBOUNCE * 3)
        seen.extend(repr(message) for message in c.wire)
        assert SECRET not in "\n".join(seen)
        outcomes = {e.capability: e.outcome for e in c.log.entries()}
        assert (outcomes["explode"], outcomes["fragile"]) == ("AgentDefect", "AgentDefect")


# --- resources --------------------------------------------------------------------


@MODES
async def test_resources_are_served_at_app_uris(mode: str) -> None:
    async with connected(mode) as c:
        await c.program.send(Added("milk"))
        listed = await c.client.list_resources()
        assert [(r.uri, r.name, r.mime_type) for r in listed.resources] == [
            ("app://items", "items", "application/json"),
            ("app://fragile", "fragile", "application/json"),
            ("app://context", "context", "application/json"),
        ]
        items = await c.client.read_resource("app://items")
        context = await c.client.read_resource("app://context")
        assert [(x.uri, getattr(x, "text", None)) for x in items.contents] == [("app://items", '["milk"]')]
        assert [getattr(x, "text", None) for x in context.contents] == [
            '{"items":["milk"],"selected":null,"broken":false,"waiting":false}'
        ]


@MODES
async def test_an_unknown_resource_is_a_protocol_error(mode: str) -> None:
    async with connected(mode) as c:
        for uri in ("app://nope", "file:///etc/passwd", "app://", "app://items/", "app://context/x"):
            with pytest.raises(mcp.MCPError) as raised:
                await c.client.read_resource(uri)
            assert raised.value.error.code == types.INVALID_PARAMS
            assert raised.value.error.message == f'Cannot read resource "{uri}": no such resource'
            assert raised.value.error.data == {"uri": uri}
        assert (await c.client.read_resource("app://items")).contents


@MODES
async def test_a_client_asking_for_resource_templates_is_told_there_are_none(mode: str) -> None:
    # The resources capability is declared, so clients may ask; every resource has a fixed URI.
    async with connected(mode) as c:
        templates = await c.client.list_resource_templates()
        assert templates.resource_templates == [] and templates.next_cursor is None


async def test_resource_templates_are_none_on_the_http_wire_in_both_eras() -> None:
    asgi = http_app(app)
    templates = {"jsonrpc": "2.0", "id": 1, "method": "resources/templates/list"}
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        url = "http://127.0.0.1/mcp"
        session = await open_session(http, url)
        status, legacy, _ = await post(http, url, templates, session=session)
        assert (status, legacy["result"]) == (200, {"resourceTemplates": []})
        status, current, _ = await post(http, url, modern("resources/templates/list"), version=MODERN)
        assert status == 200, current
        assert current["result"]["resourceTemplates"] == []


def _clashing_context() -> agentfx.Definition[Model, Any]:
    return agentfx.define(
        agentfx.expose(Added, agentfx.variant(Added, "Add")),
        resources=[agentfx.resource("context", "Clashes", schema=list[str], read=lambda m: [])],
        context=agentfx.projection(Model, lambda m: m),
    )


async def test_a_resource_named_context_beside_a_projection_is_refused() -> None:
    def update(model: Model, _message: Added) -> Model:
        return model

    async with agentfx.run_program(init=Model(), update=update) as program:
        runtime = agentfx.bind(_clashing_context(), host=program.host())
        with pytest.raises(agentfx.ContractError, match="app://context"):
            server(runtime)


def test_an_http_app_of_an_app_refuses_the_context_clash_when_it_is_made() -> None:
    # Made, not at its first request: a contract mistake is the developer's to see at once.
    def update(model: Model, _message: Added) -> Model:
        return model

    clash = App(_clashing_context(), Model(), update)
    with pytest.raises(agentfx.ContractError, match="app://context"):
        http_app(clash)


class _Verifier:
    async def verify_token(self, token: str) -> None:
        return None


def _ping_app() -> App[int, Added, None]:
    def update(count: int, _message: Added) -> int:
        return count + 1

    return App(agentfx.define(agentfx.expose(Added, agentfx.variant(Added, "Add"))), 0, update)


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({"allowed_hosts": "127.0.0.1"}, "allowed_hosts=...) takes a list of names, not one string: write allowed_hosts=['127.0.0.1']"),
        ({"allowed_origins": "https://app.example"}, "allowed_origins=...) takes a list of names"),
        ({"allowed_hosts": [1]}, "allowed_hosts=...) takes strings, got int"),
        ({"authenticate": "nope"}, "authenticate=...) takes a function, got str"),
        ({"name": None}, "http_app(name=...) takes a string, got NoneType"),
        ({"version": 2}, "http_app(version=...) takes a string, got int"),
        ({"request_state_security": "k" * 32}, "request_state_security takes the SDK's RequestStateSecurity"),
        ({"token_verifier": object(), "auth": object()}, "token_verifier=...) takes the SDK's TokenVerifier"),
        ({"token_verifier": _Verifier(), "auth": {"issuer_url": "https://issuer.example"}}, "auth=...) takes the SDK's AuthSettings, got dict"),
    ],
    ids=lambda value: next(iter(cast("dict[str, object]", value))) if isinstance(value, dict) else "",
)
def test_an_http_app_made_with_an_argument_of_the_wrong_kind_is_refused_when_made(
    arguments: dict[str, Any], refusal: str
) -> None:
    # Each would otherwise be accepted and fail every request (421 for every
    # Host when a string's characters are taken as the allowed names).
    with pytest.raises(agentfx.ContractError) as refused:
        http_app(_ping_app(), **arguments)
    assert refusal in str(refused.value)


def test_an_http_app_of_something_neither_an_app_nor_a_factory_is_refused() -> None:
    with pytest.raises(agentfx.ContractError, match="takes an App or make_runtime"):
        http_app(42)  # pyright: ignore[reportArgumentType]


async def test_server_refuses_what_is_not_a_bound_runtime_or_a_wrong_policy() -> None:
    pings = _ping_app()
    with pytest.raises(agentfx.ContractError, match=re.escape("write `async with app.run() as runtime:`")):
        server(pings)  # pyright: ignore[reportArgumentType]
    async with pings.run() as runtime:
        with pytest.raises(agentfx.ContractError, match="RequestStateSecurity"):
            server(runtime, request_state_security="k" * 32)  # pyright: ignore[reportArgumentType]
        with pytest.raises(agentfx.ContractError, match=re.escape("server(name=...) takes a string")):
            server(runtime, name=None)  # pyright: ignore[reportArgumentType]


# --- notifications/tools/list_changed ---------------------------------------------


def list_changes(wire_log: list[object]) -> int:
    return sum(isinstance(m, types.ToolListChangedNotification) for m in wire_log)


async def settle() -> None:
    await anyio.sleep(LIST_CHANGED_DEBOUNCE * 4)


async def test_list_changed_only_after_listing_only_on_a_difference_and_debounced() -> None:
    async with connected("legacy") as c:
        assert c.client.server_capabilities.tools is not None
        assert c.client.server_capabilities.tools.list_changed is True
        await c.program.send(Added("a"))
        await c.program.send(Selected("a"))
        await settle()
        assert list_changes(c.wire) == 0, "the client had not listed yet"

        await c.client.list_tools()
        await c.program.send(Added("b"))
        await settle()
        assert list_changes(c.wire) == 0, "the available set did not change"

        await c.program.send(Cleared())
        await settle()
        assert list_changes(c.wire) == 1

        for _ in range(3):
            await c.program.send(Selected("a"))
            await c.program.send(Cleared())
        await c.program.send(Selected("b"))
        await settle()
        assert list_changes(c.wire) == 2, "a burst is announced once"

        await c.program.send(Cleared())
        await c.program.send(Selected("a"))
        await settle()
        assert list_changes(c.wire) == 2, "a burst that ends where it began is no change"


class Opened(msgspec.Struct, frozen=True, tag=True):
    pass


class Poked(msgspec.Struct, frozen=True, tag=True):
    pass


Door = agentfx.for_model(bool)
door = Door.define(
    Door.expose(
        Opened | Poked,
        Door.variant(Opened, "Open the door", name="open"),
        Door.variant(Poked, "Poke through the open door", name="poke", available=lambda opened: opened),
    )
)


def open_door(opened: bool, message: Opened | Poked) -> bool:
    return opened or isinstance(message, Opened)


async def test_a_change_the_client_sdk_saw_while_validating_is_still_announced(monkeypatch: pytest.MonkeyPatch) -> None:
    # A window longer than the calls below take, so the SDK's own listing
    # surely falls inside it.
    monkeypatch.setattr("agentfx.mcp._server.LIST_CHANGED_DEBOUNCE", 0.3)
    notifications: list[object] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        notifications.append(message)

    async with agentfx.App(door, False, open_door).run() as runtime:
        async with mcp.Client(server(runtime), mode="legacy", message_handler=handler) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == ["open"]
            await client.call_tool("open", {})
            # Not listed yet, so the SDK lists tools itself to validate this result.
            assert text(await client.call_tool("poke", {})) == "Dispatched Poked"
            await tools_changed(notifications)


@MODES
async def test_without_model_change_reports_no_list_change_is_promised(mode: str) -> None:
    opened = [False]

    def dispatch(message: Opened | Poked) -> None:
        opened[0] = opened[0] or isinstance(message, Opened)

    blind = agentfx.bind(door, host=agentfx.Host(model=lambda: opened[0], dispatch=dispatch))
    async with mcp.Client(server(blind), mode=mode) as client:
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is False
        await client.call_tool("open", {})
        assert [tool.name for tool in (await client.list_tools()).tools] == ["open", "poke"]
    async with agentfx.App(door, False, open_door).run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True


@MODES
async def test_every_era_promises_only_the_notifications_the_server_sends(mode: str) -> None:
    # The resources are fixed by the contract, so their list never changes:
    # resources.listChanged is false in both eras (2026-07-28's server/discover
    # included); subscribe and tools.listChanged hold exactly when the host
    # reports Model changes.
    async with agentfx.App(door, False, open_door).run() as runtime, mcp.Client(server(runtime), mode=mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.resources == types.ResourcesCapability(subscribe=True, list_changed=False)
        assert capabilities.tools == types.ToolsCapability(list_changed=True)
    blind = agentfx.bind(door, host=agentfx.Host(model=lambda: False, dispatch=lambda _message: None))
    async with mcp.Client(server(blind), mode=mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.resources == types.ResourcesCapability(subscribe=False, list_changed=False)
        assert capabilities.tools == types.ToolsCapability(list_changed=False)


async def test_the_http_wire_promises_the_same_on_initialize_and_on_server_discover() -> None:
    asgi = http_app(app)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        url = "http://127.0.0.1/mcp"
        status, initialized, _ = await post(http, url, INITIALIZE)
        assert status == 200, initialized
        status, discovered, _ = await post(http, url, modern("server/discover"), version=MODERN)
        assert status == 200, discovered
    for answer in (initialized, discovered):
        capabilities = answer["result"]["capabilities"]
        assert capabilities["resources"] == {"subscribe": True, "listChanged": False}
        assert capabilities["tools"] == {"listChanged": True}
    assert MODERN in discovered["result"]["supportedVersions"]


async def test_list_changed_reaches_a_2026_client_through_its_listen_stream() -> None:
    async with connected("auto") as c:
        async with c.client.listen(tools_list_changed=True) as subscription:
            await c.program.send(Added("a"))
            await c.program.send(Selected("a"))
            with anyio.fail_after(2):
                event = await subscription.__anext__()
            assert event == ToolsListChanged()
        tools = await c.client.list_tools()
        assert "remove_selected" in [tool.name for tool in tools.tools]


# --- cancellation -----------------------------------------------------------------


@MODES
async def test_cancelling_a_call_aborts_its_invocation(mode: str) -> None:
    async with connected(mode) as c:
        reached = anyio.Event()
        c.program.observe(lambda message: reached.set() if isinstance(message, Waited) else None)
        baseline = c.program.listener_count
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(c.client.call_tool, "wait", None)
            with anyio.fail_after(5):
                await reached.wait()
            task_group.cancel_scope.cancel()
        (entry,) = await entries(c.log, 1)
        # Cancelled through the signal: recorded as a cancellation of a Message
        # that reached update, not as an interrupted dispatch.
        assert (entry.capability, entry.decision, entry.outcome) == ("wait", "dispatched", "AgentCancelledError")
        assert c.program.listener_count == baseline, "the completion listener was released"
        await c.program.send(Finished())
        assert text(await c.client.call_tool("add", {"title": "after"})) == "Dispatched Added"


# --- raw JSON-RPC in-process -------------------------------------------------------


class Raw:
    """A connection to ``server(runtime)`` spoken one JSON-RPC message at a time."""

    def __init__(self, streams: MessageStream) -> None:
        self._read, self._write = streams

    async def send(self, message: dict[str, Any]) -> None:
        await self._write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(5):
            item = await self._read.receive()
        assert isinstance(item, SessionMessage)
        return item.message.model_dump(by_alias=True, exclude_unset=True)


@asynccontextmanager
async def raw(runtime: AgentRuntime[Any, Any]) -> AsyncGenerator[Raw]:
    """A raw client, past the 2025-11-25 handshake."""
    async with create_client_server_memory_streams() as (client, served):
        mcp_server = server(runtime)
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(mcp_server.run, *served, mcp_server.create_initialization_options())
            connection = Raw(client)
            await connection.send(INITIALIZE)
            assert (await connection.receive())["result"]["protocolVersion"] == "2025-11-25"
            await connection.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            yield connection
            task_group.cancel_scope.cancel()


async def test_calls_reusing_a_request_id_are_distinct_invocations() -> None:
    log = agentfx.audit_log()
    async with app.run(audit=log) as runtime, raw(runtime) as connection:
        for title in ("a", "b"):
            await connection.send(call(1, "add", {"title": title}))
            assert (await connection.receive())["id"] == 1
    first, second = (entry.invocation for entry in log.entries())
    assert first != second
    assert first.endswith("/1") and second.endswith("/1"), "the request id stays visible"


# --- the pure mapping ---------------------------------------------------------------


FAILURES: list[agentfx.DispatchError] = [
    agentfx.AgentCapabilityUnavailableError.of("c", "T"),
    agentfx.AgentInvalidInputError.of("c", "T", "$.x"),
    agentfx.AgentAuthorizationError.of("c", "T"),
    agentfx.AgentCancelledError.while_waiting("c"),
    agentfx.AgentCompletionTimeoutError.while_waiting("c", "i-1", 1.0),
]


@pytest.mark.parametrize("error", FAILURES, ids=lambda e: type(e).__name__)
def test_every_refusal_maps_to_an_error_result_that_decodes_back(error: agentfx.DispatchError) -> None:
    result = wire.failure(error)
    assert result.is_error
    assert text(result) == error.message
    assert msgspec.convert(result.structured_content, agentfx.DispatchError) == error
    assert result.structured_content == msgspec.json.decode(msgspec.json.encode(error))


def test_an_unknown_capability_maps_to_invalid_params() -> None:
    with pytest.raises(mcp.MCPError) as raised:
        wire.failure(agentfx.AgentUnknownCapabilityError.of("nope"))
    assert raised.value.error.code == types.INVALID_PARAMS


# --- the list watch -----------------------------------------------------------------


class FakeAvailability:
    def __init__(self) -> None:
        self.names = ["a"]
        self.announced = 0
        self.fail = False
        self.reads = 0
        self.listeners: list[Callable[[], None]] = []

    def read(self) -> list[str]:
        self.reads += 1
        if self.fail:
            raise RuntimeError(SECRET)
        return self.names

    async def announce(self) -> None:
        self.announced += 1

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener)

    def changed(self) -> None:
        for listener in list(self.listeners):
            listener()


class Listening:
    """A watcher's listener that keeps one tool-list baseline."""

    def __init__(self, watch: ListWatch) -> None:
        self.watch = watch

    async def notice(self, burst: Burst) -> None:
        await self.watch.update(burst.names())


async def test_a_burst_of_changes_within_the_window_is_read_and_announced_once() -> None:
    fake = FakeAvailability()
    watcher = Watcher(fake.subscribe, fake.read, lambda _uri: None, delay=0.2)
    watch = ListWatch(fake.read, fake.announce)
    watch.listed(["a"])
    async with watcher.hosting():
        watcher.join(Listening(watch))
        fake.names = ["a", "b"]
        for _ in range(5):
            fake.changed()
            # Every task runs as far as it can: without a window, each change would be read at once.
            await anyio.wait_all_tasks_blocked()
        assert fake.reads == 0, "nothing is read while the window is open"
        with anyio.fail_after(5):
            while fake.announced == 0:
                await anyio.sleep(0.05)
        assert (fake.reads, fake.announced, watch.last) == (1, 1, ("a", "b"))


async def test_the_list_watch_diffs_and_waits_for_a_listing() -> None:
    fake = FakeAvailability()
    watcher = Watcher(fake.subscribe, fake.read, lambda _uri: None, delay=0.01)
    watch = ListWatch(fake.read, fake.announce)
    async with watcher.hosting():
        watcher.join(Listening(watch))
        fake.names = ["a", "b"]
        fake.changed()
        await anyio.sleep(0.05)
        assert fake.announced == 0 and watch.last is None

        watch.listed(["a"])
        for _ in range(5):
            fake.changed()
        await anyio.sleep(0.05)
        assert (fake.announced, watch.last) == (1, ("a", "b"))

        fake.changed()
        await anyio.sleep(0.05)
        assert fake.announced == 1

        fake.fail = True
        fake.names = ["a"]
        fake.changed()
        await anyio.sleep(0.05)
        assert fake.announced == 1
        fake.fail = False
        fake.changed()
        await anyio.sleep(0.05)
        assert fake.announced == 2


async def test_a_listing_after_the_first_does_not_swallow_a_change() -> None:
    fake = FakeAvailability()
    watcher = Watcher(fake.subscribe, fake.read, lambda _uri: None, delay=0.01)
    watch = ListWatch(fake.read, fake.announce)
    async with watcher.hosting():
        watcher.join(Listening(watch))
        watch.listed(["a"])
        fake.names = ["a", "b"]
        fake.changed()
        # A listing inside the window (a client SDK validating a result, say)
        # already shows "b", but the client's own code was never told.
        watch.listed(["a", "b"])
        await anyio.sleep(0.05)
        assert (fake.announced, watch.last) == (1, ("a", "b"))


# --- unreadable stdio lines ---------------------------------------------------------


def line_error(line: str) -> Exception:
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:
        return exc
    raise AssertionError(f"{line!r} is a valid message")


@pytest.mark.parametrize(
    ("line", "code", "request_id"),
    [
        ("{not json", types.PARSE_ERROR, None),
        ("[" * 400 + "]" * 400, types.PARSE_ERROR, None),
        ('"a string"', types.INVALID_REQUEST, None),
        ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": [1, 2]}', types.INVALID_REQUEST, 7),
        ('{"jsonrpc": "2.0", "id": true, "method": "x", "params": 1}', types.INVALID_REQUEST, None),
        ('{"id": 3}', types.INVALID_REQUEST, None),
    ],
)
def test_an_unreadable_line_gets_the_matching_protocol_error(line: str, code: int, request_id: int | None) -> None:
    error = protocol_error(line_error(line))
    assert (error.error.code, error.id) == (code, request_id)


# --- packaging ----------------------------------------------------------------------


def test_without_the_sdk_the_adapter_says_how_to_install_it() -> None:
    code = "import sys; sys.modules['mcp'] = None; import agentfx.mcp"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0
    assert "pip install 'agentfx[mcp]'" in done.stderr


def test_the_core_never_imports_the_adapter() -> None:
    code = (
        "import sys, agentfx, agentfx.app, agentfx.cli, agentfx.testing; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'agentfx.mcp'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert done.stdout.strip() == "[]"
