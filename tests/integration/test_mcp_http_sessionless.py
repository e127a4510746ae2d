"""MCP 2026-07-28 over Streamable HTTP, beside 2025-11-25 sessions on the same app, per principal.

A real uvicorn server on 127.0.0.1 and the SDK's own client: every test that
says 2026-07-28 asserts the negotiated revision, so a silent fallback to the
handshake would fail it. Bearer tokens name the principals: ``ann`` may remove
items, ``gus`` may not.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx
import mcp
import mcp_types as types
import pytest
from mcp.shared.subscriptions import ToolsListChanged
from starlette.requests import Request

from agentfx.audit import AuditRecord
from agentfx.mcp import http_app
from agentfx.runtime import AgentRuntime
from tests.http_support import LIST, MODERN, modern, open_session, post, sdk_client, serving
from tests.mcp_app import ADMIN, GUEST, Model, User, app
from tests.mcp_wire import INITIALIZE, call, text

pytestmark = pytest.mark.anyio

TOKENS = {"ann": ADMIN, "gus": GUEST}

# The SDK's Streamable HTTP client, on trio, leaves the async generators that
# read its SSE streams unfinished when it closes (against the SDK's own server
# too), which trio reports as a ResourceWarning: tests driving that client run
# on asyncio; the raw-request tests run on both.
SDK_CLIENT = pytest.mark.parametrize("anyio_backend", ["asyncio"])


def authenticate(request: Request) -> User | None:
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@dataclass
class Runtimes:
    """``make_runtime`` of the tests: one program per principal, counted, audited."""

    url: str = ""
    opened: list[User] = field(default_factory=lambda: [])
    closed: list[User] = field(default_factory=lambda: [])
    records: list[AuditRecord] = field(default_factory=lambda: [])
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, record: AuditRecord, /) -> None:
        with self.lock:
            self.records.append(record)

    @asynccontextmanager
    async def make(self, principal: User) -> AsyncGenerator[AgentRuntime[Model, User]]:
        self.opened.append(principal)
        try:
            async with app.run(principal=principal, audit=self) as runtime:
                yield runtime
        finally:
            self.closed.append(principal)


@pytest.fixture
def shared() -> Iterator[str]:
    """The App served to everyone: one program, one Model; each principal its own runtime."""
    with serving(lambda _url: http_app(app, authenticate=authenticate)) as url:
        yield url


@pytest.fixture
def per_principal() -> Iterator[Runtimes]:
    runtimes = Runtimes()
    with serving(lambda _url: http_app(runtimes.make, authenticate=authenticate)) as url:
        runtimes.url = url
        yield runtimes
    assert sorted(u.name for u in runtimes.opened) == sorted(u.name for u in runtimes.closed)


async def items(session: mcp.Client) -> list[str]:
    read = await session.read_resource("app://items")
    return json.loads("".join(getattr(contents, "text", "") for contents in read.contents))


@SDK_CLIENT
async def test_the_sdk_client_negotiates_2026_07_28_and_a_2025_client_shares_the_app(shared: str) -> None:
    async with sdk_client(shared, "ann") as ann, sdk_client(shared, "gus", mode="legacy") as gus:
        assert ann.protocol_version == MODERN, "no fallback to the handshake"
        assert gus.protocol_version == "2025-11-25"
        assert [tool.name for tool in (await ann.list_tools()).tools][:2] == ["add", "select"]
        assert text(await ann.call_tool("add", {"title": "milk"})) == "Dispatched Added"
        # One App, one program: what ann did over 2026-07-28 the 2025 session sees.
        assert "milk" in await items(gus)
        await gus.call_tool("select", {"item": "milk"})
        refused = await gus.call_tool("remove_selected", {})
        assert refused.is_error and text(refused) == "Only admins may remove items"
        assert text(await ann.call_tool("remove_selected", {})).splitlines()[0] == "Completed: Removed"
        assert "milk" not in await items(gus)
        invalid = await ann.call_tool("add", {"title": 7})
        assert invalid.is_error and invalid.structured_content is not None
        assert invalid.structured_content["_tag"] == "AgentInvalidInputError"
        with pytest.raises(mcp.MCPError) as unknown:
            await ann.call_tool("nope", {})
        assert unknown.value.error.code == types.INVALID_PARAMS


@SDK_CLIENT
async def test_a_pinned_2026_client_acts_as_the_principal_its_token_proves(shared: str) -> None:
    async with sdk_client(shared, "gus", mode=MODERN) as gus:
        assert gus.protocol_version == MODERN
        await gus.call_tool("add", {"title": "tea"})
        await gus.call_tool("select", {"item": "tea"})
        refused = await gus.call_tool("remove_selected", {})
        assert text(refused) == "Only admins may remove items"
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client raises its own error for a 401
        async with sdk_client(shared, "mallory", mode=MODERN) as nobody:
            await nobody.list_tools()


async def test_every_2026_request_is_authenticated_on_its_own(per_principal: Runtimes) -> None:
    url = per_principal.url
    async with httpx.AsyncClient() as http:
        status, answer, response = await post(http, url, modern("tools/list"), version=MODERN)
        assert status == 401 and response.headers["www-authenticate"] == "Bearer"
        status, _, _ = await post(http, url, modern("tools/list"), token="mallory", version=MODERN)
        assert status == 401
        added = modern("tools/call", {"name": "add", "arguments": {"title": "ann's"}})
        status, answer, _ = await post(http, url, added, token="ann", version=MODERN)
        assert status == 200 and answer["result"]["content"][0]["text"] == "Dispatched Added"
        read = modern("resources/read", {"uri": "app://items"})
        # Each principal its own runtime: gus's request reaches gus's program only.
        status, answer, _ = await post(http, url, read, token="gus", version=MODERN)
        assert answer["result"]["contents"][0]["text"] == "[]"
        status, answer, _ = await post(http, url, read, token="ann", version=MODERN)
        assert answer["result"]["contents"][0]["text"] == '["ann\'s"]'
        # A 2025 session of ann's shares ann's runtime; gus's session does not.
        session = await open_session(http, url, "ann")
        status, answer, _ = await post(http, url, call(2, "add", {"title": "again"}), token="ann", session=session)
        assert status == 200
        status, answer, _ = await post(http, url, read, token="ann", version=MODERN)
        assert answer["result"]["contents"][0]["text"] == '["ann\'s","again"]'
        # A 2026 request carrying ann's session id but gus's token is gus's.
        status, answer, _ = await post(
            http, url, read, token="gus", version=MODERN, **{"Mcp-Session-Id": session}
        )
        assert status == 200, answer
        assert answer["result"]["contents"][0]["text"] == "[]"
    assert [u.name for u in per_principal.opened] == ["ann", "gus"]
    assert {(r.principal, r.capability) for r in per_principal.records} == {(ADMIN, "add")}


async def test_a_principals_runtime_is_released_when_idle_and_kept_while_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agentfx.mcp._http.SESSION_IDLE_TIMEOUT", 1.0)
    runtimes = Runtimes()
    asgi = http_app(runtimes.make, authenticate=authenticate)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        url = "http://127.0.0.1/mcp"
        status, _, _ = await post(http, url, modern("tools/list"), token="ann", version=MODERN)
        assert status == 200 and asgi.principal_count == 1
        session = await open_session(http, url, "gus")
        with anyio.fail_after(5):
            while runtimes.closed != [ADMIN]:
                # gus's session is in use, which keeps gus's runtime.
                status, _, _ = await post(http, url, LIST, token="gus", session=session)
                assert status == 200
                await anyio.sleep(0.05)
        assert asgi.principal_count == 1
        # Seen again, ann gets a fresh runtime.
        status, _, _ = await post(http, url, modern("tools/list"), token="ann", version=MODERN)
        assert status == 200 and runtimes.opened == [ADMIN, GUEST, ADMIN]
        response = await http.delete(url, headers={"Authorization": "Bearer gus", "Mcp-Session-Id": session})
        assert response.status_code == 200
        with anyio.fail_after(5):
            while asgi.principal_count:
                await anyio.sleep(0.05)
    assert sorted(u.name for u in runtimes.closed) == ["ann", "ann", "gus"]


async def test_past_max_principals_an_idle_one_is_released_else_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._http.MAX_PRINCIPALS", 1)
    runtimes = Runtimes()
    asgi = http_app(runtimes.make, authenticate=authenticate)
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        url = "http://127.0.0.1/mcp"
        status, _, _ = await post(http, url, modern("tools/list"), token="ann", version=MODERN)
        assert status == 200
        status, _, _ = await post(http, url, modern("tools/list"), token="gus", version=MODERN)
        assert status == 200, "ann was idle, so ann's runtime made room"
        await open_session(http, url, "gus")
        status, answer, _ = await post(http, url, modern("tools/list"), token="ann", version=MODERN)
        assert (status, answer["error"]["message"]) == (503, "Too many principals")
    assert [u.name for u in runtimes.opened] == ["ann", "gus"]


@SDK_CLIENT
async def test_subscriptions_listen_tells_each_principal_of_its_own_changes(per_principal: Runtimes) -> None:
    url = per_principal.url
    async with sdk_client(url, "ann") as ann, sdk_client(url, "gus") as gus:
        assert ann.protocol_version == gus.protocol_version == MODERN
        async with ann.listen(tools_list_changed=True) as ann_events, gus.listen(tools_list_changed=True) as gus_events:
            await gus.call_tool("add", {"title": "gus's"})
            await gus.call_tool("select", {"item": "gus's"})
            with anyio.fail_after(5):
                event = await anext(gus_events)
            assert isinstance(event, ToolsListChanged)
            # ann's program did not change: ann hears nothing.
            with anyio.move_on_after(0.3) as quiet:
                await anext(ann_events)
            assert quiet.cancelled_caught
            assert "remove_selected" in [tool.name for tool in (await gus.list_tools()).tools]
            assert "remove_selected" not in [tool.name for tool in (await ann.list_tools()).tools]


async def test_host_and_origin_checks_hold_in_both_eras(per_principal: Runtimes) -> None:
    url = per_principal.url
    async with httpx.AsyncClient() as http:
        for version in (MODERN, None):
            body = modern("tools/list") if version else LIST
            status, answer, _ = await post(http, url, body, token="ann", version=version, Host="evil.example")
            assert (status, answer["error"]["message"]) == (421, "Misdirected Request: Host not allowed")
            status, answer, _ = await post(http, url, body, token="ann", version=version, Origin="https://evil.example")
            assert (status, answer["error"]["message"]) == (403, "Forbidden: Origin not allowed")
    assert per_principal.opened == [], "nothing refused reached a runtime"




async def test_an_authenticate_hook_may_read_the_body_in_either_era() -> None:
    # A hook checking a signature over the body reads it; the transport must
    # still be handed the whole body, or the request is never answered.
    key = b"request-signing-key"
    bodies: list[bytes] = []

    async def signed(request: Request) -> User | None:
        body = await request.body()
        bodies.append(body)
        expected = hmac.new(key, body, hashlib.sha256).hexdigest()
        return ADMIN if hmac.compare_digest(expected, request.headers.get("x-signature", "")) else None

    def signature(body: object) -> str:
        return hmac.new(key, json.dumps(body).encode(), hashlib.sha256).hexdigest()

    listed = modern("tools/list")
    with serving(lambda _url: http_app(app, authenticate=signed)) as url:
        async with httpx.AsyncClient(timeout=5) as http:
            with anyio.fail_after(10):
                status, answer, _ = await post(http, url, listed, version=MODERN, **{"x-signature": signature(listed)})
                assert status == 200 and [tool["name"] for tool in answer["result"]["tools"]][:2] == ["add", "select"]
                status, _, response = await post(http, url, INITIALIZE, **{"x-signature": signature(INITIALIZE)})
                assert status == 200 and response.headers.get("mcp-session-id")
                status, _, _ = await post(http, url, listed, version=MODERN, **{"x-signature": "forged"})
                assert status == 401
    assert bodies[0] == json.dumps(listed).encode()
