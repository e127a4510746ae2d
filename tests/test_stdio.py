"""The stdio transport in-process, over real pipes: what each line is, how lines are cut, how serving stops.

``tests/integration/test_hardening.py`` drives the same transport through
``agentfx serve`` in a subprocess; these tests reach what a subprocess cannot
show cheaply: the trio backend, the line splitter's law, a client that stops
reading.
"""
# pyright: reportPrivateUsage=false

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

import agentfx
from agentfx.mcp import _stdio, server
from agentfx.mcp._stdio import read_line, stdio_transport
from agentfx.app import App
from tests.hardening_app import app
from tests.test_mcp_confirm import app as confirming
from tests.mcp_wire import INITIALIZE, call

# --- what one line is ---------------------------------------------------------------

NOTE = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "note", "arguments": {"text": "%s"}}}'


@pytest.mark.parametrize(
    "garbage",
    [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"caf\xe9", b"\xe2\x82"],
    ids=["ff", "bom-like", "overlong", "surrogate", "above-max", "latin-1", "truncated"],
)
def test_a_line_that_is_not_utf8_is_a_parse_error(garbage: bytes) -> None:
    answer = read_line(NOTE.replace(b"%s", garbage))
    assert isinstance(answer, types.JSONRPCError)
    assert (answer.id, answer.error.code, answer.error.message) == (None, types.PARSE_ERROR, "Parse error")


def test_valid_utf8_is_served_exactly_as_sent() -> None:
    message = read_line(NOTE.replace(b"%s", "café ☕ \U0001f600".encode()))
    assert isinstance(message, SessionMessage) and isinstance(message.message, types.JSONRPCRequest)
    assert message.message.params == {"name": "note", "arguments": {"text": "café ☕ \U0001f600"}}


@pytest.mark.parametrize("request_id", ["{}", '{"a": 1}', "true", "false", "1.5", "1.0", "1e3", "null", "[1]"])
def test_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request(request_id: str) -> None:
    answer = read_line(f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/list"}}'.encode())
    assert isinstance(answer, types.JSONRPCError)
    assert (answer.id, answer.error.code, answer.error.message) == (None, types.INVALID_REQUEST, "Invalid Request")


@pytest.mark.parametrize("request_id", ['"a"', "0", "-3", "12345678901234567890"])
def test_string_and_integer_ids_are_requests(request_id: str) -> None:
    message = read_line(f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/list"}}'.encode())
    assert isinstance(message, SessionMessage) and isinstance(message.message, types.JSONRPCRequest)


def test_a_notification_stays_a_notification_even_with_an_id_in_its_params() -> None:
    line = b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "id": {}}}'
    message = read_line(line)
    assert isinstance(message, SessionMessage) and isinstance(message.message, types.JSONRPCNotification)


@pytest.mark.parametrize("line", [b"", b" ", b"\r", b"\t \r"])
def test_a_blank_line_is_nothing(line: bytes) -> None:
    assert read_line(line) is None


# --- how lines are cut ----------------------------------------------------------------


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=12),
    limit=st.integers(min_value=1, max_value=30),
    newline_at_end=st.booleans(),
)
def test_lines_come_out_whole_in_order_however_the_bytes_are_chunked(
    lines: list[bytes], cuts: list[int], limit: int, newline_at_end: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if newline_at_end and lines else b"")
    splitter = _stdio._Lines(limit)
    out: list[bytes | None] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        out.extend(splitter.feed(data[start:cut]))
        start = max(start, cut)
    last = splitter.end()
    if last is not None:
        out.append(last)
    expected: list[bytes | None] = [line if len(line) <= limit else None for line in lines]
    if lines and not newline_at_end and lines[-1] == b"":
        expected.pop()  # no newline and nothing after the last one: no line at all
    assert out == expected


# --- serving over pipes ---------------------------------------------------------------


class Peer:
    """The client's ends of the two pipes."""

    def __init__(self, to_server: int, from_server: int) -> None:
        self.to_server = to_server
        self.from_server = from_server
        self._buffer = b""
        os.set_blocking(to_server, False)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        with anyio.fail_after(5):
            while view:
                try:
                    view = view[os.write(self.to_server, view) :]
                except BlockingIOError:
                    await anyio.wait_writable(self.to_server)

    async def send(self, message: object) -> None:
        await self.write(json.dumps(message).encode() + b"\n")

    def close_writing(self) -> None:
        """Close the client's end of the server's input: the server reads the end of input."""
        os.close(self.to_server)
        self.to_server = -1

    def close_reading(self) -> None:
        """Close the client's end of the server's output: the server's next write fails."""
        os.close(self.from_server)
        self.from_server = -1

    def received(self) -> list[dict[str, Any]]:
        """Every whole message the server has written so far, without waiting."""
        os.set_blocking(self.from_server, False)
        try:
            while chunk := os.read(self.from_server, 65536):
                self._buffer += chunk
        except BlockingIOError:
            pass
        finally:
            os.set_blocking(self.from_server, True)
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines]

    async def receive(self) -> dict[str, Any]:
        with anyio.fail_after(5):
            while b"\n" not in self._buffer:
                await anyio.wait_readable(self.from_server)
                self._buffer += os.read(self.from_server, 65536)
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)


@asynccontextmanager
async def serving(
    log: agentfx.AuditLog, served: App[Any, Any, Any] = app, initialize: dict[str, Any] = INITIALIZE
) -> AsyncGenerator[tuple[Peer, anyio.abc.TaskGroup, Callable[[], int]]]:
    """``served`` over a pair of pipes in a task group the test may cancel; yields the peer and the held count."""
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    try:
        async with served.run(audit=log) as runtime:
            mcp_server = server(runtime)

            async def serve() -> None:
                async with stdio_transport(server_in, server_out) as (read, write):
                    await mcp_server.run(read, write, mcp_server.create_initialization_options())

            async with anyio.create_task_group() as task_group:
                task_group.start_soon(serve)
                peer = Peer(client_out, client_in)
                await peer.send(initialize)
                assert (await peer.receive())["id"] == 0
                await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                yield peer, task_group, lambda: getattr(runtime.host.model(), "held", 0)
    finally:
        for fd in (server_in, client_out, client_in, server_out):
            os.close(fd)


@asynccontextmanager
async def served_to_its_end(
    log: agentfx.AuditLog, served: App[Any, Any, Any] = app, initialize: dict[str, Any] = INITIALIZE
) -> AsyncGenerator[tuple[Peer, Any, anyio.Event]]:
    """``served`` over a pair of pipes, initialized; yields the peer, the runtime and the event set once serving ended.

    On leaving the block it waits for serving to end by itself: the test closes one of the peer's ends.
    """
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    peer = Peer(client_out, client_in)
    try:
        async with served.run(audit=log) as runtime:
            mcp_server = server(runtime)
            ended = anyio.Event()
            async with anyio.create_task_group() as task_group:

                async def serve() -> None:
                    async with stdio_transport(server_in, server_out) as (read, write):
                        await mcp_server.run(read, write, mcp_server.create_initialization_options())
                    ended.set()

                task_group.start_soon(serve)
                await peer.send(initialize)
                assert (await peer.receive())["id"] == 0
                await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                yield peer, runtime, ended
                with anyio.fail_after(5):
                    await ended.wait()
    finally:
        for fd in (server_in, server_out, peer.to_server, peer.from_server):
            if fd >= 0:
                os.close(fd)


async def until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_cancelling_serving_aborts_every_pending_call_and_audits_it_while_input_stays_open() -> None:
    log = agentfx.audit_log()
    async with serving(log) as (peer, task_group, held):
        for request_id in range(1, 6):
            await peer.send(call(request_id, "hold", {}))
        await until(lambda: held() == 5)
        with anyio.fail_after(1):  # no end of input: cancelling alone must stop it, at once
            task_group.cancel_scope.cancel()
    entries = log.entries()
    assert [(e.capability, e.decision, e.outcome) for e in entries] == [("hold", "dispatched", "AgentCancelledError")] * 5


@pytest.mark.anyio
async def test_a_client_that_stops_reading_cannot_hold_the_server_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stdio, "DRAIN_TIMEOUT", 0.2)
    log = agentfx.audit_log()
    async with serving(log) as (peer, task_group, _):
        await peer.send(call(1, "note", {"text": "x" * 300_000}))
        assert (await peer.receive())["id"] == 1
        # Answers far larger than a pipe holds, which the client never reads.
        for request_id in range(2, 5):
            await peer.send({"jsonrpc": "2.0", "id": request_id, "method": "resources/read", "params": {"uri": "app://notes"}})
        await anyio.sleep(0.2)
        started = anyio.current_time()
        task_group.cancel_scope.cancel()
    assert anyio.current_time() - started < 1.5


@pytest.mark.anyio
async def test_a_client_that_writes_without_reading_has_only_so_many_requests_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 4)
    log = agentfx.audit_log()
    async with serving(log) as (peer, task_group, _):
        await peer.send(call(1, "note", {"text": "x" * 300_000}))
        assert (await peer.receive())["id"] == 1
        # An answer far larger than a pipe holds, which the client does not read yet...
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "app://notes"}})
        # ... and more requests behind it: three more are served while it waits,
        # four more are held, and the one past those is answered busy.
        for request_id in range(3, 11):
            await peer.send(call(request_id, "note", {"text": "y"}))
        await until(lambda: len(log.entries()) == 1 + 3)
        await anyio.sleep(0.3)  # and no more, however long it waits
        assert len(log.entries()) == 1 + 3
        # Read, and the held ones are served, each answered once.
        answers = {answer["id"]: answer for answer in [await peer.receive() for _ in range(9)]}
        assert sorted(answers) == list(range(2, 11))
        assert answers[10]["error"] == {
            "code": types.INTERNAL_ERROR,
            "message": "Service Unavailable: too many requests are waiting; send it again once one is answered",
        }
        assert all("result" in answers[request_id] for request_id in range(2, 10))
        assert len(log.entries()) == 1 + 7
        task_group.cancel_scope.cancel()


ASKING: dict[str, Any] = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": {"elicitation": {"form": {}}}}}
"""The handshake of a client that can ask its person (form elicitation)."""


async def questions(peer: Peer, count: int) -> list[int | str]:
    """The ids of the next ``count`` messages, each the server asking the person (``elicitation/create``)."""
    asked: list[int | str] = []
    for _ in range(count):
        message = await peer.receive()
        assert message.get("method") == "elicitation/create", message
        asked.append(message["id"])
    return asked


async def two_asking_and_one_held(peer: Peer) -> list[int | str]:
    """Calls 1 and 2, each waiting on the person, then a ping held behind them (at a limit of 2); the questions' ids."""
    for request_id, item in ((1, "milk"), (2, "tea")):
        await peer.send(call(request_id, "remove", {"item": item}))
    asked = await questions(peer, 2)
    await peer.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
    return asked


@pytest.mark.anyio
async def test_requests_past_the_limit_wait_while_the_answers_the_server_waits_for_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Both calls in flight wait for the person; the request behind them must
    # not stop the reader from hearing the person's answers.
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 2)
    log = agentfx.audit_log()
    async with serving(log, confirming, ASKING) as (peer, task_group, _):
        asked = await two_asking_and_one_held(peer)
        for question in asked:
            await peer.send({"jsonrpc": "2.0", "id": question, "result": {"action": "decline"}})
        assert sorted([(await peer.receive())["id"] for _ in range(3)]) == [1, 2, 3]
        task_group.cancel_scope.cancel()
    assert [(e.capability, e.outcome) for e in log.entries()] == [("remove", "AgentAuthorizationError")] * 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [{"result": []}, {"result": "yes"}, {"error": {"code": 1}}],
    ids=["result a list", "result a string", "error without a message"],
)
async def test_a_malformed_answer_to_a_confirmation_declines_it(answer: dict[str, Any]) -> None:
    # The parser refuses it, so the server never hears it was answered: it
    # must be told, or the call waits for an answer that never comes.
    log = agentfx.audit_log()
    async with serving(log, confirming, ASKING) as (peer, task_group, _):
        await peer.send(call(1, "remove", {"item": "milk"}))
        (question,) = await questions(peer, 1)
        await peer.send({"jsonrpc": "2.0", "id": question, **answer})
        answers = [await peer.receive() for _ in range(2)]
        assert answers[0] == {"jsonrpc": "2.0", "id": None, "error": {"code": types.INVALID_REQUEST, "message": "Invalid Request"}}
        assert answers[1]["id"] == 1 and answers[1]["result"]["content"][0]["text"] == 'Declined: Remove "milk"?'
        task_group.cancel_scope.cancel()
    assert [(e.capability, e.outcome) for e in log.entries()] == [("remove", "AgentAuthorizationError")]


@pytest.mark.anyio
async def test_every_request_read_reaches_the_server_before_the_end_of_input() -> None:
    # The held request is on its way to a server not reading this instant when
    # the input ends: it must still arrive, before the end does.
    limit = _stdio.MAX_UNANSWERED
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    try:
        async with stdio_transport(server_in, server_out) as (read, write):
            for request_id in range(limit + 1):
                os.write(client_out, json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode() + b"\n")
            with anyio.fail_after(5):
                first = [await read.receive() for _ in range(limit)]
            await anyio.sleep(0.2)  # the last is held
            await write.send(SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=0, result={})))
            await anyio.sleep(0.2)  # room: it is being handed over, and nobody receives yet
            os.close(client_out)
            client_out = -1
            await anyio.sleep(0.2)
            with anyio.fail_after(5):
                rest = [message async for message in read]
        assert [cast(Any, m).message.id for m in first] == list(range(limit))
        assert [cast(Any, m).message.id for m in rest] == [limit]
    finally:
        for fd in (server_in, client_out, client_in, server_out):
            if fd >= 0:
                os.close(fd)


@pytest.mark.anyio
async def test_at_the_end_of_input_what_waits_on_the_client_ends_and_held_requests_are_still_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Both calls in flight wait for the person, and a request is held behind
    # them, when the input ends: no answer can come any more, so the questions
    # fail (the calls are declined and answered), room frees, the held request
    # reaches the server, and serving ends by itself rather than outliving its client.
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 2)
    log = agentfx.audit_log()
    async with served_to_its_end(log, confirming, ASKING) as (peer, _, ended):
        await two_asking_and_one_held(peer)
        await anyio.sleep(0.1)  # read, and held
        peer.close_writing()
        with anyio.fail_after(5):
            await ended.wait()
        answers = {answer["id"]: answer for answer in peer.received()}
    # The held ping reached the server; whether it was answered before the
    # server heard the end is the server's race (it cancels what is in flight then).
    assert {1, 2} <= set(answers) <= {1, 2, 3}
    for request_id, item in ((1, "milk"), (2, "tea")):
        assert answers[request_id]["result"]["content"][0]["text"] == f'Declined: Remove "{item}"?'
    assert [(e.capability, e.outcome) for e in log.entries()] == [("remove", "AgentAuthorizationError")] * 2


@pytest.mark.anyio
async def test_at_the_end_of_input_a_request_still_without_room_is_answered_and_serving_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The calls in flight never end by themselves, so the held request never
    # gets room: once the input ended, it is answered after a bounded wait
    # (never served), and the end of input then aborts the calls in flight.
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 2)
    monkeypatch.setattr(_stdio, "HELD_AT_END_TIMEOUT", 0.3)
    log = agentfx.audit_log()
    async with served_to_its_end(log) as (peer, runtime, ended):
        await peer.send(call(1, "hold", {}))
        await peer.send(call(2, "hold", {}))
        await until(lambda: runtime.host.model().held == 2)
        await peer.send(call(3, "note", {"text": "no room"}))
        await anyio.sleep(0.1)  # read, and held
        peer.close_writing()
        with anyio.fail_after(5):
            await ended.wait()
        answers = {answer["id"]: answer for answer in peer.received()}
    assert answers[3] == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": types.CONNECTION_CLOSED,
            "message": "Connection closed: the input ended before the server had room for this request",
        },
    }
    assert sorted((e.capability, e.decision, e.outcome) for e in log.entries()) == [
        ("hold", "dispatched", "AgentCancelledError")
    ] * 2


@pytest.mark.anyio
async def test_a_server_that_stops_reading_ends_the_reader_quietly() -> None:
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    try:
        async with stdio_transport(server_in, server_out) as (read, _write):
            await read.aclose()
            os.write(client_out, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
            await anyio.sleep(0.2)
        # Left without an exception (an exception group, before, escaped the block).
    finally:
        for fd in (server_in, client_out, client_in, server_out):
            os.close(fd)


@pytest.mark.anyio
async def test_a_held_request_its_client_cancels_is_never_served(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 1)
    log = agentfx.audit_log()
    async with serving(log) as (peer, task_group, held):
        await peer.send(call(1, "hold", {}))
        await until(lambda: held() == 1)
        await peer.send(call(2, "note", {"text": "cancelled while held"}))
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        await peer.send(call(3, "note", {"text": "after"}))
        while (await peer.receive())["id"] != 3:
            pass
        task_group.cancel_scope.cancel()
    assert sorted((e.capability, e.outcome) for e in log.entries()) == [("hold", "AgentCancelledError"), ("note", "dispatched")]


@pytest.mark.anyio
async def test_a_cancelled_request_frees_its_room_though_it_is_never_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 2)
    log = agentfx.audit_log()
    async with serving(log) as (peer, task_group, held):
        await peer.send(call(1, "hold", {}))
        await peer.send(call(2, "hold", {}))
        await until(lambda: held() == 2)
        for request_id in (1, 2):
            await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})
        await peer.send(call(3, "note", {"text": "after"}))
        # A cancelled call may still be answered, when its abort outran the
        # cancellation of its request: either way its room is free, so call 3
        # is read and answered (receiving it, within the peer's timeout, is the check).
        while (await peer.receive())["id"] != 3:
            pass
        task_group.cancel_scope.cancel()
    # The second abort may be recorded after the note: the order of the two is not the point.
    assert sorted((e.capability, e.outcome) for e in log.entries()) == [
        ("hold", "AgentCancelledError"),
        ("hold", "AgentCancelledError"),
        ("note", "dispatched"),
    ]


@pytest.mark.anyio
async def test_once_the_client_closes_stdout_serving_stops_and_audits_what_was_pending() -> None:
    log = agentfx.audit_log()
    async with served_to_its_end(log) as (peer, runtime, _):
        await peer.send(call(1, "hold", {}))
        await until(lambda: runtime.host.model().held == 1)
        peer.close_reading()
        # Its answer cannot be written: serving ends by itself, with
        # stdin still open, and the call still pending is aborted.
        await peer.send(call(2, "note", {"text": "unanswerable"}))
    assert [(e.capability, e.outcome) for e in log.entries()] == [("note", "dispatched"), ("hold", "AgentCancelledError")]


@pytest.mark.anyio
async def test_unreadable_lines_are_answered_and_never_dispatched() -> None:
    log = agentfx.audit_log()
    async with serving(log) as (peer, task_group, _):
        await peer.write(NOTE.replace(b"%s", b"\xff\xfe") + b"\n")
        assert (await peer.receive())["error"]["code"] == types.PARSE_ERROR
        await peer.write(b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}\n')
        assert (await peer.receive())["error"] == {"code": types.INVALID_REQUEST, "message": "Invalid Request"}
        await peer.send(call(2, "note", {"text": "ok"}))
        assert (await peer.receive())["id"] == 2
        task_group.cancel_scope.cancel()
    assert [(e.capability, e.outcome) for e in log.entries()] == [("note", "dispatched")]


@pytest.mark.anyio
async def test_the_last_line_is_served_when_input_ends_without_a_newline() -> None:
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    try:
        os.write(client_out, json.dumps(INITIALIZE).encode())
        os.close(client_out)
        client_out = -1
        received: list[SessionMessage | Exception] = []
        async with stdio_transport(server_in, server_out) as (read, write):
            async for item in read:
                received.append(item)
            await write.aclose()
        assert len(received) == 1 and isinstance(received[0], SessionMessage)
    finally:
        for fd in (server_in, client_out, client_in, server_out):
            if fd >= 0:
                os.close(fd)


@pytest.mark.anyio
async def test_input_from_a_regular_file_or_the_null_device_is_read_to_its_end(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(json.dumps(INITIALIZE).encode() + b"\n\xff\n" + json.dumps(call(1, "note", {})).encode())
    answers = tmp_path / "answers.jsonl"
    for source in (str(requests), os.devnull):
        read_fd = os.open(source, os.O_RDONLY)
        write_fd = os.open(answers, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            received: list[SessionMessage | Exception] = []
            with anyio.fail_after(5):
                async with stdio_transport(read_fd, write_fd) as (read, write):
                    async for item in read:
                        received.append(item)
                    await write.aclose()
        finally:
            os.close(read_fd)
            os.close(write_fd)
        if source == os.devnull:
            assert received == [] and answers.read_bytes() == b""
        else:
            # Two messages served, and the line between them answered in the file.
            assert len(received) == 2
            assert json.loads(answers.read_bytes())["error"]["code"] == types.PARSE_ERROR
