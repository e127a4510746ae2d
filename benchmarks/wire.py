"""One MCP client for every served contender: server processes, stdio and Streamable HTTP calls.

The client is deliberately thin, so the figures are the servers' and it costs
every contender the same: each request is one JSON-RPC line (stdio) or one
POST (HTTP, through ``httpx`` with keep-alive connections), and each answer is
parsed with ``json`` and checked to be the tool's success. It speaks the
session-based (2025-11-25) protocol: ``initialize``, ``notifications/initialized``,
then ``tools/call`` (and, for sessions that listen, ``tools/list`` and a GET
stream held open).

A server runs in its own process (see :mod:`benchmarks.served`); its stderr
is drained all along (a full pipe would stall it) and kept for the error
message should it stop. This module deliberately knows nothing of timing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
from anyio.abc import Process, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream

from .app import dispatched

__all__ = [
    "CONTENDERS",
    "PROTOCOL",
    "HttpClient",
    "ServerProcess",
    "StdioClient",
    "command",
    "cpu_ns",
    "open_sessions",
    "rss_bytes",
    "spawn",
]

ROOT = Path(__file__).resolve().parent.parent

PROTOCOL = "2025-11-25"
"""The protocol version every contender is spoken to in."""

CONTENDERS = ("agentfx serve", "MCPServer", "FastMCP 4")
"""The served contenders, in the order the tables show them."""

_ANNOUNCE = "Serving MCP over Streamable HTTP at "
_STARTUP_TIMEOUT = 60.0
_MAX_LINE = 1 << 20

_INITIALIZE: dict[str, Any] = {
    "protocolVersion": PROTOCOL,
    "capabilities": {},
    "clientInfo": {"name": "benchmarks", "version": "0"},
}


def command(contender: str, transport: str) -> list[str]:
    """The command line that serves ``contender`` over ``transport`` (``"stdio"`` or ``"http"``).

    >>> command("MCPServer", "stdio")[1:]
    ['-m', 'benchmarks.served', 'mcpserver', 'stdio']
    """
    if contender == "agentfx serve":
        extra = ["--port", "0"] if transport == "http" else []
        return [sys.executable, "-m", "agentfx", "serve", "benchmarks.served:APP", "--transport", transport, *extra]
    peer = {"MCPServer": "mcpserver", "FastMCP 4": "fastmcp"}[contender]
    return [sys.executable, "-m", "benchmarks.served", peer, transport]


def _call(request_id: int, title: str = "Buy milk") -> bytes:
    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "create_todo", "arguments": {"title": title, "priority": 2}},
        }
    ).encode()


def _checked(answer: dict[str, Any], request_id: int) -> dict[str, Any]:
    # A contender that failed must not look fast.
    result: object = answer.get("result")
    if answer.get("id") != request_id or not isinstance(result, dict):
        raise AssertionError(f"unexpected answer to request {request_id}: {answer!r}")
    result = cast("dict[str, Any]", result)
    if result.get("isError"):
        raise AssertionError(f"request {request_id} failed: {answer!r}")
    return result


def _dispatched(result: dict[str, Any], request_id: int) -> None:
    if result.get("structuredContent") != dispatched():
        raise AssertionError(f"request {request_id} did not answer the tool's structured content: {result!r}")


def cpu_ns(pid: int) -> int:
    """CPU time process ``pid``'s live threads have run, in nanoseconds (Linux ``schedstat``).

    Nanosecond-exact where ``/proc/<pid>/stat``'s ticks are 10 ms, and blind
    to load from other processes, which wall-clock time is not.
    """
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that just ended
            continue
    return total


def rss_bytes(pid: int) -> int:
    """The resident set size of process ``pid`` (Linux ``/proc``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


class ServerProcess:
    """A running server process; its stderr is drained into :attr:`stderr` lines."""

    def __init__(self, process: Process, name: str) -> None:
        self.process = process
        self.name = name
        self.stderr: list[str] = []
        self.url: str | None = None
        self._announced = anyio.Event()

    @property
    def pid(self) -> int:
        return self.process.pid

    async def drain(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        buffered = BufferedByteReceiveStream(stream)
        try:
            while True:
                line = (await buffered.receive_until(b"\n", _MAX_LINE)).decode(errors="replace")
                del self.stderr[:-50]
                self.stderr.append(line)
                if line.startswith(_ANNOUNCE):
                    self.url = line[len(_ANNOUNCE) :].strip()
                    self._announced.set()
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            self._announced.set()

    async def listening(self) -> str:
        """The URL the HTTP server announced, once it listens."""
        with anyio.fail_after(_STARTUP_TIMEOUT):
            await self._announced.wait()
        if self.url is None:
            raise AssertionError(f"{self.name} stopped before listening: {self.stderr[-10:]}")
        return self.url


@asynccontextmanager
async def spawn(contender: str, transport: str) -> AsyncGenerator[ServerProcess]:
    """Start ``contender``'s server over ``transport`` in a process; stop it on exit."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    # Every contender runs from bytecode, as an installed package does (pip
    # compiles it at install). In an environment that forbids writing it,
    # only this checkout's modules (agentfx's own, editable) would be
    # compiled again at every spawn: a cost no installed server pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    process = await anyio.open_process(command(contender, transport), cwd=ROOT, env=env)
    server = ServerProcess(process, f"{contender} ({transport})")
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(server.drain)
            try:
                yield server
            finally:
                if process.returncode is None:
                    process.terminate()
                with anyio.move_on_after(10, shield=True):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    with anyio.CancelScope(shield=True):
                        await process.wait()
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await process.aclose()


class StdioClient:
    """JSON-RPC lines to a stdio server, any number of requests in flight."""

    def __init__(self, server: ServerProcess, group: TaskGroup) -> None:
        assert server.process.stdin is not None and server.process.stdout is not None
        self._server = server
        self._stdin = server.process.stdin
        self._stdout = BufferedByteReceiveStream(server.process.stdout)
        self._lock = anyio.Lock()
        self._next = 0
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        group.start_soon(self._read)

    async def _read(self) -> None:
        try:
            while True:
                line = await self._stdout.receive_until(b"\n", _MAX_LINE)
                message: dict[str, Any] = json.loads(line)
                waiter = self._waiting.pop(message.get("id", -1), None)  # notifications have no id
                if waiter is not None:
                    waiter[1].append(message)
                    waiter[0].set()
        except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
            for event, _ in self._waiting.values():
                event.set()

    async def _send(self, body: bytes) -> None:
        async with self._lock:
            await self._stdin.send(body + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request's result."""
        self._next += 1
        request_id = self._next
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
        return await self._roundtrip(request_id, body)

    async def _roundtrip(self, request_id: int, body: bytes) -> dict[str, Any]:
        event = anyio.Event()
        answer: list[dict[str, Any]] = []
        self._waiting[request_id] = (event, answer)
        await self._send(body)
        await event.wait()
        if not answer:
            raise AssertionError(f"{self._server.name} closed its stdout: {self._server.stderr[-10:]}")
        return _checked(answer[0], request_id)

    async def initialize(self) -> dict[str, Any]:
        """The handshake; the ``initialize`` result."""
        result = await self.request("initialize", _INITIALIZE)
        await self._send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())
        return result

    async def call(self) -> None:
        """One ``create_todo`` call, checked to succeed."""
        self._next += 1
        request_id = self._next
        _dispatched(await self._roundtrip(request_id, _call(request_id)), request_id)


class HttpClient:
    """Streamable HTTP sessions against one server, over a pool of keep-alive connections."""

    def __init__(self, url: str, connections: int) -> None:
        self.url = url
        # Idle connections are dropped before a server's keep-alive timeout
        # (uvicorn's is 5 s) can close one just as a request reuses it.
        self._http = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=2.0),
            timeout=60.0,
        )
        self._next = 0

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _post(self, body: bytes, session: str | None) -> httpx.Response:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if session is not None:
            headers["mcp-session-id"] = session
            headers["mcp-protocol-version"] = PROTOCOL
        return await self._http.post(self.url, content=body, headers=headers)

    async def _roundtrip(self, request_id: int, body: bytes, session: str | None) -> tuple[httpx.Response, dict[str, Any]]:
        response = await self._post(body, session)
        if response.status_code != 200:
            raise AssertionError(f"{self.url} answered {response.status_code}: {response.text[:300]}")
        return response, _checked(_answer(response, request_id), request_id)

    async def open_session(self) -> str:
        """A new initialized session's id."""
        self._next += 1
        request_id = self._next
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": _INITIALIZE}).encode()
        response, _ = await self._roundtrip(request_id, body, None)
        session = response.headers.get("mcp-session-id")
        if session is None:
            raise AssertionError(f"{self.url} opened no session")
        done = await self._post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(), session)
        if done.status_code != 202:
            raise AssertionError(f"{self.url} answered {done.status_code} to notifications/initialized")
        return session

    async def call(self, session: str) -> None:
        """One ``create_todo`` call in ``session``, checked to succeed."""
        self._next += 1
        request_id = self._next
        _, result = await self._roundtrip(request_id, _call(request_id), session)
        _dispatched(result, request_id)

    async def list_tools(self, session: str) -> None:
        """``tools/list`` in ``session``, checked to list ``create_todo``."""
        self._next += 1
        request_id = self._next
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}).encode()
        _, result = await self._roundtrip(request_id, body, session)
        if [tool.get("name") for tool in result.get("tools", ())] != ["create_todo"]:
            raise AssertionError(f"{self.url} lists {result!r}")

    @asynccontextmanager
    async def listening(self, session: str) -> AsyncGenerator[None]:
        """``session``'s GET stream, open for the block (what a client holds to hear of changes)."""
        headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": PROTOCOL}
        async with self._http.stream("GET", self.url, headers=headers) as response:
            if response.status_code != 200:
                raise AssertionError(f"{self.url} answered {response.status_code} to a GET stream")
            yield


def _answer(response: httpx.Response, request_id: int) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and len(line) > 6:
                message: dict[str, Any] = json.loads(line[5:])
                if message.get("id") == request_id:
                    return message
        raise AssertionError(f"no answer to request {request_id} in the event stream")
    return json.loads(response.content)


async def open_sessions(client: HttpClient, n: int, *, concurrency: int = 8) -> list[str]:
    """Open ``n`` sessions, ``concurrency`` at a time."""
    sessions: list[str] = []

    async def opener(count: int) -> None:
        for _ in range(count):
            sessions.append(await client.open_session())

    async with anyio.create_task_group() as group:
        for share in _shares(n, concurrency):
            group.start_soon(opener, share)
    return sessions


def _shares(n: int, parts: int) -> Sequence[int]:
    """``n`` split into at most ``parts`` near-equal positive counts.

    >>> _shares(10, 4), _shares(2, 4)
    ([3, 3, 2, 2], [1, 1])
    """
    parts = max(1, min(parts, n))
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]
