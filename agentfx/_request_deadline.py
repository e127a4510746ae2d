"""Deadlines for each request's head and body on an HTTP/1.1 connection uvicorn serves.

uvicorn times a connection out only between requests (``timeout_keep_alive``,
which the first byte of the next request cancels), and counts every open
connection against ``limit_concurrency``. So a client that connects and sends
nothing, sends a request head a byte at a time, or sends a whole head and then
its body a byte at a time, holds a place for as long as it likes, and enough
of them make the server answer 503 to everyone else.

:func:`request_deadlines` makes a protocol class that gives a connection
:data:`HEAD_DEADLINE` seconds to deliver a complete request head (request
line and headers), counted from when the connection was made and again from
when each response on it finished (the keep-alive gap, in which uvicorn's own
shorter timeout still closes a connection that sends nothing at all); and
then :data:`BODY_DEADLINE` seconds from the head to deliver the whole body.
Time in which the server itself stopped reading (the app has not taken what
came so far) is not the client's: a body deadline that passes then is
extended. A connection that misses either is closed without a response,
logged at debug level only; an app still reading the body hears that its
client left. A WebSocket upgrade leaves the deadlines behind once its head
has arrived. And a client that stops reading what the server writes (its
connection's send buffer full, so the app's next send waits) has
:data:`WRITE_DEADLINE` seconds to read again before it is closed, so it
cannot hold a call, or an event stream, and its place, by reading nothing.

This module imports no uvicorn: the command line, which does, hands it
uvicorn's h11 protocol class, so importing agentfx never imports that extra.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

__all__ = ("BODY_DEADLINE", "HEAD_DEADLINE", "WRITE_DEADLINE", "request_deadlines")

HEAD_DEADLINE = 10.0
"""Seconds a connection has to deliver a request head, from connecting or from the end of the previous response."""

BODY_DEADLINE = 30.0
"""Seconds a request has, from its head, to deliver its whole body (a 4 MiB body at about 140 KB/s)."""

WRITE_DEADLINE = 30.0
"""Seconds a connection may leave the server's writes unread (its send buffer full) before it is closed."""


def request_deadlines(base: type[H11Protocol]) -> type[H11Protocol]:
    """``base`` (uvicorn's ``H11Protocol``), closing a connection that is late with a request's head or body, or reads nothing."""

    class RequestDeadlines(base):
        _timer: asyncio.TimerHandle | None = None
        _write_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(cast("asyncio.Transport", transport))
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._writable()
            super().connection_lost(exc)

        def pause_writing(self) -> None:
            # A timer of its own: a request may be read while its answer cannot be written.
            super().pause_writing()
            if self._write_timer is None:
                self._write_timer = self.loop.call_later(WRITE_DEADLINE, self._unread)

        def resume_writing(self) -> None:
            self._writable()
            super().resume_writing()

        def _writable(self) -> None:
            self._write_timer = _cancelled(self._write_timer)

        def _unread(self) -> None:
            self._write_timer = None
            # Aborted, not closed: closing waits to flush a buffer this client never reads.
            self._close("what was written to it went unread for %s s", WRITE_DEADLINE, abort=True)

        def handle_events(self) -> None:
            # A parsed request head is the one thing that starts a new cycle,
            # whether read just now or pipelined behind the previous response.
            cycle = self.cycle
            super().handle_events()
            # None until the first head arrives, whatever uvicorn's annotation says.
            now = cast("RequestResponseCycle | None", self.cycle)
            if now is not cycle:
                self._disarm()
                if now is not None and now.more_body:
                    self._arm(BODY_DEADLINE, self._body_late)
            elif now is not None and not now.more_body and self._timer is not None and not now.response_complete:
                # The one timer that runs while a response is pending is the body's: the body is complete.
                self._disarm()

        def handle_websocket_upgrade(self, event: h11.Request) -> None:
            # The connection becomes the WebSocket protocol's, with no cycle here.
            self._disarm()
            super().handle_websocket_upgrade(event)

        def on_response_complete(self) -> None:
            # Armed before uvicorn reads on: it parses a pipelined head at once.
            if not self.transport.is_closing():
                self._await_head()
            super().on_response_complete()

        def _await_head(self) -> None:
            self._disarm()
            self._arm(HEAD_DEADLINE, self._head_late)

        def _arm(self, seconds: float, late: Callable[[], None]) -> None:
            self._timer = self.loop.call_later(seconds, late)

        def _disarm(self) -> None:
            self._timer = _cancelled(self._timer)

        def _head_late(self) -> None:
            self._timer = None
            self._close("no complete request head within %s s", HEAD_DEADLINE)

        def _body_late(self) -> None:
            self._timer = None
            if self.flow.read_paused:
                # The server stopped reading, not the client: the app has yet to take what came.
                self._arm(BODY_DEADLINE, self._body_late)
                return
            self._close("no complete request body within %s s of its head", BODY_DEADLINE)

        def _close(self, why: str, seconds: float, *, abort: bool = False) -> None:
            if self.transport.is_closing() and not abort:
                return
            prefix = "%s:%d - " % self.client if self.client else ""
            self.logger.debug("%sclosed: " + why, prefix, seconds)
            if abort:
                self.transport.abort()
            else:
                self.transport.close()

    return RequestDeadlines


def _cancelled(timer: asyncio.TimerHandle | None) -> None:
    """Cancel ``timer``, if there is one; what the slot that held it holds now."""
    if timer is not None:
        timer.cancel()
