"""The stdio transport tells requests apart by id as the SDK does: a repeated id is refused, either spelling cancels.

The SDK correlates ``7`` and ``"7"`` as one id and keeps only the latest
request for an id. These tests serve a real app over a pair of pipes (as
``tests/test_stdio.py`` does) and count the app's calls still running: a
client can neither have more than :data:`~agentfx.mcp._stdio.MAX_UNANSWERED`
calls running nor wedge the connection by how it spells its ids.
"""
# pyright: reportPrivateUsage=false

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import ServerMessageMetadata, SessionMessage

import agentfx
from agentfx.mcp import _stdio
from tests.mcp_wire import call
from tests.test_stdio import Peer, serving, until

REPEATED = {
    "code": types.INVALID_REQUEST,
    "message": "Invalid Request: a request with this id is still unanswered; send it again with another id",
}
"""The error answering a request whose id is that of one still unanswered."""


def hold(request_id: int | str) -> dict[str, Any]:
    """A call that runs until it is cancelled (or serving stops)."""
    return {**call(0, "hold", {}), "id": request_id}


def cancel(request_id: int | str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


def ping(request_id: int | str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


def lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


@asynccontextmanager
async def holding(log: agentfx.AuditLog) -> AsyncGenerator[tuple[Peer, Callable[[], int], Callable[[], int]]]:
    """The hardening app served over pipes; yields the peer, the calls started and the calls still running.

    A ``hold`` call counts as started once the app has its Message, and as
    running until the audit records how it ended.
    """
    async with serving(log) as (peer, task_group, started):
        yield peer, started, lambda: started() - len(log.entries())
        task_group.cancel_scope.cancel()


async def answer_to(peer: Peer, request_id: int | str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The answer to ``request_id``, within a second, and every message received before it."""
    before: list[dict[str, Any]] = []
    with anyio.fail_after(1):
        while (message := await peer.receive()).get("id") != request_id:
            before.append(message)
    return message, before


@pytest.mark.anyio
async def test_a_request_whose_id_is_in_flight_is_refused_and_never_dispatched() -> None:
    log = agentfx.audit_log()
    async with holding(log) as (peer, started, running):
        await peer.send(hold(1))
        await until(lambda: started() == 1)
        # The same id, and its other spelling, while call 1 runs; then a fresh id.
        await peer.write(lines(hold(1), hold("1"), ping(2)))
        answer, before = await answer_to(peer, 2)
        assert before == [
            {"jsonrpc": "2.0", "id": 1, "error": REPEATED},
            {"jsonrpc": "2.0", "id": "1", "error": REPEATED},
        ]
        assert answer == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await anyio.sleep(0.1)
        assert (started(), running()) == (1, 1)  # neither repeat reached the app
        # The first call is still the one a cancellation reaches; then its id is free again.
        await peer.send(cancel(1))
        await until(lambda: running() == 0)
        await anyio.sleep(0.05)  # settled by the server just after its audit
        await peer.send(ping(1))
        assert (await answer_to(peer, 1))[0] == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert [(e.capability, e.outcome) for e in log.entries()] == [("hold", "AgentCancelledError")]


@pytest.mark.anyio
async def test_a_request_whose_id_is_held_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 1)
    log = agentfx.audit_log()
    async with holding(log) as (peer, started, running):
        await peer.send(hold(1))
        await until(lambda: started() == 1)
        await peer.write(lines(ping(2), ping("2")))  # the first is held: no room
        assert await peer.receive() == {"jsonrpc": "2.0", "id": "2", "error": REPEATED}
        await peer.send(cancel(1))
        assert (await answer_to(peer, 2))[0] == {"jsonrpc": "2.0", "id": 2, "result": {}}
        await until(lambda: running() == 0)


@pytest.mark.anyio
async def test_answers_the_reader_writes_itself_free_no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    # A refusal, or a malformed request, may carry the id of a call still
    # running: writing it must leave that call's room taken.
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 2)
    log = agentfx.audit_log()
    async with holding(log) as (peer, started, running):
        await peer.write(lines(hold(1), hold(2)))
        await until(lambda: started() == 2)
        await peer.write(lines(hold(1)) + b'{"jsonrpc": "2.0", "id": 2, "method": 5}\n' + lines(hold(3)))
        assert [await peer.receive() for _ in range(2)] == [
            {"jsonrpc": "2.0", "id": 1, "error": REPEATED},
            {"jsonrpc": "2.0", "id": 2, "error": {"code": types.INVALID_REQUEST, "message": "Invalid Request"}},
        ]
        await anyio.sleep(0.2)
        assert (started(), running()) == (2, 2)  # call 3 is held, not running
        await peer.send(cancel(1))
        await until(lambda: started() == 3)
        assert running() <= 2


@pytest.mark.anyio
async def test_cancelling_a_repeated_id_never_lets_more_calls_run_than_the_limit() -> None:
    limit = _stdio.MAX_UNANSWERED
    log = agentfx.audit_log()
    most = 0
    refused: list[dict[str, Any]] = []
    async with holding(log) as (peer, started, running):

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, running())
                await anyio.sleep(0.002)

        async with anyio.create_task_group() as watching:
            watching.start_soon(watch)
            for round_ in range(3):
                # ``limit`` calls all with id 1, then as many cancellations of id 1, then a ping.
                await peer.write(lines(*[hold(1)] * limit, *[cancel(1)] * limit, ping(f"round {round_}")))
                answer, before = await answer_to(peer, f"round {round_}")
                assert answer["result"] == {}
                refused += before
                # The round's call holds id 1 until the server has settled it, just after its audit.
                await until(lambda: running() == 0)
                await anyio.sleep(0.05)
            await anyio.sleep(0.2)  # what was dispatched has reached the app
            most = max(most, running())
            watching.cancel_scope.cancel()
        assert most <= limit
        assert started() == 3  # one call a round: every repeat was refused, none dispatched
        assert refused == [{"jsonrpc": "2.0", "id": 1, "error": REPEATED}] * (3 * (limit - 1))
        await until(lambda: running() == 0)


@pytest.mark.anyio
async def test_a_cancellation_naming_the_id_in_its_other_spelling_frees_the_room() -> None:
    # The SDK cancels call 7 for a cancellation of "7" (and "7" for 7), and
    # never answers it: the room must be freed all the same, or past the
    # limit nothing more is ever served.
    limit = _stdio.MAX_UNANSWERED
    log = agentfx.audit_log()
    async with holding(log) as (peer, _, running):
        pairs: list[dict[str, Any]] = []
        for index in range(limit + 8):
            request_id, spelled = (index, str(index)) if index % 2 else (str(index), index)
            pairs += [hold(request_id), cancel(spelled)]
        await peer.write(lines(*pairs, ping("after")))
        answer, before = await answer_to(peer, "after")
        assert answer == {"jsonrpc": "2.0", "id": "after", "result": {}}
        assert not [message for message in before if "error" in message]  # none busy, none refused
        await until(lambda: running() == 0)


@asynccontextmanager
async def transport() -> AsyncGenerator[
    tuple[Peer, MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """The stdio transport alone over a pair of pipes: the test plays the server, the peer the client."""
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    peer = Peer(client_out, client_in)
    try:
        async with _stdio.stdio_transport(server_in, server_out) as (read, write):
            yield peer, read, write
    finally:
        for fd in (server_in, server_out, peer.to_server, peer.from_server):
            if fd >= 0:
                os.close(fd)


async def served(read: MemoryObjectReceiveStream[SessionMessage | Exception]) -> SessionMessage:
    """The next message the server is handed, within a second."""
    with anyio.fail_after(1):
        item = await read.receive()
    assert isinstance(item, SessionMessage)
    return item


async def nothing_served(read: MemoryObjectReceiveStream[SessionMessage | Exception]) -> None:
    with anyio.move_on_after(0.2):
        item = await read.receive()
        raise AssertionError(f"the server was handed {item!r}")


def unanswered_hook(item: SessionMessage) -> Callable[[], Awaitable[None]]:
    metadata = item.metadata
    assert isinstance(metadata, ServerMessageMetadata) and metadata.on_request_unanswered is not None
    return metadata.on_request_unanswered


def answer(request_id: int | str) -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))


@pytest.mark.anyio
async def test_a_cancelled_request_keeps_its_id_until_the_server_settles_it_unanswered() -> None:
    async with transport() as (peer, read, _):
        await peer.send(ping(7))
        first = await served(read)
        # The cancellation reaches the server; the call may still be running there.
        await peer.write(lines(cancel(7), ping(7), ping("7")))
        assert cast(Any, (await served(read)).message).method == "notifications/cancelled"
        assert [await peer.receive() for _ in range(2)] == [
            {"jsonrpc": "2.0", "id": 7, "error": REPEATED},
            {"jsonrpc": "2.0", "id": "7", "error": REPEATED},
        ]
        await nothing_served(read)
        # The server is done with it, unanswered: the id is free, once.
        await unanswered_hook(first)()
        await peer.send(ping("7"))
        again = await served(read)
        assert cast(Any, again.message).id == "7"
        await unanswered_hook(first)()  # the first settlement again frees nothing of the second's
        await peer.send(ping(7))
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "error": REPEATED}


@pytest.mark.anyio
async def test_an_answer_the_server_wrote_after_the_cancellation_frees_only_its_own_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server had begun to answer when the cancellation reached it, so it
    # answers instead of settling unanswered: that answer ends the first
    # request, and a later request with its id keeps its own room.
    monkeypatch.setattr(_stdio, "MAX_UNANSWERED", 1)
    async with transport() as (peer, read, write):
        await peer.send(ping(7))
        await served(read)
        await peer.write(lines(cancel(7), ping(7)))
        await served(read)  # the cancellation
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "error": REPEATED}
        await write.send(answer(7))
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "result": {}}
        await peer.send(ping(7))
        second = await served(read)
        await peer.send(ping(8))
        await nothing_served(read)  # one request at a time: 8 waits for 7's room
        await write.send(answer(7))
        assert await peer.receive() == {"jsonrpc": "2.0", "id": 7, "result": {}}
        assert cast(Any, (await served(read)).message).id == 8
        await unanswered_hook(second)()  # answered already: frees nothing more
        await anyio.sleep(0.1)  # the hand-over forgets 8 just after the server has it
        await peer.write(lines(ping(9), ping(10)))  # 9 is held behind 8, and 10 finds no room
        busy = await peer.receive()
        assert busy["id"] == 10 and busy["error"]["message"].startswith("Service Unavailable")
        await nothing_served(read)
