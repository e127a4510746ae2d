"""Request ids in a 2025-11-25 session, and bodies over the size limit, on the Streamable HTTP endpoint.

The SDK's session transport keys each request's response stream by the
``str()`` of its id, its dispatcher keeps requests by the id coerced
(``"05"`` is ``5``), and it keeps one key of the first kind for the
session's GET stream: a request under an id already in flight by either
(``5`` then ``"5"`` or ``"05"``, or ``5`` twice), or under that key, is refused ``-32600`` and dispatches
nothing, and the request it would have displaced is still answered. An id
is free again once its request has ended, however it ended. A body over the
limit is refused 413 in JSON-RPC, as every other refusal of the endpoint is.

Clients on asyncio and on trio. Mostly served in-process: short exchanges
through httpx's ASGI transport, and those that must stay open (a call in
flight, the GET stream, a client that leaves mid-call) driven straight
through the ASGI app. What only a real server shows (when an exchange ends
for its client, a chunked body) is served by uvicorn on loopback.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.server.streamable_http import GET_STREAM_KEY, REQUEST_CANCELLED
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from agentfx.mcp import http_app
from agentfx.mcp._http import HttpApp
from agentfx.program import Program
from tests.http_support import JSON_AND_SSE, LIST, MODERN, exchange, modern, open_session, post, serving
from tests.mcp_app import Added, Finished, Model, Selected, app
from tests.mcp_wire import call

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1/mcp"
IN_FLIGHT = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": types.INVALID_REQUEST, "message": "Invalid Request: a request with this id is in flight"},
}
RESERVED = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": types.INVALID_REQUEST, "message": "Invalid Request: this id is reserved"},
}
TOO_LARGE = {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": "Request body too large"}}


def ping(request_id: int | str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


@dataclass
class Served:
    asgi: HttpApp[None]
    http: httpx.AsyncClient
    program: Program[Model, Any]
    session: str

    async def post(self, body: object) -> tuple[int, Any]:
        status, answer, _ = await post(self.http, URL, body, session=self.session)
        return status, answer

    async def waiting(self) -> None:
        """Until the ``wait`` call in flight has dispatched (and waits for ``Finished``)."""
        with anyio.fail_after(1):
            while not self.program.model.waiting:
                await anyio.sleep(0.005)


@asynccontextmanager
async def served() -> AsyncGenerator[Served]:
    """The test app over HTTP in-process, with one 2025-11-25 session open; the test drives its program."""
    async with app.program() as program:
        runtime = app.bind(program)
        asgi = http_app(lambda _principal: nullcontext(runtime))
        async with asgi.running(), httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi)) as http:
            yield Served(asgi, http, program, await open_session(http, URL))


# --- an id in flight --------------------------------------------------------------------------


# "05" is the SDK's id 5 too (it correlates ids by coerce_request_id): its
# dispatcher would keep one of the two, and a cancellation of either reach it.
@pytest.mark.parametrize("second", ["5", 5, "05"], ids=["string", "integer", "leading zero"])
async def test_a_request_under_an_id_in_flight_is_refused_and_the_first_is_still_answered(second: str | int) -> None:
    async with served() as s:
        async with exchange(s.asgi, s.session, call(5, "wait", {})) as first:
            await s.waiting()
            assert await s.post(call(0, "add", {"title": "x"}) | {"id": second}) == (400, IN_FLIGHT)
            assert s.program.model.items == (), "the refused request dispatched nothing"
            await s.program.send(Finished())
            answer = await first.answered()
        assert answer["id"] == 5 and answer["result"]["content"][0]["text"].startswith("Completed"), answer
        # Answered, the id is free again, in either spelling.
        assert await s.post(ping(second)) == (200, {"jsonrpc": "2.0", "id": second, "result": {}})
        assert await s.post(ping(5)) == (200, {"jsonrpc": "2.0", "id": 5, "result": {}})


async def test_an_id_is_free_again_once_its_request_was_cancelled() -> None:
    async with served() as s:
        async with exchange(s.asgi, s.session, call(7, "wait", {})) as first:
            await s.waiting()
            assert await s.post(ping("7")) == (400, IN_FLIGHT)
            cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
            assert (await s.post(cancelled))[0] == 202
            answer = await first.answered()
        assert answer["id"] == 7 and answer["error"]["code"] == REQUEST_CANCELLED, answer
        assert await s.post(ping(7)) == (200, {"jsonrpc": "2.0", "id": 7, "result": {}})
        assert await s.post(ping("7")) == (200, {"jsonrpc": "2.0", "id": "7", "result": {}})


async def test_an_id_is_free_again_once_its_client_left_mid_call() -> None:
    async with served() as s:
        async with exchange(s.asgi, s.session, call(8, "wait", {})) as first:
            await s.waiting()
            assert await s.post(ping(8)) == (400, IN_FLIGHT)
            first.leave.set()
        # The call is cancelled as the client left; until it has ended, its id is still its own.
        with anyio.fail_after(1.5):
            while (answer := await s.post(ping(8))) != (200, {"jsonrpc": "2.0", "id": 8, "result": {}}):
                assert answer == (400, IN_FLIGHT), answer
                await anyio.sleep(0.01)
        assert not s.program.model.items and s.asgi.session_count == 1


async def test_a_refused_request_holds_no_id() -> None:
    async with served() as s:
        async with exchange(s.asgi, s.session, call(9, "wait", {})) as first:
            await s.waiting()
            for _ in range(3):
                assert await s.post(ping(9)) == (400, IN_FLIGHT)
            await s.program.send(Finished())
            await first.answered()
        # Refused three times over, the id is free once its request was answered.
        assert await s.post(ping(9)) == (200, {"jsonrpc": "2.0", "id": 9, "result": {}})
        # So is one the transport refused before dispatching it.
        status, answer, _ = await post(s.http, URL, ping(10), session=s.session, Accept="application/json")
        assert status == 406, answer
        assert await s.post(ping(10)) == (200, {"jsonrpc": "2.0", "id": 10, "result": {}})


async def test_over_a_real_connection_an_id_is_free_as_soon_as_its_answer_is_read() -> None:
    # uvicorn ends an exchange for its client once the response's last part
    # is sent, before the app's handling of it has returned: a client reusing
    # the id at once, on the same connection, is served.
    with serving(lambda _url: http_app(app)) as url:
        async with httpx.AsyncClient() as http:
            session = await open_session(http, url)
            headers = {**JSON_AND_SSE, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
            context = {"jsonrpc": "2.0", "id": "context", "method": "resources/read", "params": {"uri": "app://context"}}
            first: list[dict[str, Any]] = []

            async def calling() -> None:
                body = json.dumps(call(5, "wait", {})).encode()
                async with http.stream("POST", url, content=body, headers=headers) as response:
                    assert response.status_code == 200
                    async for line in response.aiter_lines():
                        if line.startswith("data:") and line[5:].strip():
                            first.append(json.loads(line[5:]))

            async def sent(body: object) -> tuple[int, Any]:
                status, answer, _ = await post(http, url, body, session=session)
                return status, answer

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(calling)
                with anyio.fail_after(1):
                    while not json.loads((await sent(context))[1]["result"]["contents"][0]["text"])["waiting"]:
                        await anyio.sleep(0.005)
                assert await sent(ping(5)) == (400, IN_FLIGHT)
                cancelled = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
                assert (await sent(cancelled))[0] == 202
            assert first[-1]["id"] == 5 and first[-1]["error"]["code"] == REQUEST_CANCELLED, first
            for _ in range(6):
                assert await sent(ping(5)) == (200, {"jsonrpc": "2.0", "id": 5, "result": {}})
                assert (await sent(call(5, "add", 7)))[1]["error"]["code"] == types.INVALID_PARAMS


# --- the GET stream's key ------------------------------------------------------------------------


async def test_the_get_streams_key_as_a_request_id_is_refused_and_the_stream_still_hears_changes() -> None:
    async with served() as s:
        status, listed = await s.post(LIST)
        assert status == 200 and "clear" not in [tool["name"] for tool in listed["result"]["tools"]]
        async with exchange(s.asgi, s.session) as stream:
            assert await s.post(ping(GET_STREAM_KEY)) == (400, RESERVED)
            # The Model changes so that ``clear`` is available: the session's open stream hears of it.
            await s.program.send(Added("a"))
            await s.program.send(Selected("a"))
            with anyio.fail_after(1.5):
                while not any(m.get("method") == "notifications/tools/list_changed" for m in stream.messages):
                    await anyio.sleep(0.01)
        assert await s.post(ping(6)) == (200, {"jsonrpc": "2.0", "id": 6, "result": {}})


# --- bodies over the limit -----------------------------------------------------------------------


async def chunked_post(url: str, headers: dict[str, str], size: int) -> tuple[int, dict[str, str], bytes]:
    """A POST of ``size`` bytes in chunks (no ``Content-Length``, no last chunk) over a real connection.

    Its status, headers and body. Every byte sent is one the limit reads
    before it refuses, so the server closes the connection cleanly after its answer.
    """
    host, port = url.removeprefix("http://").split("/", 1)[0].split(":")
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(
            f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n{head}\r\n".encode()
        )
        left = size
        while left:
            chunk = b" " * min(left, 65536)
            await sock.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            left -= len(chunk)
        received = b""
        with anyio.fail_after(1):
            try:
                while True:
                    received += await sock.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
    response, _, body = received.partition(b"\r\n\r\n")
    status, *lines = response.decode().split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines)
    return int(status.split()[1]), {name.lower(): value for name, value in fields.items()}, body


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
MODERN_CALL = {"Mcp-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "add"}


async def test_a_body_declared_over_the_limit_is_413_in_json_rpc_in_both_eras() -> None:
    huge = json.dumps(call(1, "add", {"title": "x" * (DEFAULT_MAX_REQUEST_BODY_SIZE + 1)})).encode()
    async with served() as s:
        in_session = {"Mcp-Session-Id": s.session, "Mcp-Protocol-Version": "2025-11-25"}
        for extra in ({}, in_session, MODERN_CALL):
            response = await s.http.post(URL, content=huge, headers=HEADERS | extra)
            assert response.request.headers["content-length"] == str(len(huge))
            assert (response.status_code, response.headers.get("content-type")) == (413, "application/json"), extra
            assert response.json() == TOO_LARGE, extra
        # Nothing was dispatched, and the endpoint serves on.
        assert s.program.model.items == ()
        status, answer, _ = await post(s.http, URL, modern("tools/list"), version=MODERN)
        assert status == 200 and "tools" in answer["result"]


async def test_a_chunked_body_over_the_limit_is_413_in_json_rpc_in_both_eras() -> None:
    with serving(lambda _url: http_app(app)) as url:
        async with httpx.AsyncClient() as http:
            in_session = {"Mcp-Session-Id": await open_session(http, url), "Mcp-Protocol-Version": "2025-11-25"}
        for extra in ({}, in_session, MODERN_CALL):
            status, fields, body = await chunked_post(url, HEADERS | extra, DEFAULT_MAX_REQUEST_BODY_SIZE + 1)
            assert (status, fields.get("content-type")) == (413, "application/json"), extra
            assert json.loads(body) == TOO_LARGE, extra
        async with httpx.AsyncClient() as http:
            status, answer, _ = await post(http, url, modern("tools/list"), version=MODERN)
            assert status == 200 and "tools" in answer["result"]
