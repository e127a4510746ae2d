"""A deadline for each request head on an HTTP/1.1 connection uvicorn serves.

uvicorn times a connection out only between requests (``timeout_keep_alive``,
which the first byte of the next request cancels), and counts every open
connection against ``limit_concurrency``. So a client that connects and sends
nothing, or sends a request head a byte at a time, holds a place for as long
as it likes, and enough of them make the server answer 503 to everyone else.

:func:`head_deadline` makes a protocol class that gives a connection
:data:`HEAD_DEADLINE` seconds to deliver a complete request head (request
line and headers, not the body): counted from when the connection was made,
and again from when each response on it finished (the keep-alive gap, in
which uvicorn's own shorter timeout still closes a connection that sends
nothing at all). A connection that misses it is closed without a response,
logged at debug level only. A WebSocket upgrade leaves the deadline behind
once its head has arrived.

This module imports no uvicorn: the command line, which does, hands it
uvicorn's h11 protocol class, so importing agentfx never imports that extra.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ("HEAD_DEADLINE", "head_deadline")

HEAD_DEADLINE = 10.0
"""Seconds a connection has to deliver a request head, from connecting or from the end of the previous response."""


def head_deadline(base: type[H11Protocol]) -> type[H11Protocol]:
    """``base`` (uvicorn's ``H11Protocol``), closing a connection whose request head is not complete by the deadline."""

    class HeadDeadline(base):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(cast("asyncio.Transport", transport))
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._head_arrived()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            # A parsed request head is the one thing that starts a new cycle,
            # whether read just now or pipelined behind the previous response.
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:
                self._head_arrived()

        def handle_websocket_upgrade(self, event: h11.Request) -> None:
            # The connection becomes the WebSocket protocol's, with no cycle here.
            self._head_arrived()
            super().handle_websocket_upgrade(event)

        def on_response_complete(self) -> None:
            # Armed before uvicorn reads on: it parses a pipelined head at once.
            if not self.transport.is_closing():
                self._await_head()
            super().on_response_complete()

        def _await_head(self) -> None:
            self._head_arrived()
            self._head_timer = self.loop.call_later(HEAD_DEADLINE, self._head_late)

        def _head_arrived(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            self._head_timer = None
            if self.transport.is_closing():
                return
            prefix = "%s:%d - " % self.client if self.client else ""
            self.logger.debug("%sclosed: no complete request head within %s s", prefix, HEAD_DEADLINE)
            self.transport.close()

    return HeadDeadline
