"""``agentfx serve --transport http`` closes a connection that does not deliver a request head, or its body, in time.

Without those deadlines, connections that send nothing, a head a byte at a
time, or a whole head and then its body a byte at a time, stay open for
good, and enough of them hold the concurrency limit so that every other
client is answered 503. The deadlines are shortened here.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.parse
from collections.abc import Callable

import anyio
import h11
import httpx
import pytest

from tests.http_support import MODERN, modern, post
from tests.test_cli_http import serve_while, stopped_after

DEADLINE = 0.5
TOOLS_LIST = json.dumps(modern("tools/list")).encode()


def _serve(
    client: Callable[[str], None], monkeypatch: pytest.MonkeyPatch, deadline: float = DEADLINE, body: float = 30.0
) -> None:
    """``tests.mcp_app:app`` served by the CLI with a ``deadline`` for request heads and one for bodies, while ``client(url)`` runs."""
    monkeypatch.setattr("agentfx._request_deadline.HEAD_DEADLINE", deadline)
    monkeypatch.setattr("agentfx._request_deadline.BODY_DEADLINE", body)
    with stopped_after(20):
        code, err, failures = serve_while(client, "tests.mcp_app:app")
    if failures:
        raise failures[0]
    assert code == 0, err


def _connect(url: str) -> socket.socket:
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=5)


def _closed_after(sock: socket.socket, started: float, trickle: bytes = b"", within: float = 2.0) -> float:
    """Seconds from ``started`` until the server closed ``sock``, sending ``trickle`` a byte each 0.1 s meanwhile.

    Fails if the server answered anything, or had not closed it ``within`` seconds.
    """
    received = b""
    pending = list(trickle)
    while (elapsed := time.monotonic() - started) < within:
        if pending:
            try:
                sock.sendall(bytes([pending.pop(0)]))
            except OSError:  # closed by the server already
                return elapsed
        sock.settimeout(0.1 if pending else within - elapsed)
        try:
            data = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
        if not data:
            assert received == b"", received
            return time.monotonic() - started
        received += data
    raise AssertionError(f"still open after {within} s; received {received!r}")


def _tools_list(conn: h11.Connection, sock: socket.socket, host: str) -> int:
    """One ``tools/list`` on ``sock``, its response read to the end; the status."""
    headers = [
        ("Host", host),
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(TOOLS_LIST))),
        ("Mcp-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/list"),
    ]
    sock.sendall(conn.send(h11.Request(method="POST", target="/mcp", headers=headers)))
    sock.sendall(conn.send(h11.Data(data=TOOLS_LIST)))
    sock.sendall(conn.send(h11.EndOfMessage()))
    status = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(sock.recv(65536))
        elif isinstance(event, h11.Response):
            status = event.status_code
        elif isinstance(event, h11.EndOfMessage):
            conn.start_next_cycle()
            return status
        elif isinstance(event, h11.ConnectionClosed):
            raise AssertionError("the server closed a connection between requests")


def test_a_connection_that_sends_nothing_is_closed_after_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[float] = []

    def client(url: str) -> None:
        started = time.monotonic()
        with _connect(url) as sock:
            closed.append(_closed_after(sock, started))

    _serve(client, monkeypatch)
    assert DEADLINE * 0.8 <= closed[0] <= DEADLINE + 1, closed


def test_a_connection_trickling_a_partial_head_is_closed_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[float] = []

    def client(url: str) -> None:
        started = time.monotonic()
        with _connect(url) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\n")
            # A byte every 0.1 s: traffic all along, yet never a whole head.
            closed.append(_closed_after(sock, started, trickle=b"X-Slow: " + b"a" * 40))

    _serve(client, monkeypatch)
    assert DEADLINE * 0.8 <= closed[0] <= DEADLINE + 1, closed


def test_a_keep_alive_client_has_the_deadline_for_each_request_not_for_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    statuses: list[int] = []
    closed: list[float] = []

    def client(url: str) -> None:
        host = urllib.parse.urlsplit(url).netloc
        conn = h11.Connection(h11.CLIENT)
        with _connect(url) as sock:
            # Five requests 0.25 s apart on one connection: it lives well past one deadline.
            for _ in range(5):
                statuses.append(_tools_list(conn, sock, host))
                time.sleep(DEADLINE / 2)
            # And the deadline still counts from the last response for the next head.
            started = time.monotonic()
            sock.sendall(b"POST /mcp HTTP/1.1\r\n")
            closed.append(_closed_after(sock, started))

    _serve(client, monkeypatch)
    assert statuses == [200] * 5
    assert closed[0] <= DEADLINE + 1, closed


def _held_then_freed(url: str, started: float, deadline: float) -> list[int]:
    """A ``tools/list``'s status now, while the limit is held, and once ``deadline`` from ``started`` has passed."""
    statuses: list[int] = []

    async def tools_list() -> None:
        async with httpx.AsyncClient() as http:
            status, _, _ = await post(http, url, modern("tools/list"), version=MODERN)
            statuses.append(status)

    time.sleep(0.1)
    anyio.run(tools_list)
    time.sleep(max(0.0, started + deadline + 0.4 - time.monotonic()))
    anyio.run(tools_list)
    return statuses


def test_idle_connections_hold_the_concurrency_limit_only_until_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.cli._LIMIT_CONCURRENCY", 8)
    deadline = 0.8
    statuses: list[int] = []

    def client(url: str) -> None:
        started = time.monotonic()
        idle = [_connect(url) for _ in range(8)]
        try:
            for sock in idle[::2]:
                sock.sendall(b"POST /mcp HTTP/1.1\r\n")  # half of them: one header line, then nothing
            statuses.extend(_held_then_freed(url, started, deadline))
        finally:
            for sock in idle:
                sock.close()

    _serve(client, monkeypatch, deadline=deadline)
    assert statuses == [503, 200]


def _head(host: str, length: int) -> bytes:
    """A ``tools/list`` POST's head, declaring a body of ``length`` bytes."""
    return (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\nMcp-Protocol-Version: {MODERN}\r\n"
        "Mcp-Method: tools/list\r\n\r\n"
    ).encode()


def test_a_connection_trickling_a_body_is_closed_at_the_body_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[float] = []

    def client(url: str) -> None:
        with _connect(url) as sock:
            sock.sendall(_head(urllib.parse.urlsplit(url).netloc, len(TOOLS_LIST)))
            started = time.monotonic()
            # A byte every 0.1 s: traffic all along, yet never the whole body.
            closed.append(_closed_after(sock, started, trickle=TOOLS_LIST[:-1]))

    _serve(client, monkeypatch, deadline=5.0, body=DEADLINE)
    assert DEADLINE * 0.8 <= closed[0] <= DEADLINE + 1, closed


def test_a_body_has_its_own_deadline_not_the_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its body takes about three head deadlines to arrive, within the body's.
    answers: list[bytes] = []

    def client(url: str) -> None:
        with _connect(url) as sock:
            sock.sendall(_head(urllib.parse.urlsplit(url).netloc, len(TOOLS_LIST)))
            third = len(TOOLS_LIST) // 3
            for start in (0, third, 2 * third):
                time.sleep(DEADLINE / 2)
                sock.sendall(TOOLS_LIST[start : start + third] if start < 2 * third else TOOLS_LIST[start:])
            sock.settimeout(5)
            answers.append(sock.recv(65536))

    _serve(client, monkeypatch, deadline=DEADLINE, body=4.0)
    assert answers[0].startswith(b"HTTP/1.1 200"), answers


def test_trickled_bodies_hold_the_concurrency_limit_only_until_the_body_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentfx.cli._LIMIT_CONCURRENCY", 8)
    deadline = 0.8
    statuses: list[int] = []

    def client(url: str) -> None:
        host = urllib.parse.urlsplit(url).netloc
        slow: list[socket.socket] = []
        try:
            # One after another: uvicorn counts the connections open when each
            # head arrives, itself included, so 7 are served and hold all 8 places.
            for _ in range(7):
                slow.append(_connect(url))
                slow[-1].sendall(_head(host, len(TOOLS_LIST)) + TOOLS_LIST[:1])
                time.sleep(0.02)
            statuses.extend(_held_then_freed(url, time.monotonic(), deadline))
        finally:
            for sock in slow:
                sock.close()

    _serve(client, monkeypatch, deadline=5.0, body=deadline)
    assert statuses == [503, 200]
