"""The Streamable HTTP endpoint under bursts, hostile input, hung hooks and clients that leave.

Each test is a probe that broke the endpoint once (the session cap raced, a
foreign ``Host`` was served, validator text reached clients, deep JSON was a
500, a hung ``authenticate`` held its task forever, a call ran on after its
client was gone, an abandoned body logged a traceback) and now holds, in both
MCP eras where the probe applies. Loops are small and bounded.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from starlette.requests import Request

from agentfx.mcp import http_app
from agentfx.runtime import AgentRuntime
from tests.http_support import JSON_AND_SSE, LIST, MODERN, LockedAudit, modern, open_session, post, serving
from tests.mcp_app import ADMIN, Model, User, app
from tests.mcp_wire import INITIALIZE, call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "http://127.0.0.1/mcp"
TOKENS = {"ann": ADMIN, "bea": User("bea")}


def authenticate(request: Request) -> User | None:
    return TOKENS.get(request.headers.get("authorization", "").removeprefix("Bearer "))


@dataclass
class Audited(LockedAudit):
    """``make_runtime`` that keeps every audit record (the server runs in another thread)."""

    url: str = ""

    @asynccontextmanager
    async def make(self, principal: User) -> AsyncGenerator[AgentRuntime[Model, User]]:
        async with app.run(principal=principal, audit=self) as runtime:
            yield runtime


@pytest.fixture
def audited() -> Iterator[Audited]:
    runtimes = Audited()
    with serving(lambda _url: http_app(runtimes.make, authenticate=authenticate)) as url:
        runtimes.url = url
        yield runtimes


@asynccontextmanager
async def in_process(asgi: Any) -> AsyncGenerator[httpx.AsyncClient]:
    async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        yield http


# --- 1. the session cap ---------------------------------------------------------------


async def test_concurrent_openings_never_pass_the_session_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._http.MAX_SESSIONS", 8)
    asgi = http_app(app)
    statuses: list[int] = []
    async with in_process(asgi) as http:

        async def open_one() -> None:
            statuses.append((await post(http, LOCAL, INITIALIZE))[0])

        async with anyio.create_task_group() as task_group:
            for _ in range(40):
                task_group.start_soon(open_one)
        assert sorted(statuses) == [200] * 8 + [503] * 32
        assert asgi.session_count == 8


async def test_one_principal_cannot_take_every_session_from_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._http.MAX_SESSIONS_PER_PRINCIPAL", 3)
    asgi = http_app(app, authenticate=authenticate)
    async with in_process(asgi) as http:
        held = [(await post(http, LOCAL, INITIALIZE, token="ann"))[2].headers["mcp-session-id"] for _ in range(3)]
        status, answer, _ = await post(http, LOCAL, INITIALIZE, token="ann")
        assert (status, answer["error"]["message"]) == (503, "Too many open sessions for this principal")
        # Another principal still gets a session; the first gets one back once it closes one.
        assert (await post(http, LOCAL, INITIALIZE, token="bea"))[0] == 200
        closed = await http.delete(LOCAL, headers={"Authorization": "Bearer ann", "Mcp-Session-Id": held[0]})
        assert closed.status_code == 200
        assert (await post(http, LOCAL, INITIALIZE, token="ann"))[0] == 200
        assert asgi.session_count == 4


async def test_an_app_that_proves_no_principal_is_bounded_by_the_session_cap_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("agentfx.mcp._http.MAX_SESSIONS_PER_PRINCIPAL", 2)
    asgi = http_app(app)
    async with in_process(asgi) as http:
        assert [(await post(http, LOCAL, INITIALIZE))[0] for _ in range(4)] == [200] * 4


async def test_an_idle_session_keeps_none_of_its_last_requests_bytes() -> None:
    # The dispatcher holds the last message a session read until the next
    # one; with it came the HTTP request and the raw body it cached.
    import gc
    import tracemalloc

    padding = 1024 * 1024
    body = json.dumps(INITIALIZE).encode()[:-1] + b" " * padding + b"}"
    asgi = http_app(app)
    async with in_process(asgi) as http:
        assert (await post(http, LOCAL, INITIALIZE))[0] == 200  # warm: what any first session builds
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(4):
                assert (await post(http, LOCAL, body))[0] == 200
            gc.collect()
            kept = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert asgi.session_count == 5
        # Four idle sessions: each keeps far less than the megabyte its request carried.
        assert kept < padding, kept


# --- 2. DNS rebinding -----------------------------------------------------------------


async def test_a_foreign_host_is_refused_421_in_both_eras_and_allowed_hosts_name_the_others() -> None:
    runtimes = Audited()
    async with in_process(http_app(runtimes.make, authenticate=authenticate)) as http:
        adding = call(1, "add", {"title": "x"})
        for body, version in ((INITIALIZE, None), (modern("tools/call", adding["params"]), MODERN)):
            status, answer, _ = await post(http, LOCAL, body, token="ann", version=version, Host="evil.example")
            assert (status, answer["error"]["message"]) == (421, "Misdirected Request: Host not allowed")
        for host in ("localhost:8000", "127.0.0.1", "[::1]:9"):
            status, _, _ = await post(http, LOCAL, modern("tools/list"), token="ann", version=MODERN, Host=host)
            assert status == 200, host
    assert runtimes.outcomes() == [], "nothing was dispatched"

    named = http_app(app, allowed_hosts=["mcp.example", "agents.example:*"])
    async with in_process(named) as http:
        for host, expected in (("mcp.example", 200), ("agents.example:8443", 200), ("127.0.0.1", 421)):
            status, _, _ = await post(http, LOCAL, modern("tools/list"), version=MODERN, Host=host)
            assert status == expected, host


async def test_a_refused_host_or_origin_is_never_quoted_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    # The SDK's check logs a refused Host or Origin header as it came: 12 KB
    # per request here, and a line a client chose. Its loggers say only their
    # name and level; agentfx's own and the SDK's client side keep their words.
    host, origin = "h" * 12_000 + ".example", "http://o" + "o" * 12_000 + ".example"
    with caplog.at_level(logging.DEBUG, logger="mcp"):
        async with in_process(http_app(app)) as http:
            status, _, _ = await post(http, LOCAL, modern("tools/list"), version=MODERN, Host=host)
            assert status == 421
            status, _, _ = await post(http, LOCAL, modern("tools/list"), version=MODERN, Origin=origin)
            assert status == 403
    sdk = [record for record in caplog.records if record.name.startswith("mcp.")]
    assert sdk, "the SDK logged the refusals"
    for record in sdk:
        assert record.getMessage() == f"{record.name} logged at {record.levelname}; its text is withheld"
    assert "hhhh" not in caplog.text and "oooo" not in caplog.text
    assert not logging.getLogger("mcp.client").filters
    assert not logging.getLogger("agentfx.mcp").filters


async def test_agentfx_serve_on_a_public_address_accepts_only_the_hosts_it_names() -> None:
    command = [
        sys.executable, "-m", "agentfx", "serve", "tests.mcp_app:app", "--transport", "http",
        "--host", "0.0.0.0", "--port", "0", "--allowed-host", "mcp.example",
    ]  # fmt: skip
    async with await anyio.open_process(command, cwd=ROOT) as process:
        try:
            assert process.stderr is not None
            stderr = BufferedByteReceiveStream(process.stderr)
            with anyio.fail_after(20):
                while not (line := (await stderr.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    pass
            url = line.rsplit(" ", 1)[-1].replace("0.0.0.0", "127.0.0.1")
            async with httpx.AsyncClient() as http:
                for host, expected in (("mcp.example", 200), ("127.0.0.1", 200), ("evil.example", 421)):
                    status, _, _ = await post(http, url, INITIALIZE, Host=host)
                    assert status == expected, host
        finally:
            process.terminate()
            with anyio.fail_after(10):
                await process.wait()


# --- 3 and 4. envelopes in agentfx's own words; deep JSON --------------------------------

MALFORMED: list[bytes] = [
    b'{"jsonrpc": "2.0"}',
    b'{"id": 1, "method": "tools/list"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
    b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]}',
    b"[1, 2, 3]",
    b'"just a string"',
]
UNREADABLE: list[bytes] = [b"{not json", b"[" * 1000 + b"]" * 1000, b'{"a": ' * 600 + b"1" + b"}" * 600, b"\xff\xfe"]


def said_nothing_internal(text: str) -> bool:
    lowered = text.lower()
    return not any(word in lowered for word in ("validation", "pydantic", "input_value", "recursion", "traceback"))


async def test_every_envelope_error_is_the_endpoints_own_short_message_in_both_eras(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtimes = Audited()
    async with in_process(http_app(runtimes.make, authenticate=authenticate)) as http:
        session = await open_session(http, LOCAL, "ann")
        for where in ({}, {"session": session}, {"version": MODERN}):
            for body in MALFORMED:
                status, answer, response = await post(http, LOCAL, body, token="ann", **where)
                assert status == 400, (where, body)
                assert answer["error"] in (
                    {"code": types.INVALID_REQUEST, "message": "Invalid Request"},
                    # The 2026 entry's own wording for a body that is not one request.
                    {"code": types.INVALID_REQUEST, "message": "Body must be a single JSON-RPC request or notification object"},
                ), (where, body, answer)
                assert said_nothing_internal(response.text)
            with caplog.at_level(logging.ERROR):
                for body in UNREADABLE:
                    status, answer, response = await post(http, LOCAL, body, token="ann", **where)
                    assert (status, answer["error"]) == (400, {"code": types.PARSE_ERROR, "message": "Parse error"})
                    assert said_nothing_internal(response.text)
        status, answer, _ = await post(http, LOCAL, call(2, "add", {"title": "ok"}), token="ann", session=session)
        assert status == 200 and answer["result"]["content"][0]["text"] == "Dispatched Added"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "nothing was an error of the server's"
    assert runtimes.outcomes() == [("add", "dispatched", "dispatched")]


async def test_a_body_that_is_not_json_by_its_type_is_refused_in_the_endpoints_words() -> None:
    async with in_process(http_app(app)) as http:
        for version in (None, MODERN):
            body = modern("tools/list") if version else INITIALIZE
            status, answer, _ = await post(http, LOCAL, body, version=version, **{"Content-Type": "text/plain"})
            assert (status, answer["error"]["message"]) == (400, "Bad Request: Content-Type must be application/json")


async def test_a_body_over_the_limit_is_413_in_both_eras() -> None:
    huge = call(1, "add", {"title": "x" * 5_000_000})
    async with in_process(http_app(app)) as http:
        session = await open_session(http, LOCAL)
        for where in ({}, {"session": session}, {"version": MODERN}):
            status, _, _ = await post(http, LOCAL, huge, **where)
            assert status == 413, where


async def test_an_invalid_request_keeps_its_id_when_it_has_one() -> None:
    async with in_process(http_app(app)) as http:
        status, answer, _ = await post(http, LOCAL, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 3})
        assert (status, answer["id"], answer["error"]["message"]) == (400, 7, "Invalid Request")


# --- 11. ids that are neither strings nor integers -----------------------------------------

BAD_IDS: list[object] = [{"a": 1}, True, 1.5, None, [1]]


async def test_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request_in_both_eras() -> None:
    # The SDK's parser reads such a request as a notification: accepted (202),
    # never answered, and the client waits forever.
    runtimes = Audited()
    asgi = http_app(runtimes.make, authenticate=authenticate)
    invalid = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": "Invalid Request"}}
    async with in_process(asgi) as http:
        session = await open_session(http, LOCAL, "ann")
        adding = call(1, "add", {"title": "x"})
        for where, body in (
            ({"session": session}, adding),
            ({"session": session}, LIST),
            ({"version": MODERN}, modern("tools/call", adding["params"])),
            ({}, INITIALIZE),
            ({"version": MODERN}, modern("server/discover")),
        ):
            for bad in BAD_IDS:
                status, answer, _ = await post(http, LOCAL, {**body, "id": bad}, token="ann", **where)
                assert (status, answer) == (400, invalid), (where, body["method"], bad)
        # An initialize among them opened nothing: the one session, and bea
        # (seen only through it) never had a runtime made.
        assert (asgi.session_count, asgi.principal_count) == (1, 1)
        status, answer, _ = await post(http, LOCAL, {**INITIALIZE, "id": {"a": 1}}, token="bea")
        assert (status, answer) == (400, invalid)
        assert (asgi.session_count, asgi.principal_count) == (1, 1)
    assert runtimes.outcomes() == [], "nothing was dispatched"


# --- 5. authenticate that never returns --------------------------------------------------


async def test_a_hung_authenticate_is_answered_503_after_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.mcp._http.AUTHENTICATE_TIMEOUT", 0.1)

    async def hang(_request: Request) -> User | None:
        await anyio.sleep_forever()
        raise AssertionError

    async with in_process(http_app(app, authenticate=hang)) as http:
        for body, version in ((INITIALIZE, None), (modern("tools/list"), MODERN)):
            status, answer, response = await post(http, LOCAL, body, version=version)
            assert (status, answer["error"]["message"]) == (503, "Service Unavailable: authentication timed out")
            assert response.headers["retry-after"] == "1"


async def test_clients_that_leave_release_their_hung_authentication() -> None:
    active = 0
    entered = threading.Event()

    async def hang(_request: Request) -> User | None:
        nonlocal active
        active += 1
        entered.set()
        try:
            await anyio.sleep_forever()
        finally:
            active -= 1
        raise AssertionError

    with serving(lambda _url: http_app(app, authenticate=hang)) as url:
        async with httpx.AsyncClient(timeout=httpx.Timeout(0.3)) as http:

            async def give_up() -> None:
                with pytest.raises(httpx.TimeoutException):
                    await post(http, url, INITIALIZE)

            async with anyio.create_task_group() as task_group:
                for _ in range(20):
                    task_group.start_soon(give_up)
        assert entered.is_set()
        with anyio.fail_after(5):
            while active:
                await anyio.sleep(0.02)


# --- 6. a client whose connection drops mid-call -------------------------------------------


async def leave_mid_call(http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]) -> None:
    """POST ``body``, wait until its answer has begun streaming, then drop the connection."""
    async with http.stream("POST", url, content=json.dumps(body).encode(), headers={**JSON_AND_SSE, **headers}) as r:
        assert r.status_code == 200


async def test_a_call_whose_client_left_is_cancelled_and_audited_in_both_eras(audited: Audited) -> None:
    url = audited.url
    async with httpx.AsyncClient() as http:
        session = await open_session(http, url, "ann")
        headers = {"Authorization": "Bearer ann", "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
        await leave_mid_call(http, url, call(1, "wait", {}), headers)
        with anyio.fail_after(5):
            while ("wait", "dispatched", "AgentCancelledError") not in audited.outcomes():
                await anyio.sleep(0.02)

        # The 2026 entry holds its answer back (no headers yet) while the call
        # is silent, so the client leaves once its Model (bea's own) says it waits.
        waiting = modern("tools/call", {"name": "wait", "arguments": {}}, request_id=2)
        context = modern("resources/read", {"uri": "app://context"}, request_id=3)

        async def call_and_wait() -> None:
            await post(http, url, waiting, token="bea", version=MODERN)

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(call_and_wait)
            with anyio.fail_after(5):
                while True:
                    _, answer, _ = await post(http, url, context, token="bea", version=MODERN)
                    if json.loads(answer["result"]["contents"][0]["text"])["waiting"]:
                        break
                    await anyio.sleep(0.02)
            task_group.cancel_scope.cancel()
        with anyio.fail_after(5):
            while audited.outcomes().count(("wait", "dispatched", "AgentCancelledError")) < 2:
                await anyio.sleep(0.02)
        # The session is still served afterwards.
        status, answer, _ = await post(http, url, LIST, token="ann", session=session)
        assert status == 200 and "tools" in answer["result"]


# --- 7. abandoned bodies ------------------------------------------------------------------


async def test_an_abandoned_body_is_one_log_line_not_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO), serving(lambda _url: http_app(app)) as url:
        port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
        with socket.create_connection(("127.0.0.1", port)) as sock:
            head = (
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
            )
            sock.sendall(head.encode() + b'{"jsonrpc": "2.0", ')
        with anyio.fail_after(5):
            while not any("left before sending" in r.getMessage() for r in caplog.records):
                await anyio.sleep(0.02)
        async with httpx.AsyncClient() as http:
            status, _, _ = await post(http, url, INITIALIZE)
            assert status == 200, "still serving"
    lines = [r for r in caplog.records if "left before sending" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None
    assert not [r for r in caplog.records if r.exc_info is not None], "no traceback"
    assert not [r for r in caplog.records if "ClientDisconnect" in r.getMessage()]


# --- shutdown -------------------------------------------------------------------------


SHUTTING_DOWN = {"code": types.CONNECTION_CLOSED, "message": "Server shutting down: the request was cancelled"}


async def waiting_until(http: httpx.AsyncClient, seen: int = 1) -> None:
    """Until ann's Model says a ``wait`` call is pending (her own runtime, read sessionless)."""
    context = modern("resources/read", {"uri": "app://context"}, request_id=99)
    with anyio.fail_after(5):
        while True:
            _, answer, _ = await post(http, LOCAL, context, token="ann", version=MODERN)
            if json.loads(answer["result"]["contents"][0]["text"])["waiting"]:
                return
            await anyio.sleep(0.02)


@pytest.mark.parametrize("progress", [False, True], ids=["silent", "streaming"])
async def test_shutting_down_answers_sessionless_calls_in_flight_and_audits_them(
    progress: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Silent, the 2026 entry holds its answer back (no headers yet); with a
    # progress token its progress has committed an event stream.
    runtimes = Audited()
    asgi = http_app(runtimes.make, authenticate=authenticate)
    waiting = modern("tools/call", {"name": "wait", "arguments": {}}, request_id=7)
    if progress:
        waiting["params"]["_meta"]["progressToken"] = "p"
    answered: list[tuple[int, Any, str]] = []
    streaming = anyio.Event()

    async def watching(scope: Any, receive: Any, send: Any) -> None:
        async def watched(message: Any) -> None:
            if message["type"] == "http.response.start" and (b"content-type", b"text/event-stream") in message["headers"]:
                streaming.set()
            await send(message)

        await asgi(scope, receive, watched)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=watching)) as http:
        async with anyio.create_task_group() as task_group:
            async with asgi.running():

                async def call_and_wait() -> None:
                    # The ASGI server (here httpx's transport) runs the request;
                    # leaving running() must still answer it.
                    status, answer, response = await post(http, LOCAL, waiting, token="ann", version=MODERN)
                    answered.append((status, answer, response.headers["content-type"]))

                task_group.start_soon(call_and_wait)
                await waiting_until(http)
                if progress:
                    with anyio.fail_after(5):
                        await streaming.wait()
            assert asgi.principal_count == 0
    assert runtimes.outcomes() == [("wait", "dispatched", "AgentCancelledError")]
    [(status, answer, content_type)] = answered
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": SHUTTING_DOWN}
    if progress:
        assert (status, content_type) == (200, "text/event-stream")
    else:
        assert (status, content_type) == (503, "application/json")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_shutting_down_answers_session_calls_in_flight_and_audits_them(caplog: pytest.LogCaptureFixture) -> None:
    runtimes = Audited()
    asgi = http_app(runtimes.make, authenticate=authenticate)
    answered: list[tuple[int, Any]] = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
        async with anyio.create_task_group() as task_group:
            async with asgi.running():
                session = await open_session(http, LOCAL, "ann")

                async def call_and_wait(request_id: int) -> None:
                    status, answer, _ = await post(http, LOCAL, call(request_id, "wait", {}), token="ann", session=session)
                    answered.append((status, answer))

                for request_id in (1, 2):
                    task_group.start_soon(call_and_wait, request_id)
                await waiting_until(http)
                await anyio.sleep(0.05)  # the second call is in flight too
            assert (asgi.session_count, asgi.principal_count) == (0, 0)
    assert runtimes.outcomes() == [("wait", "dispatched", "AgentCancelledError")] * 2
    assert sorted(answered, key=lambda a: a[1]["id"]) == [
        (200, {"jsonrpc": "2.0", "id": 1, "error": SHUTTING_DOWN}),
        (200, {"jsonrpc": "2.0", "id": 2, "error": SHUTTING_DOWN}),
    ]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
