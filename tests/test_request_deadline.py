"""The request deadlines on uvicorn's own protocol: whose delay a body's is, and a client that reads nothing.

uvicorn stops reading a connection once more body has arrived than the app
has taken; the client cannot send the rest then, and the body deadline must
not close it for that. A client that stops reading what is written to it is
aborted once the write deadline passes (closing would wait to flush what it
never reads). uvicorn's protocol is asyncio's, driven here directly over a
transport that records what is done to it, with the deadlines shortened.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from agentfx import _request_deadline
from agentfx._request_deadline import request_deadlines

BODY = 0.2
LENGTH = 200_000
"""A body far past what uvicorn buffers before it stops reading (64 KiB)."""


class Recorded(asyncio.Transport):
    """A transport that keeps what uvicorn writes and whether it closed or paused it."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.aborted = False
        self.paused = False
        self.written = b""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)


def test_a_body_the_server_stopped_reading_is_not_the_clients_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_request_deadline, "BODY_DEADLINE", BODY)
    taken: list[bytes] = []

    async def main() -> None:
        reading = asyncio.Event()

        async def app(scope: Any, receive: Any, send: Any) -> None:
            await reading.wait()  # busy elsewhere: it takes nothing of the body yet
            while (message := await receive())["type"] == "http.request":
                taken.append(message["body"])

        protocol, transport = _connected(app)
        head = f"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: {LENGTH}\r\n\r\n".encode()
        protocol.data_received(head + b"x" * (LENGTH // 2))
        assert transport.paused  # uvicorn stopped reading: the rest cannot arrive
        await asyncio.sleep(BODY * 3)
        assert not transport.closed, "closed for a delay that was the server's"
        reading.set()
        await asyncio.sleep(0.05)
        assert not transport.paused and taken  # reading again, and the app has what came
        # Now it is the client's turn, and it sends nothing more: the deadline closes it.
        await asyncio.sleep(BODY * 2)
        assert transport.closed and transport.written == b""
        protocol.connection_lost(None)
        await asyncio.sleep(0)

    asyncio.run(main())


def _connected(app: Any) -> tuple[H11Protocol, Recorded]:
    config = uvicorn.Config(app, lifespan="off", log_level="warning")
    config.load()
    protocol = request_deadlines(H11Protocol)(config, ServerState(), {}, asyncio.get_running_loop())
    transport = Recorded()
    protocol.connection_made(transport)
    return protocol, transport


async def _nothing(scope: Any, receive: Any, send: Any) -> None:
    pass


def test_a_client_that_reads_nothing_is_aborted_at_the_write_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_request_deadline, "WRITE_DEADLINE", BODY)
    monkeypatch.setattr(_request_deadline, "HEAD_DEADLINE", 60.0)

    async def main() -> None:
        protocol, transport = _connected(_nothing)
        protocol.pause_writing()  # its send buffer is full
        await asyncio.sleep(BODY / 2)
        protocol.resume_writing()  # it read in time
        await asyncio.sleep(BODY)
        assert not transport.closed
        protocol.pause_writing()
        await asyncio.sleep(BODY * 2)
        assert transport.aborted and transport.written == b""
        protocol.connection_lost(None)

    asyncio.run(main())
