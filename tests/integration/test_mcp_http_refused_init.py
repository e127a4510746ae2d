"""A refused ``initialize`` opens no 2025-11-25 session: the client is never told an id, and the id is no session.

The SDK answers a refused handshake with a JSON-RPC error in a 200, and names
a session in the response's headers before it knows the answer. Here such a
response names none, a request naming the session being opened is answered
``404 Session not found`` like any unknown one until the handshake succeeded,
and a refused handshake holds no room under the session caps.
"""
# pyright: reportPrivateUsage=false

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from starlette.requests import Request
from starlette.types import Message, Receive, Scope, Send

from agentfx.mcp import _http, http_app
from agentfx.mcp._http import HttpApp
from tests.http_support import LIST, open_session, post, sdk_client, serving
from tests.mcp_app import ADMIN, GUEST, User, app
from tests.mcp_wire import INITIALIZE

pytestmark = pytest.mark.anyio

TOKENS = {"ann": ADMIN, "gus": GUEST}
NOT_FOUND = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": "Session not found"}}

# Each an ``initialize`` the SDK refuses, and how it answers it.
REFUSED: list[tuple[dict[str, Any], int]] = [
    (dict(INITIALIZE, params={"protocolVersion": "2025-11-25"}), 200),  # no capabilities, no clientInfo
    (dict(INITIALIZE, params={**INITIALIZE["params"], "protocolVersion": 5}), 200),
    ({"jsonrpc": "2.0", "id": 0, "method": "initialize"}, 200),  # no params at all
    ({"jsonrpc": "2.0", "method": "initialize", "params": INITIALIZE["params"]}, 400),  # sent as a notification
]


def authenticate(request: Request) -> User | None:
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@pytest.fixture
def served() -> Iterator[tuple[str, HttpApp[User]]]:
    asgi = http_app(app, authenticate=authenticate)
    with serving(lambda _url: asgi) as url:
        yield url, asgi


@pytest.mark.parametrize(("refused", "answered"), REFUSED)
async def test_a_refused_initialize_names_no_session(
    served: tuple[str, HttpApp[User]], refused: dict[str, Any], answered: int
) -> None:
    url, asgi = served
    async with httpx.AsyncClient(timeout=10) as http:
        status, answer, response = await post(http, url, refused, token="ann")
        assert status == answered and "mcp-session-id" not in response.headers
        assert answer["error"]["code"] == (types.INVALID_PARAMS if answered == 200 else types.INVALID_REQUEST)
        assert asgi.session_count == 0
        # An accepted one still names its session, which serves.
        session = await open_session(http, url, "ann")
        status, answer, _ = await post(http, url, LIST, token="ann", session=session)
        assert status == 200 and answer["result"]["tools"]


async def test_refused_initializes_hold_no_room_under_the_session_caps(
    served: tuple[str, HttpApp[User]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asgi = served
    monkeypatch.setattr(_http, "MAX_SESSIONS_PER_PRINCIPAL", 2)
    monkeypatch.setattr(_http, "MAX_SESSIONS", 3)
    async with httpx.AsyncClient(timeout=10) as http:
        await refuse_every_kind(http, url, asgi, times=3)
        assert asgi.session_count == 0
        await open_session(http, url, "ann")
        await open_session(http, url, "ann")
        status, answer, _ = await post(http, url, INITIALIZE, token="ann")
        assert (status, answer["error"]["message"]) == (503, "Too many open sessions for this principal")
        await open_session(http, url, "gus")
        status, answer, _ = await post(http, url, INITIALIZE, token="gus")
        assert (status, answer["error"]["message"]) == (503, "Too many open sessions")
        assert asgi.session_count == 3


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's client over HTTP, as in test_mcp_http.py
async def test_after_refused_initializes_the_sdk_client_has_the_one_room_left(
    served: tuple[str, HttpApp[User]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, asgi = served
    monkeypatch.setattr(_http, "MAX_SESSIONS", 1)
    async with httpx.AsyncClient(timeout=10) as http:
        await refuse_every_kind(http, url, asgi, times=2)
        assert asgi.session_count == 0
        async with sdk_client(url, "gus", mode="legacy") as client:
            assert (await client.list_tools()).tools
            assert asgi.session_count == 1


async def refuse_every_kind(http: httpx.AsyncClient, url: str, asgi: HttpApp[Any], *, times: int) -> None:
    for _ in range(times):
        for refused, answered in REFUSED:
            for token in ("ann", "gus"):
                status, _, response = await post(http, url, refused, token=token)
                # Its room is free by the time the client has the answer.
                assert status == answered and "mcp-session-id" not in response.headers
                assert asgi.session_count == 0


# --- the session being opened, seen while its handshake is answered ---------------------------


class Probe:
    """``http_app(app)`` in-process, recording the id of each session it makes, and asking what a request naming one gets."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asgi = http_app(app)
        self.made: list[str] = []
        self.answers: list[tuple[int, Any] | None] = []
        # Sessions open as each marked response started.
        self.open: list[int] = []
        made = uuid.uuid4

        def recorded() -> uuid.UUID:
            value = made()
            self.made.append(value.hex)
            return value

        monkeypatch.setattr(_http, "uuid", SimpleNamespace(uuid4=recorded))

    async def ask(self) -> None:
        """Send ``tools/list`` naming the last session made, and record its answer (``None`` when none came)."""
        answer: tuple[int, Any] | None = None
        with anyio.move_on_after(3):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.asgi)) as http:
                status, body, _ = await post(http, URL, LIST, session=self.made[-1])
                answer = (status, body)
        self.answers.append(answer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app, asking as the response to a request marked ``x-probe`` starts."""
        if scope["type"] != "http" or (b"x-probe", b"1") not in scope["headers"]:
            await self.asgi(scope, receive, send)
            return

        async def asking(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.open.append(self.asgi.session_count)
                await self.ask()
            await send(message)

        await self.asgi(scope, receive, asking)


URL = "http://127.0.0.1/mcp"


@asynccontextmanager
async def probed(probe: Probe) -> AsyncGenerator[httpx.AsyncClient]:
    async with probe.asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=probe)) as http:
        yield http


@pytest.mark.parametrize(("refused", "answered"), REFUSED)
async def test_as_a_refused_initialize_is_answered_its_session_is_unknown(
    refused: dict[str, Any], answered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe = Probe(monkeypatch)
    async with probed(probe) as http:
        status, _, response = await post(http, URL, refused, **{"x-probe": "1"})
        assert status == answered and "mcp-session-id" not in response.headers
        assert probe.answers == [(404, NOT_FOUND)]
        # Its room was free before the client could hear of the refusal.
        assert probe.open == [0]


@pytest.mark.parametrize(("sent", "answered"), [*REFUSED, (INITIALIZE, 200)])
async def test_a_session_is_unknown_until_its_handshake_has_been_answered(
    sent: dict[str, Any], answered: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asked at the last moment before the answer leaves: the session is in
    # the table, its handshake answered or refused, and the client told nothing.
    probe = Probe(monkeypatch)
    release = _http._Handshake.release

    async def asking_first(handshake: _http._Handshake) -> None:
        await probe.ask()
        await release(handshake)

    monkeypatch.setattr(_http._Handshake, "release", asking_first)
    async with probed(probe) as http:
        status, _, response = await post(http, URL, sent)
        assert status == answered
        assert probe.answers[0] == (404, NOT_FOUND)
        if sent is INITIALIZE:
            session = response.headers["mcp-session-id"]
            assert session == probe.made[-1]
            status, answer, _ = await post(http, URL, LIST, session=session)
            assert status == 200 and answer["result"]["tools"]
        else:
            assert "mcp-session-id" not in response.headers


async def test_an_accepted_initialize_names_a_session_already_served(monkeypatch: pytest.MonkeyPatch) -> None:
    probe = Probe(monkeypatch)
    async with probed(probe) as http:
        status, answer, response = await post(http, URL, INITIALIZE, **{"x-probe": "1"})
        assert status == 200 and answer["result"]["protocolVersion"] == "2025-11-25"
        assert response.headers["mcp-session-id"] == probe.made[-1]
        # Its answer is known before the client can learn its id: a request sent at once is served.
        answered = probe.answers[0]
        assert answered is not None and answered[0] == 200 and answered[1]["result"]["tools"]
