"""What the Streamable HTTP tests share: a uvicorn server on a free loopback port, raw requests, tokens.

It knows HTTP and the MCP wire shapes, not the application served. The server
runs in a thread with its own (asyncio) event loop, as uvicorn requires, so
clients run on asyncio and on trio alike.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import httpx
import jwt
import mcp
import uvicorn
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.types import ASGIApp, Message

from agentfx import AuditRecord

from tests.mcp_wire import INITIALIZE

JSON_AND_SSE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN = "2026-07-28"
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@contextmanager
def serving(make: Callable[[str], ASGIApp]) -> Generator[str]:
    """``make(url)`` served by uvicorn (lifespan on) on a free 127.0.0.1 port in a thread; yields the ``/mcp`` URL.

    The socket is bound first, so the app can be built knowing its own URL
    (an OAuth resource server names itself).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    config = uvicorn.Config(make(url), lifespan="on", log_level="warning", ws="none", http="h11")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@asynccontextmanager
async def sdk_client(url: str, token: str | None, **options: Any) -> AsyncGenerator[mcp.Client]:
    """The SDK's client over Streamable HTTP, sending ``token`` as a bearer token."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    # The transport leaves a client it was handed open, so this one is closed here.
    async with create_mcp_http_client(headers=headers) as http:
        async with mcp.Client(streamable_http_client(url, http_client=http), **options) as session:
            yield session


def modern(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    """A raw 2026-07-28 request: the per-request envelope in ``params._meta``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": meta}}


async def post(
    http: httpx.AsyncClient,
    url: str,
    body: object,
    *,
    token: str | None = None,
    session: str | None = None,
    version: str | None = None,
    **headers: str,
) -> tuple[int, Any, httpx.Response]:
    """POST ``body`` (JSON, or raw bytes); the status, the JSON-RPC answer (from JSON or the last SSE event), the response."""
    sent = dict(JSON_AND_SSE, **headers)
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    if session is not None:
        sent["Mcp-Session-Id"] = session
        sent.setdefault("Mcp-Protocol-Version", "2025-11-25")
    if version is not None:
        sent["Mcp-Protocol-Version"] = version
        if isinstance(body, dict):
            sent.update(_routing_headers(cast("dict[str, Any]", body)))
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = await http.post(url, content=content, headers=sent)
    payload: Any = None
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
        payload = json.loads(data[-1]) if data else None
    elif response.headers.get("content-type", "").startswith("application/json") and response.content:
        payload = response.json()
    return response.status_code, payload, response


def _routing_headers(body: dict[str, Any]) -> dict[str, str]:
    # 2026-07-28 routes on headers that must repeat the body's method and name.
    method = body.get("method")
    params: dict[str, Any] = body.get("params") or {}
    headers = {"Mcp-Method": method} if isinstance(method, str) else {}
    name = params.get("uri") if method == "resources/read" else params.get("name")
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    return headers


async def open_session(http: httpx.AsyncClient, url: str, token: str | None = None, **headers: str) -> str:
    """A 2025-11-25 session opened by hand: ``initialize``, then ``notifications/initialized``."""
    status, answer, response = await post(http, url, INITIALIZE, token=token, **headers)
    assert status == 200, answer
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, _ = await post(http, url, initialized, token=token, session=session)
    assert status == 202
    return session


@dataclass
class Exchange:
    """One exchange driven straight through the ASGI app: what it carried, and whether its response is whole."""

    status: int | None = None
    messages: list[dict[str, Any]] = field(default_factory=lambda: [])
    finished: anyio.Event = field(default_factory=anyio.Event)
    leave: anyio.Event = field(default_factory=anyio.Event)

    async def answered(self) -> dict[str, Any]:
        with anyio.fail_after(1):
            await self.finished.wait()
        return self.messages[-1]


@asynccontextmanager
async def exchange(asgi: ASGIApp, session: str, body: object | None = None) -> AsyncGenerator[Exchange]:
    """A POST of ``body`` in ``session`` (a GET of its stream without one) whose client stays until ``leave`` is set.

    httpx's ASGI transport answers only once a response is whole, and tells
    the app the client left only then; this client leaves when told to (at
    the latest when the block ends).
    """
    seen = Exchange()
    started = anyio.Event()
    content = b"" if body is None else json.dumps(body).encode()
    asked = False
    headers = [
        (b"host", b"127.0.0.1"),
        (b"accept", b"text/event-stream" if body is None else b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"mcp-session-id", session.encode()),
        (b"mcp-protocol-version", b"2025-11-25"),
    ]
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET" if body is None else "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }

    async def receive() -> Message:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": content, "more_body": False}
        await seen.leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            seen.status = message["status"]
            started.set()
        for line in bytes(message.get("body", b"")).decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                seen.messages.append(json.loads(line[5:]))
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            seen.finished.set()

    async def served() -> None:
        await asgi(scope, receive, send)

    async with anyio.create_task_group() as task_group:
        task_group.start_soon(served)
        with anyio.fail_after(5):
            await started.wait()
        assert seen.status == 200, seen.messages
        try:
            yield seen
        finally:
            seen.leave.set()


@dataclass
class LockedAudit:
    """An audit sink that keeps every record; the test reads it while a served app's thread writes it."""

    records: list[AuditRecord] = field(default_factory=lambda: [])
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, record: AuditRecord, /) -> None:
        with self.lock:
            self.records.append(record)

    def outcomes(self) -> list[tuple[str, str, str]]:
        """``(capability, decision, outcome)`` of every record so far."""
        with self.lock:
            return [(r.capability, r.decision, r.outcome) for r in self.records]


SECRET_KEY = "a-test-signing-key-of-at-least-32-bytes!"
ISSUER = "https://auth.example/realms/todos"


def jwt_token(
    audience: str, *, scopes: str = "", subject: str = "ann", expires_in: float = 300, key: str = SECRET_KEY
) -> str:
    """An HS256 JWT as an authorization server would issue it."""
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "sub": subject,
        "aud": audience,
        "client_id": "agent-app",
        "scope": scopes,
        "iat": now,
        "exp": now + int(expires_in),
    }
    return jwt.encode(claims, key, algorithm="HS256")


class JwtVerifier:
    """The tests' own ``TokenVerifier``: HS256 JWTs for one audience, as the README shows."""

    def __init__(self, audience: str) -> None:
        self.audience = audience

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            claims = jwt.decode(token, SECRET_KEY, algorithms=["HS256"], audience=self.audience, issuer=ISSUER)
        except jwt.InvalidTokenError:
            return None
        return AccessToken(
            token=token,
            client_id=claims["client_id"],
            scopes=claims["scope"].split(),
            expires_at=claims["exp"],
            subject=claims["sub"],
            resource=self.audience,
            claims=claims,
        )
