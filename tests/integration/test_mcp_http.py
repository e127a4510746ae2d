"""Streamable HTTP against a real uvicorn server on 127.0.0.1, with the SDK's client and raw requests.

The server runs in a thread with its own (asyncio) event loop, as uvicorn
requires; the clients run on asyncio and on trio. Bearer tokens name the
principals: ``ann`` may remove items, ``gus`` may not.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import AsyncGenerator, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp
import mcp_types as types
import msgspec
import pytest
import uvicorn
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.subscriptions import ToolsListChanged
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Mount

import agentfx
from agentfx.app import App
from agentfx.audit import AuditRecord
from agentfx.cli import ExitCode
from agentfx.mcp import http_app
from agentfx.mcp._http import HttpApp
from agentfx.mcp._server import LIST_CHANGED_DEBOUNCE
from agentfx.program import Command
from agentfx.runtime import AgentRuntime
from agentfx.testing import RecordingHost
from tests.http_support import exchange, modern
from tests.http_support import post as raw_post
from tests.mcp_app import ADMIN, GUEST, SECRET, Model, User, app, definition
from tests.mcp_wire import INITIALIZE, call, nested, text, tools_changed

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"ann": ADMIN, "gus": GUEST}
ALLOWED_ORIGIN = "https://console.example"
JSON_AND_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Served:
    url: str
    asgi: HttpApp[User]
    records: list[AuditRecord] = field(default_factory=lambda: [])
    lock: threading.Lock = field(default_factory=threading.Lock)
    opened: int = 0
    closed: int = 0

    def record(self, record: AuditRecord, /) -> None:
        with self.lock:
            self.records.append(record)

    def outcomes(self, principal: User | None = None) -> list[tuple[str, str, str]]:
        with self.lock:
            return [
                (r.capability, r.decision, r.outcome)
                for r in self.records
                if principal is None or r.principal == principal
            ]


def authenticate(request: Request) -> User | None:
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@contextmanager
def in_a_thread(asgi: HttpApp[Any]) -> Generator[str]:
    """``asgi`` served by uvicorn, lifespan on, on 127.0.0.1 in a thread of its own; yields its URL."""
    config = uvicorn.Config(asgi, host="127.0.0.1", port=0, lifespan="on", log_level="warning", ws="none", http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    holder: list[Served] = []

    @asynccontextmanager
    async def make_runtime(principal: User) -> AsyncGenerator[AgentRuntime[Model, User]]:
        state = holder[0]
        state.opened += 1
        try:
            async with app.run(principal=principal, audit=state) as runtime:
                yield runtime
        finally:
            state.closed += 1

    asgi = http_app(make_runtime, authenticate=authenticate, allowed_origins=[ALLOWED_ORIGIN])
    with in_a_thread(asgi) as url:
        holder.append(Served(url, asgi))
        yield holder[0]
    assert holder[0].opened == holder[0].closed, "every session's runtime was released at shutdown"


@asynccontextmanager
async def client(served: Served, token: str, **options: Any) -> AsyncGenerator[mcp.Client]:
    # The transport leaves a client it was handed open, so this one is closed here.
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with mcp.Client(streamable_http_client(served.url, http_client=http), **options) as session:
            yield session


async def context(session: mcp.Client) -> dict[str, Any]:
    read = await session.read_resource("app://context")
    return json.loads("".join(getattr(contents, "text", "") for contents in read.contents))


# The SDK's Streamable HTTP client, on trio, leaves the async generators that read
# its SSE streams unfinished when it closes a session-based connection (against
# the SDK's own server too); trio then finalizes them with a ResourceWarning,
# an error here. So tests driving that client run on asyncio; the raw-request
# tests below exercise this server from trio as well.
SDK_CLIENT = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@SDK_CLIENT
async def test_the_sdk_client_over_http(served: Served) -> None:
    notifications: list[object] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        notifications.append(message)

    async with client(served, "ann", message_handler=handler, mode="legacy") as session:
        # The session-based era, as a client that speaks only it would; the
        # sessionless one is tested against the same app in test_mcp_http_sessionless.
        assert session.protocol_version == "2025-11-25"
        tools = [tool.name for tool in (await session.list_tools()).tools]
        assert tools == ["add", "select", "wait", "stall", "explode", "break", "fragile"]

        assert text(await session.call_tool("add", {"title": "milk"})) == "Dispatched Added"
        invalid = await session.call_tool("add", {"title": ["milk"]})
        assert invalid.is_error and invalid.structured_content is not None
        assert invalid.structured_content["_tag"] == "AgentInvalidInputError"
        unavailable = await session.call_tool("remove_selected", {})
        assert text(unavailable) == 'Capability "remove_selected" is not available right now'
        with pytest.raises(mcp.MCPError) as unknown:
            await session.call_tool("nope", {})
        assert unknown.value.error.code == types.INVALID_PARAMS
        timed_out = await session.call_tool("stall", {})
        assert timed_out.is_error and text(timed_out).startswith('"stall" was dispatched but did not complete')

        exploded = await session.call_tool("explode", {})
        assert text(exploded) == 'Capability "explode" failed unexpectedly'
        assert SECRET not in exploded.model_dump_json()
        with pytest.raises(mcp.MCPError) as leaky:
            await session.read_resource("app://fragile")
        assert SECRET not in repr(leaky.value.error)

        await session.call_tool("select", {"item": "milk"})
        await tools_changed(notifications)
        assert text(await session.call_tool("remove_selected", {})).splitlines()[0] == "Completed: Removed"
        assert (await context(session))["items"] == []
        with pytest.raises(mcp.MCPError) as missing:
            await session.read_resource("app://nope")
        assert missing.value.error.code == types.INVALID_PARAMS

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(session.call_tool, "wait", None)
            with anyio.fail_after(5):
                while not (await context(session))["waiting"]:
                    await anyio.sleep(0.02)
            task_group.cancel_scope.cancel()
        with anyio.fail_after(5):
            while ("wait", "dispatched", "AgentCancelledError") not in served.outcomes(ADMIN):
                await anyio.sleep(0.02)
        assert text(await session.call_tool("add", {"title": "still serving"})) == "Dispatched Added"
        assert SECRET not in repr(notifications)
    assert ("explode", "refused", "AgentDefect") in served.outcomes(ADMIN)


# --- sessions and principals --------------------------------------------------------


async def post(
    http: httpx.AsyncClient,
    url: str,
    body: object,
    *,
    token: str | None = "ann",
    session: str | None = None,
    **headers: str,
) -> tuple[int, Any, httpx.Response]:
    sent = dict(JSON_AND_SSE, **headers)
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if session is not None:
        sent["Mcp-Session-Id"] = session
        sent.setdefault("Mcp-Protocol-Version", "2025-11-25")
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await http.post(url, content=content, headers=sent)
    payload: Any = None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
        payload = json.loads(data[-1]) if data else None
    elif response.headers.get("content-type", "").startswith("application/json") and response.content:
        payload = response.json()
    return response.status_code, payload, response


async def open_session(http: httpx.AsyncClient, url: str, token: str, **headers: str) -> str:
    status, _, response = await post(http, url, INITIALIZE, token=token, **headers)
    assert status == 200
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, _ = await post(http, url, initialized, token=token, session=session)
    assert status == 202
    return session


LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@SDK_CLIENT
async def test_each_session_has_its_principal_and_runtime(served: Served) -> None:
    async with client(served, "ann") as ann, client(served, "gus") as gus:
        for session in (ann, gus):
            await session.call_tool("add", {"title": "milk"})
            await session.call_tool("select", {"item": "milk"})
        refused = await gus.call_tool("remove_selected", {})
        assert refused.is_error and text(refused) == "Only admins may remove items"
        assert text(await ann.call_tool("remove_selected", {})).splitlines()[0] == "Completed: Removed"
        # Each principal got its own runtime from make_runtime: ann's removal is not gus's.
        assert "milk" not in (await context(ann))["items"]
        assert "milk" in (await context(gus))["items"]
    assert ("remove_selected", "refused", "AgentAuthorizationError") in served.outcomes(GUEST)
    assert ("remove_selected", "refused", "AgentAuthorizationError") not in served.outcomes(ADMIN)


async def test_a_session_id_is_no_credential_for_another_principal(served: Served) -> None:
    async with httpx.AsyncClient() as http:
        session = await open_session(http, served.url, "ann")
        status, answer, _ = await post(http, served.url, LIST, token="gus", session=session)
        assert (status, answer["error"]["message"]) == (404, "Session not found")
        unknown_status, unknown, _ = await post(http, served.url, LIST, token="ann", session="0" * 32)
        assert (unknown_status, unknown) == (status, answer), "indistinguishable from an unknown session"
        status, answer, response = await post(http, served.url, LIST, token=None, session=session)
        assert status == 401 and response.headers["www-authenticate"] == "Bearer"
        status, answer, _ = await post(http, served.url, LIST, token="mallory", session=session)
        assert status == 401
        status, answer, _ = await post(http, served.url, LIST, token="ann", session=session)
        assert status == 200 and "tools" in answer["result"]

        opened, closed = served.opened, served.closed
        response = await http.delete(
            served.url, headers={"Authorization": "Bearer ann", "Mcp-Session-Id": session, **JSON_AND_SSE}
        )
        assert response.status_code == 200
        status, _, _ = await post(http, served.url, LIST, token="ann", session=session)
        assert status == 404
        # The runtime is the principal's, not the session's: it outlives the session.
        assert (served.opened, served.closed) == (opened, closed)


async def test_listed_origins_are_exactly_the_allowed_ones(served: Served) -> None:
    async with httpx.AsyncClient() as http:
        for origin in ("https://evil.example", "http://localhost:5173", "http://127.0.0.1:8080"):
            status, answer, _ = await post(http, served.url, INITIALIZE, Origin=origin)
            assert status == 403 and answer["error"]["message"] == "Forbidden: Origin not allowed"
        session = await open_session(http, served.url, "ann", Origin=ALLOWED_ORIGIN)
        status, answer, _ = await post(http, served.url, LIST, session=session, Origin="https://evil.example")
        assert status == 403


async def test_with_no_origins_listed_loopback_ones_are_allowed() -> None:
    asgi = http_app(app)
    async with in_process(asgi) as http:
        for origin in ("http://localhost:5173", "http://127.0.0.1:8080", "http://[::1]"):
            await open_session(http, "http://127.0.0.1/mcp", "anyone", Origin=origin)
        status, _, _ = await post(http, "http://127.0.0.1/mcp", INITIALIZE, Origin="https://evil.example")
        assert status == 403


async def test_bad_input_over_http_gets_the_right_answer_and_the_server_keeps_serving(served: Served) -> None:
    async with httpx.AsyncClient() as http:
        session = await open_session(http, served.url, "ann")

        async def send(body: object, **headers: str) -> tuple[int, Any]:
            status, answer, _ = await post(http, served.url, body, session=session, **headers)
            return status, answer

        status, answer = await send(b"{not json")
        assert (status, answer["error"]["code"]) == (400, types.PARSE_ERROR)
        status, answer = await send({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
        assert answer["error"]["code"] == types.METHOD_NOT_FOUND
        status, answer = await send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": [1]})
        assert status == 400
        for arguments in ([1, 2], "title", 7):
            status, answer = await send(call(4, "add", arguments))
            assert answer["error"]["code"] == types.INVALID_PARAMS
        status, answer = await send(call(5, "add", {"title": nested(400)}))
        assert (status, answer["error"]["code"]) == (400, types.PARSE_ERROR)
        status, answer = await send(call(5, "add", {"title": nested(60)}))
        assert answer["result"]["isError"] is True and answer["result"]["structuredContent"]["path"] == "$.title"
        status, _ = await send(call(6, "add", {"title": "x" * 5_000_000}))
        assert status == 413
        status, answer = await send(
            {"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": "app://x"}}
        )
        assert answer["error"]["code"] == types.INVALID_PARAMS
        status, answer = await send(INITIALIZE, **{"Mcp-Protocol-Version": "2026-07-28"})
        assert status == 400 and answer["error"]["code"] == types.INVALID_PARAMS, "2026-07-28 has no initialize"

        status, answer, _ = await post(http, served.url.removesuffix("/mcp") + "/elsewhere", LIST)
        assert status == 404
        status, answer, _ = await post(http, served.url, LIST)
        assert (status, answer["error"]["message"]) == (400, "Bad Request: Missing session ID")
        response = await http.get(served.url, headers={"Authorization": "Bearer ann", **JSON_AND_SSE})
        assert response.status_code == 400

        status, answer = await send(call(8, "add", {"title": "ok"}))
        assert status == 200 and answer["result"]["content"][0]["text"] == "Dispatched Added"


@dataclass
class Serving:
    """An ``agentfx serve --transport http`` process that has said where it serves."""

    process: Process
    stderr: BufferedByteReceiveStream
    before: str
    """What it printed before the line naming its URL."""
    url: str

    async def rest_of_stderr(self) -> str:
        chunks: list[bytes] = []
        with anyio.fail_after(10):
            try:
                while True:
                    chunks.append(await self.stderr.receive())
            except anyio.EndOfStream:
                pass
        return b"".join(chunks).decode()


@asynccontextmanager
async def agentfx_serve(target: str, *options: str) -> AsyncGenerator[Serving]:
    """``agentfx serve TARGET --transport http OPTIONS`` in a subprocess, once it serves; stopped on exit."""
    command = [sys.executable, "-m", "agentfx", "serve", target, "--transport", "http", *options]
    async with await anyio.open_process(command, cwd=ROOT) as process:
        try:
            assert process.stderr is not None
            stderr = BufferedByteReceiveStream(process.stderr)
            before = ""
            with anyio.fail_after(20):
                while not (line := (await stderr.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    before += line + "\n"
            yield Serving(process, stderr, before, line.rsplit(" ", 1)[-1])
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(10):
                await process.wait()


@asynccontextmanager
async def agentfx_serve_http(*options: str) -> AsyncGenerator[tuple[str, str]]:
    """``agentfx serve tests.mcp_app:app --transport http`` in a subprocess: what it printed first, and its URL."""
    async with agentfx_serve("tests.mcp_app:app", *options) as serving:
        yield serving.before, serving.url


async def test_agentfx_serve_over_http_on_a_public_address_warns_there_is_no_authentication() -> None:
    async with agentfx_serve_http("--host", "0.0.0.0", "--port", "0") as (before, url):
        assert before.startswith("agentfx: warning: serving 0.0.0.0 without authentication;"), before
        assert url.startswith("http://0.0.0.0:")
    async with agentfx_serve_http("--port", "0") as (before, url):
        assert before == ""
        assert url.startswith("http://127.0.0.1:")


async def test_agentfx_serve_over_http_shares_one_program_between_sessions() -> None:
    async with agentfx_serve_http("--port", "0") as (_, url), httpx.AsyncClient() as http:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp"), url
        first = await open_session(http, url, "anyone")
        second = await open_session(http, url, "anyone")
        status, answer, _ = await post(http, url, call(1, "add", {"title": "shared"}), session=first)
        assert (status, answer["result"]["content"][0]["text"]) == (200, "Dispatched Added")
        read = {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "app://items"}}
        status, answer, _ = await post(http, url, read, session=second)
        assert answer["result"]["contents"][0]["text"] == '["shared"]'


# --- the ASGI app on its own --------------------------------------------------------


@asynccontextmanager
async def in_process(asgi: HttpApp[Any]) -> AsyncGenerator[httpx.AsyncClient]:
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        yield http


async def test_without_authenticate_every_session_gets_the_principal_none() -> None:
    principals: list[object] = []

    def make_runtime(principal: object) -> Any:
        principals.append(principal)
        return app.run(principal=ADMIN)

    asgi = http_app(make_runtime)
    async with in_process(asgi) as http:
        await open_session(http, "http://127.0.0.1/mcp", "anyone")
        await open_session(http, "http://127.0.0.1/mcp", "else")
        assert (asgi.session_count, asgi.principal_count) == (2, 1)
    # One anonymous principal, so one runtime, shared by both sessions.
    assert principals == [None]
    assert (asgi.session_count, asgi.principal_count) == (0, 0), "closing the app ends every session and runtime"


async def result(http: httpx.AsyncClient, session: str, request: dict[str, Any], token: str = "anyone") -> Any:
    status, answer, _ = await post(http, "http://127.0.0.1/mcp", request, token=token, session=session)
    assert status == 200, answer
    return answer["result"]


REMOVE = call(3, "remove_selected", {})


async def test_an_app_is_one_program_shared_by_sessions_acting_as_the_apps_principal() -> None:
    asgi = http_app(app, name="items", version="9")
    async with in_process(asgi) as http:
        status, answer, _ = await post(http, "http://127.0.0.1/mcp", INITIALIZE)
        assert status == 200 and answer["result"]["serverInfo"] == {"name": "items", "version": "9"}
        first = await open_session(http, "http://127.0.0.1/mcp", "anyone")
        second = await open_session(http, "http://127.0.0.1/mcp", "else")
        await result(http, first, call(1, "add", {"title": "milk"}))
        await result(http, second, call(2, "select", {"item": "milk"}))
        # Without authenticate the sessions act as the App's own principal, an
        # admin: the admins-only capability runs instead of failing unexpectedly.
        removed = await result(http, first, REMOVE)
        assert removed["content"][0]["text"].splitlines()[0] == "Completed: Removed"
        read = {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "app://items"}}
        assert (await result(http, second, read))["contents"][0]["text"] == "[]"


async def test_a_refused_initialize_opens_no_session() -> None:
    # The SDK answers it with a JSON-RPC error in a 200, and a session id.
    asgi = http_app(app)
    async with in_process(asgi) as http:
        refused = dict(INITIALIZE, params={"protocolVersion": 5})
        named: list[str] = []
        for _ in range(3):
            status, answer, response = await post(http, "http://127.0.0.1/mcp", refused, token=None)
            assert status == 200 and answer["error"]["code"] == types.INVALID_PARAMS
            named.append(response.headers.get("mcp-session-id", "none"))
        assert asgi.session_count == 0
        status, _, _ = await post(http, "http://127.0.0.1/mcp", LIST, token=None, session=named[-1])
        assert status == 404
        await open_session(http, "http://127.0.0.1/mcp", "anyone")
        assert asgi.session_count == 1


async def test_an_app_with_authenticate_acts_as_each_sessions_principal() -> None:
    asgi = http_app(app, authenticate=authenticate)
    async with in_process(asgi) as http:
        ann = await open_session(http, "http://127.0.0.1/mcp", "ann")
        gus = await open_session(http, "http://127.0.0.1/mcp", "gus")
        await result(http, gus, call(1, "add", {"title": "milk"}), token="gus")
        await result(http, ann, call(2, "select", {"item": "milk"}), token="ann")
        refused = await result(http, gus, REMOVE, token="gus")
        assert refused["isError"] and refused["content"][0]["text"] == "Only admins may remove items"
        assert (await result(http, ann, REMOVE, token="ann"))["content"][0]["text"].splitlines()[0] == "Completed: Removed"


async def test_an_async_authenticate_hook_is_awaited() -> None:
    async def authenticate_later(request: Request) -> User | None:
        await anyio.sleep(0)
        return authenticate(request)

    asgi = http_app(lambda principal: app.run(principal=principal), authenticate=authenticate_later)
    async with in_process(asgi) as http:
        session = await open_session(http, "http://127.0.0.1/mcp", "gus")
        status, _, _ = await post(http, "http://127.0.0.1/mcp", LIST, token="ann", session=session)
        assert status == 404
        status, _, _ = await post(http, "http://127.0.0.1/mcp", INITIALIZE, token="mallory")
        assert status == 401


async def test_failing_hooks_answer_500_without_their_text() -> None:
    def refuse_loudly(_request: Request) -> User:
        raise RuntimeError(SECRET)

    def cannot_start(_principal: User) -> Any:
        raise RuntimeError(SECRET)

    for asgi in (
        http_app(lambda principal: app.run(principal=principal), authenticate=refuse_loudly),
        http_app(cannot_start, authenticate=authenticate),
    ):
        async with in_process(asgi) as http:
            status, answer, response = await post(http, "http://127.0.0.1/mcp", INITIALIZE)
            assert (status, answer["error"]["message"]) == (500, "Internal error")
            assert SECRET not in response.text
            assert asgi.session_count == 0


async def test_the_app_refuses_requests_until_it_has_started() -> None:
    asgi = http_app(lambda principal: app.run(principal=principal))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        status, _, _ = await post(http, "http://127.0.0.1/mcp", INITIALIZE)
        assert status == 503


async def test_mounted_under_a_prefix_the_endpoint_is_at_the_prefix_slash_mcp() -> None:
    asgi = http_app(lambda _principal: app.run())
    outer = Starlette(routes=[Mount("/agent", app=asgi)])
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=outer)) as http:
        session = await open_session(http, "http://127.0.0.1/agent/mcp", "anyone")
        status, answer, _ = await post(http, "http://127.0.0.1/agent/mcp/", LIST, session=session)
        assert status == 200 and "tools" in answer["result"]
        status, _, _ = await post(http, "http://127.0.0.1/agent/elsewhere", LIST, session=session)
        assert status == 404


# --- an App whose program stops with an error ------------------------------------------


class Broke(msgspec.Struct, frozen=True, tag=True):
    """Starts a command that raises, which stops the program."""


class Broken(Exception):
    pass


async def _break() -> None:
    raise Broken(SECRET)


def _update(count: int, _message: Broke) -> tuple[int, list[Command[Broke]]]:
    return count + 1, [_break]


breaking = App(agentfx.define(agentfx.expose(Broke, agentfx.variant(Broke, "Break the program"))), 0, _update)
"""Served by ``agentfx serve tests.integration.test_mcp_http:breaking`` below."""

STOPPED = (500, "Internal error: the application stopped")


async def break_it(http: httpx.AsyncClient, url: str, session: str) -> None:
    # The call may be answered or cut short as its session ends with the program.
    with anyio.fail_after(5):
        try:
            await post(http, url, call(1, "broke", {}), session=session)
        except httpx.HTTPError:
            pass


async def test_a_failed_program_stops_the_app_and_every_request_is_answered_500() -> None:
    asgi = http_app(breaking)
    session = ""
    with pytest.raises(Broken):
        async with in_process(asgi) as http:
            session = await open_session(http, "http://127.0.0.1/mcp", "anyone")
            await break_it(http, "http://127.0.0.1/mcp", session)
            with anyio.fail_after(5):
                await anyio.sleep_forever()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        for request, on in ((INITIALIZE, None), (LIST, session)):
            status, answer, response = await post(http, "http://127.0.0.1/mcp", request, session=on)
            assert (status, answer["error"]["message"]) == STOPPED
            assert SECRET not in response.text and "Broken" not in response.text
    # Started again, it serves a fresh program; stopped cleanly, it says so with a 503.
    async with in_process(asgi) as http:
        session = await open_session(http, "http://127.0.0.1/mcp", "anyone")
        tools = await result(http, session, LIST)
        assert [tool["name"] for tool in tools["tools"]] == ["broke"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        status, answer, _ = await post(http, "http://127.0.0.1/mcp", INITIALIZE)
        assert (status, answer["error"]["message"]) == (503, "Service Unavailable: the server has stopped")


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_request_still_authenticating_when_the_server_stops_is_answered_503_and_leaves_no_principal(
    era: str,
) -> None:
    # It passed the running check before the server stopped; what it would
    # start then would never be started or ended, and its principal's requests
    # would wait on it forever once serving began again.
    authenticating = anyio.Event()
    go_on = anyio.Event()

    async def slow(request: Request) -> User | None:
        authenticating.set()
        await go_on.wait()
        return authenticate(request)

    asgi = http_app(lambda principal: app.run(principal=principal), authenticate=slow)
    first = (INITIALIZE, None) if era == "2025-11-25" else (modern("tools/list"), era)
    answers: list[tuple[int, Any]] = []

    async def request(http: httpx.AsyncClient) -> None:
        status, answer, _ = await raw_post(http, "http://127.0.0.1/mcp", first[0], token="ann", version=first[1])
        answers.append((status, answer))

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        async with anyio.create_task_group() as task_group:
            async with asgi.running():
                task_group.start_soon(request, http)
                await authenticating.wait()
            go_on.set()
        assert [(status, answer["error"]["message"]) for status, answer in answers] == [
            (503, "Service Unavailable: the server has stopped")
        ]
        assert (asgi.session_count, asgi.principal_count) == (0, 0)
        # Serving again, the same principal is served, not left waiting on what the stopped server began.
        async with asgi.running():
            with anyio.fail_after(5):
                await open_session(http, "http://127.0.0.1/mcp", "ann")
                status, answer, _ = await raw_post(
                    http, "http://127.0.0.1/mcp", modern("tools/list"), token="ann", version="2026-07-28"
                )
        assert status == 200 and "tools" in answer["result"]


async def test_under_a_servers_lifespan_a_failed_program_is_logged_and_answered_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="agentfx.mcp.http"), in_a_thread(http_app(breaking)) as url:
        async with httpx.AsyncClient() as http:
            session = await open_session(http, url, "anyone")
            await break_it(http, url, session)
            with anyio.fail_after(5):
                while (status := (await post(http, url, LIST, session=session))[0]) == 200:
                    await anyio.sleep(0.02)
            assert status == 500
            for request, on in ((INITIALIZE, None), (LIST, session)):
                status, answer, response = await post(http, url, request, session=on)
                assert (status, answer["error"]["message"]) == STOPPED
                assert SECRET not in response.text
    logged = [record for record in caplog.records if record.name == "agentfx.mcp.http"]
    assert [record.getMessage() for record in logged] == [
        "the application stopped with an error; every request is answered 500 until shutdown"
    ]
    assert logged[0].exc_info is not None and logged[0].exc_info[0] is Broken


async def test_agentfx_serve_over_http_exits_with_the_error_that_stopped_the_program() -> None:
    async with (
        agentfx_serve("tests.integration.test_mcp_http:breaking", "--port", "0") as serving,
        httpx.AsyncClient() as http,
    ):
        session = await open_session(http, serving.url, "anyone")
        await break_it(http, serving.url, session)
        with anyio.fail_after(15):
            assert await serving.process.wait() == ExitCode.APP_FAILED
        stderr = await serving.rest_of_stderr()
        assert stderr.rstrip().endswith(f"Broken: {SECRET}"), stderr
        with pytest.raises(httpx.ConnectError):
            await post(http, serving.url, INITIALIZE)


@asynccontextmanager
async def get_stream(asgi: HttpApp[Any], session: str) -> AsyncGenerator[list[dict[str, Any]]]:
    """A session's GET stream, driven straight through the ASGI app; yields the messages it has carried so far.

    httpx's ASGI transport answers only once a response is complete, and a
    GET stream never is until the client leaves: so the stream is opened
    here, and left when the block ends.
    """
    async with exchange(asgi, session) as stream:
        yield stream.messages


def list_changes(messages: list[dict[str, Any]]) -> int:
    return sum(message.get("method") == "notifications/tools/list_changed" for message in messages)


def recorded_app() -> tuple[RecordingHost[Model, Any, User], HttpApp[Any]]:
    """An HTTP app whose every principal is served one runtime over a recording host the test drives."""
    recording: RecordingHost[Model, Any, User] = RecordingHost(Model(), principal=ADMIN)
    runtime = agentfx.bind(definition, host=recording.host)

    @asynccontextmanager
    async def make_runtime(_principal: object) -> AsyncGenerator[AgentRuntime[Model, User]]:
        yield runtime

    return recording, http_app(make_runtime)


async def test_an_idle_session_costs_the_model_nothing_and_a_listening_one_one_listener() -> None:
    # Sessions that nothing can tell of a change (no GET stream) do no work
    # when the Model changes; those that can share one subscription.
    recording, asgi = recorded_app()
    async with in_process(asgi) as http:
        sessions = [await open_session(http, "http://127.0.0.1/mcp", "anyone") for _ in range(5)]
        await result(http, sessions[0], call(1, "add", {"title": "milk"}))
        assert recording.listener_count == 0, "no session listens yet"
        await result(http, sessions[1], LIST)
        assert recording.listener_count == 0, "listed, but without a GET stream nothing could reach it"
        async with get_stream(asgi, sessions[1]) as first, get_stream(asgi, sessions[2]) as second:
            assert recording.listener_count == 1, "the one that listed and has a stream"
            await result(http, sessions[2], LIST)
            await result(http, sessions[1], LIST)
            assert recording.listener_count == 1, "once, however many listen"
            recording.set_model(Model(items=("milk",), selected="milk"))
            with anyio.fail_after(5):
                while list_changes(first) < 1 or list_changes(second) < 1:
                    await anyio.sleep(0.01)
            async with get_stream(asgi, sessions[3]) as third:
                # Opened, never listed: nothing to contradict, and no cost.
                assert recording.listener_count == 1
                recording.set_model(Model(items=("milk",)))
                with anyio.fail_after(5):
                    while list_changes(first) < 2 or list_changes(second) < 2:
                        await anyio.sleep(0.01)
                await anyio.sleep(LIST_CHANGED_DEBOUNCE * 3)
                assert list_changes(third) == 0
            # Each change announced once on each listening session.
            assert (list_changes(first), list_changes(second)) == (2, 2)
        await anyio.sleep(0)
        assert recording.listener_count == 0, "released when the last stream closed"
        async with get_stream(asgi, sessions[1]):
            assert recording.listener_count == 1, "the session's baseline outlives its stream"
    assert recording.listener_count == 0, "released with the session"


async def test_a_call_answered_before_the_client_disconnects_is_not_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    # Servers report a disconnect to every receive() once a response is
    # complete (httpx's ASGI transport as uvicorn does), and the SSE response
    # asks: that is no client leaving early, and costs no cancellation.
    cancelled: list[object] = []

    async def cancel(self: HttpApp[Any], session: object, request_id: object, scope: object) -> None:
        cancelled.append(request_id)

    monkeypatch.setattr(HttpApp, "_cancel", cancel)
    asgi = http_app(app)
    async with in_process(asgi) as http:
        session = await open_session(http, "http://127.0.0.1/mcp", "anyone")
        for request_id in range(3):
            await result(http, session, call(request_id, "add", {"title": "milk"}))
    assert cancelled == []


@SDK_CLIENT
async def test_over_http_a_call_that_changes_availability_says_so_before_its_answer(served: Served) -> None:
    events: list[object] = []

    async def handler(message: types.ServerNotification | Exception) -> None:
        events.append(message)

    # A 2025-11-25 session: the notification rides the call's own POST stream.
    async with client(served, "ann", message_handler=handler, mode="legacy") as session:
        assert session.protocol_version == "2025-11-25"
        tools = (await session.list_tools()).tools
        assert all(tool.output_schema is not None for tool in tools)
        await session.call_tool("add", {"title": "milk"})
        assert not any(isinstance(e, types.ToolListChangedNotification) for e in events)
        await session.call_tool("select", {"item": "milk"})
        # Sent on the call's own response stream, ahead of the result.
        assert any(isinstance(e, types.ToolListChangedNotification) for e in events)
        removed = await session.call_tool("remove_selected", {})
        summary, data = text(removed).split("\n")
        assert summary == "Completed: Removed"
        assert json.loads(data) == removed.structured_content


@SDK_CLIENT
async def test_over_http_a_2026_listen_stream_hears_of_the_change_before_the_answer(served: Served) -> None:
    async with client(served, "ann") as session:
        assert session.protocol_version == "2026-07-28"
        await session.call_tool("add", {"title": "tea"})
        async with session.listen(tools_list_changed=True) as subscription:
            await session.call_tool("select", {"item": "tea"})
            # The answer waited until the change had left on the listen stream.
            event: object = None
            with anyio.CancelScope() as scope:
                scope.cancel()
                event = await subscription.__anext__()
            assert event == ToolsListChanged()
        await session.call_tool("clear", {})
