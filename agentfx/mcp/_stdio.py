"""Serving a runtime over stdio: one JSON-RPC message per line, every line answered or served.

This layer owns the stdio transport: claiming the process's stdin and stdout
(while serving, fd 0 reads the null device and fd 1 writes to stderr, so
nothing the application prints reaches the wire; a caller that claims them
itself, earlier, serves on its copies with :func:`serve_descriptors`),
reading the wire line by line, and writing each message the server sends as
one line. While
:data:`MAX_UNANSWERED` requests wait for their answers to be written, the
requests read after them are held (as many again, within :data:`MAX_LINE`
bytes) and handed over in order as answers are written, and one past that is
answered at once that the server is busy; so a client that writes without
reading makes it hold a bounded number of answers, not one per line it sent.
Requests are told apart by id as the SDK tells them apart (``7`` and ``"7"``
are one id): a request whose id is that of one neither answered nor
cancelled yet (being served, or held) is answered at once ``-32600`` (with
its id) and never served, since the server would keep only the later of the
two and the earlier would run on where no cancellation and no count reach
it. A request keeps its room, and its id, until the server is done with it:
until its answer is written or, for one its client cancelled (which the
server never answers), until the server settles it unanswered. So an id
whose request was cancelled is refused until then too, and an answer the
server had begun to write before the cancellation reached it can only ever
free its own request's room, never that of a later request with its id.
Requests waiting for room never stop reading: the client's answers to the
server's own requests (a person's confirmation) and its cancellations are
heard meanwhile, and a malformed answer to a request of the server's ends
the wait for it. (An answer the reader writes itself, a parse error, the
busy one or a repeated id's, waits for the writer like any other: a client
that reads nothing makes it wait. Writing it frees no room: it answers no
request the server had.) Every request read reaches the server before the
end of the input does, if the server has room for it within
:data:`HELD_AT_END_TIMEOUT` seconds (else it is answered that the connection
closed, never served, and the end of input aborts the calls in flight);
meanwhile, since the client can answer nothing more, each request the server
sent it and still waits on (a person's confirmation) is answered for it with
an error, which declines such a confirmation. It
stops reading once stdout is broken, since no answer can reach the client
any more.

It reads bytes, not text, because what the SDK's ``stdio_server`` leaves out
matters to a client waiting on an answer: a line that is not valid UTF-8
(which a text reader would "repair" with U+FFFD and dispatch) or not JSON
(``NaN`` and ``Infinity`` included, which the SDK's parser takes for numbers)
gets a parse error (``-32700``); a line that is JSON but not a JSON-RPC
message, or a request whose ``id`` is neither a string nor an integer (which
the SDK's parser takes for a notification, so it would never be answered),
gets an invalid-request error (``-32600``, ``id: null``); a line longer than
:data:`MAX_LINE` is answered without being kept. A blank line is no message
at all and is skipped. Every wait is cancellable (no reader thread blocks on
stdin), so cancelling :func:`serve_stdio` stops it at once, which is what a
SIGTERM handler needs. Parsing and writing messages stay the SDK's
(``jsonrpc_message_adapter``, ``model_dump_json``).

It deliberately knows nothing of capabilities or dispatch.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from pydantic import ValidationError

from .. import __version__
from .._fds import claim_stdio
from ._jsonrpc import answer_id, has_id, unreadable_answer
from ._server import check_served, server

if TYPE_CHECKING:
    from ..runtime import AgentRuntime

__all__ = [
    "DRAIN_TIMEOUT",
    "HELD_AT_END_TIMEOUT",
    "MAX_LINE",
    "MAX_UNANSWERED",
    "protocol_error",
    "read_line",
    "serve_descriptors",
    "serve_stdio",
    "stdio_transport",
]

_logger = logging.getLogger("agentfx.mcp.stdio")

MAX_LINE = DEFAULT_MAX_REQUEST_BODY_SIZE
"""Bytes one line may hold (4 MiB, the SDK's limit for an HTTP request body); a longer one is answered and dropped."""

MAX_UNANSWERED = 64
"""Requests the server works on whose answers are not written yet; as many more are held until one is.

Enough for any client that pipelines; a client that writes without ever
reading makes the server hold at most this many answers, and past twice as
many requests each is answered that the server is busy.
"""

DRAIN_TIMEOUT = 2.0
"""Seconds the answers already written by the server may take to reach stdout once serving stops."""

HELD_AT_END_TIMEOUT = 5.0
"""Seconds the requests held when the input ends may wait for the server to have room for them.

Past that (the calls in flight do not end by themselves) each still held is
answered that the connection closed, and the end of input, reaching the
server, aborts the calls in flight: a client that closed stdin sees the
server exit, not wait forever.
"""

_CHUNK = 64 * 1024
_JSON_WHITESPACE = b" \t\r\n"


def _error(request_id: types.RequestId | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


_PARSE_ERROR = _error(None, types.PARSE_ERROR, "Parse error")
_INVALID_REQUEST = _error(None, types.INVALID_REQUEST, "Invalid Request")
_TOO_LARGE = _error(None, types.INVALID_REQUEST, "Invalid Request: the line is longer than 4 MiB")


def protocol_error(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the SDK's parser could not read as a message.

    The id is the line's own when it is a request whose id can be read, else ``null``.

    >>> import mcp_types as types
    >>> try:
    ...     types.jsonrpc_message_adapter.validate_json("{oops")
    ... except ValueError as exc:
    ...     protocol_error(exc).error.code
    -32700
    """
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        if any(error["type"] == "json_invalid" for error in errors):
            return _PARSE_ERROR
        return _error(_request_id(errors), types.INVALID_REQUEST, "Invalid Request")
    return _PARSE_ERROR


def _request_id(errors: Any) -> types.RequestId | None:
    # The union's branches report the offending object itself for a missing
    # field, so the id of a malformed request can be read back from there.
    for error in cast("list[Mapping[str, Any]]", errors):
        candidate: object = error.get("input")
        if isinstance(candidate, Mapping) and "method" in candidate:
            request_id = cast("Mapping[str, object]", candidate).get("id")
            if isinstance(request_id, str | int) and not isinstance(request_id, bool):
                return request_id
    return None


def read_line(line: bytes) -> SessionMessage | types.JSONRPCError | None:
    """What one line of stdin is: a message to serve, the error that answers it, or nothing.

    >>> read_line(b"  \\r") is None
    True
    >>> read_line(b'{"jsonrpc": "2.0", "id": 1, "method": "\\xff"}').error.code
    -32700
    >>> read_line(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"t": NaN}}').error.code
    -32700
    >>> answer = read_line(b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}')
    >>> answer.error.code, answer.id
    (-32600, None)
    >>> type(read_line(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')).__name__
    'SessionMessage'
    """
    if not line.strip(_JSON_WHITESPACE):
        return None
    try:
        # Strict: a text reader's U+FFFD would turn bytes nobody sent into a
        # valid argument and dispatch it.
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return _PARSE_ERROR
    if (b"N" in line or b"I" in line) and not _strict_json(line):
        # The SDK's parser takes ``NaN`` and ``Infinity`` for numbers, but they
        # are not JSON. Only a line holding their first letters at all (in a
        # string, say) is parsed twice; looking for one byte costs less than
        # looking for a word, or than parsing every line strictly.
        return _PARSE_ERROR
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except Exception as exc:
        return protocol_error(exc)
    if isinstance(message, types.JSONRPCNotification) and has_id(text):
        # The parser takes a request whose id is an object, a bool, a float or
        # null for a notification, which nobody answers; its client would wait
        # forever. MCP ids are strings or integers.
        return _INVALID_REQUEST
    return SessionMessage(message)


def _strict_json(line: bytes) -> bool:
    """Whether ``line`` is JSON, ``NaN`` and ``Infinity`` not being numbers."""
    try:
        pydantic_core.from_json(line, allow_inf_nan=False)
    except (ValueError, RecursionError):
        return False
    return True


class _End:
    """One end of the wire: a descriptor, and how to wait on it without blocking the event loop."""

    __slots__ = ("fd", "nonblocking", "pollable")

    def __init__(self, fd: int, *, writing: bool) -> None:
        self.fd = fd
        mode = os.fstat(fd).st_mode
        # A regular file is always ready and cannot be polled; a pipe, socket
        # or terminal can. Windows polls sockets only.
        self.pollable = sys.platform != "win32" and not stat.S_ISREG(mode)
        # Writes to a pipe or socket must not block the loop when the client
        # stops reading; the flag is restored when serving ends. A terminal
        # is left alone: its flags are shared with the shell.
        self.nonblocking = writing and self.pollable and (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode))
        if self.nonblocking:
            if os.get_blocking(fd):
                os.set_blocking(fd, False)
            else:
                self.nonblocking = False  # already so: nothing to restore, and writes handle EAGAIN below

    def restore(self) -> None:
        if self.nonblocking:
            try:
                os.set_blocking(self.fd, True)
            except OSError:
                pass

    async def read(self) -> bytes:
        while self.pollable:
            try:
                await anyio.wait_readable(self.fd)
            except OSError:
                # The kernel will not poll it (the null device, say): such a
                # descriptor never blocks, so a worker thread reads it quickly.
                self.pollable = False
                break
            try:
                # Readable, so this returns at once, with what is there.
                return os.read(self.fd, _CHUNK)
            except BlockingIOError:
                continue  # a spurious wakeup on a descriptor someone made non-blocking
        return await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self.fd)
                continue
            view = view[written:]
        # No checkpoint of its own: the writer's next receive from its stream
        # is one, so a write that never blocks still lets the loop go round.


class _Lines:
    """Splits the bytes read into lines of at most ``limit`` bytes, without keeping a longer one."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> Iterator[bytes | None]:
        """Each complete line in ``chunk`` in order, and ``None`` once for a line found too long."""
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._skipping:
                self._skipping = False
            elif len(self._pending) + end - start > self._limit:
                yield None
            else:
                self._pending += chunk[start:end]
                yield bytes(self._pending)
            self._pending.clear()
            start = end + 1
        if not self._skipping:
            self._pending += chunk[start:]
            if len(self._pending) > self._limit:
                # Answered now, dropped until its end: memory stays bounded.
                self._pending.clear()
                self._skipping = True
                yield None

    def end(self) -> bytes | None:
        """The last line, when the input ended without a newline."""
        return None if self._skipping or not self._pending else bytes(self._pending)


class _Unanswered:
    """The requests the server has and is not done with, by id: at most ``limit`` of them.

    Ids are kept as the SDK correlates them (:func:`coerce_request_id`:
    ``"7"`` and ``7`` are one id), and each is here at most once: the reader
    refuses a request whose id is still here (see :meth:`serving`). The
    reader hands the server a request only while there is room; the writer
    makes room as it writes each answer. A request the client cancels is
    never answered: the server settles it unanswered instead (the SDK's
    ``on_request_unanswered``, which :meth:`admit` hands out), and that makes
    the room, once, and only for that admission of the id. Reading the
    cancellation frees nothing: until the server is done, the call still
    runs. An answer naming no request here changes nothing.

    It also keeps the ids of the requests the server sent the client (an
    elicitation, say) that the client has not answered yet, so a malformed
    answer to one can still end the wait for it.
    """

    __slots__ = ("_asked", "_asked_more", "_ended", "_ids", "_limit", "_room")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        # Each id with the token of its admission, so a settlement frees only its own.
        self._ids: dict[types.RequestId, object] = {}
        self._room = anyio.Event()
        # Oldest first, bounded: an id the client never answers is forgotten in time.
        self._asked: dict[types.RequestId, None] = {}
        # Once the input ended, nothing asked can be answered: see unanswerable().
        self._ended = False
        self._asked_more = anyio.Event()

    def full(self) -> bool:
        return len(self._ids) >= self._limit

    def serving(self, request_id: types.RequestId) -> bool:
        """Whether a request with this id (either spelling of it) was admitted and the server is not done with it."""
        return coerce_request_id(request_id) in self._ids

    def admit(self, request: SessionMessage, request_id: types.RequestId) -> SessionMessage:
        """Count ``request`` as the server's: what to hand it, told how to say it settled the request unanswered."""
        key = coerce_request_id(request_id)
        admission = object()
        self._ids[key] = admission

        async def settled() -> None:
            self._free(key, admission)

        return SessionMessage(message=request.message, metadata=ServerMessageMetadata(on_request_unanswered=settled))

    def _free(self, key: types.RequestId, admission: object) -> None:
        if self._ids.get(key) is admission:
            del self._ids[key]
            self._room.set()

    async def room(self) -> None:
        while self.full():
            # One waiter, the reader's hand-over: a fresh event for each wait.
            self._room = anyio.Event()
            await self._room.wait()

    def answered(self, request_id: types.RequestId) -> None:
        """The server's answer to the request with this id was written: its room is free, once."""
        key = coerce_request_id(request_id)
        if self._ids.pop(key, None) is not None:
            self._room.set()

    def ask(self, request_id: types.RequestId) -> None:
        """The server sent the client a request: its answer is awaited."""
        self._asked[coerce_request_id(request_id)] = None
        if len(self._asked) > _ASKED_MAX:
            del self._asked[next(iter(self._asked))]
        if self._ended:
            self._asked_more.set()

    async def unanswerable(self) -> list[types.RequestId]:
        """Once the input ended: the server's requests still awaiting an answer, waiting for one if there are none.

        The client can no longer answer any, those asked before the end and
        those asked since; each id is given once.
        """
        self._ended = True
        while not self._asked:
            self._asked_more = anyio.Event()
            await self._asked_more.wait()
        asked = list(self._asked)
        self._asked.clear()
        return asked

    def heard(self, request_id: types.RequestId) -> bool:
        """The client answered ``request_id``: whether the server was waiting for that answer."""
        return self._asked.pop(coerce_request_id(request_id), _NOT_ASKED) is not _NOT_ASKED


_NOT_ASKED = object()
_ASKED_MAX = 1024
"""Requests of the server's own whose answers are awaited, past which the oldest is forgotten."""


class _Held:
    """Requests read while :data:`MAX_UNANSWERED` are waiting: handed to the server in order as room frees.

    Reading goes on meanwhile, so what the server's own requests wait for
    (the client's answers and its cancellations) is not stuck behind a
    request the server has no room for. At most :data:`MAX_UNANSWERED`
    requests and :data:`MAX_LINE` bytes are held; a request past that is
    answered at once that the server is busy.

    A request being handed over is handed over whole (see :meth:`hand_over`),
    so once the hand-over has been cancelled and has returned, every request
    still here is one the server never had (see :meth:`release`).
    """

    __slots__ = ("_bytes", "_changed", "_requests", "_sending")

    def __init__(self) -> None:
        # Each with its id (coerced) and its size in bytes; the first stays here until the server has taken it.
        self._requests: deque[tuple[SessionMessage, types.RequestId, int]] = deque()
        self._bytes = 0
        self._sending = False
        self._changed = anyio.Event()

    def __bool__(self) -> bool:
        return bool(self._requests)

    def holds(self, request_id: types.RequestId) -> bool:
        """Whether a request with this id (either spelling of it) is held, or being handed over."""
        wanted = coerce_request_id(request_id)
        return any(held_id == wanted for _, held_id, _ in self._requests)

    def hold(self, request: SessionMessage, request_id: types.RequestId, size: int) -> bool:
        """Hold ``request`` (``size`` bytes read), or ``False`` when there is no room to."""
        if len(self._requests) >= MAX_UNANSWERED or self._bytes + size > MAX_LINE:
            return False
        self._requests.append((request, coerce_request_id(request_id), size))
        self._bytes += size
        self._changed.set()
        return True

    def drop(self, request_id: types.RequestId) -> bool:
        """Forget the first held request with this id (its client cancelled it), or ``False`` when none is held.

        One being handed over is no longer held: the server hears of its cancellation.
        """
        wanted = coerce_request_id(request_id)
        for index, (_, held_id, size) in enumerate(self._requests):
            if index == 0 and self._sending:
                continue
            if held_id == wanted:
                del self._requests[index]
                self._bytes -= size
                self._changed.set()
                return True
        return False

    async def changed(self) -> None:
        self._changed = anyio.Event()
        await self._changed.wait()

    async def hand_over(self, inbound: MemoryObjectSendStream[SessionMessage | Exception], unanswered: _Unanswered) -> None:
        """Hand each held request to the server, oldest first, once there is room for it; forever."""
        while True:
            while not self._requests:
                await self.changed()
            await unanswered.room()
            if not self._requests:
                continue  # cancelled while it waited for room
            request, request_id, size = self._requests[0]
            admitted = unanswered.admit(request, request_id)
            # Held until the server has it: the end of input waits for it, and a cancellation now is the server's to hear.
            self._sending = True
            try:
                # Shielded: a send cancelled after the server took the request
                # would leave it here as well, to be answered twice. It cannot
                # outlast the server: closing the read stream breaks it.
                with anyio.CancelScope(shield=True):
                    await inbound.send(admitted)
            finally:
                self._sending = False
            self._requests.popleft()
            self._bytes -= size
            self._changed.set()

    async def handed_over(self) -> None:
        """Return once every held request has reached the server."""
        while self._requests:
            await self.changed()

    def release(self) -> list[types.RequestId]:
        """Forget every held request, once the hand-over has stopped: the ids of those the server never had."""
        ids = [held_id for _, held_id, _ in self._requests]
        self._requests.clear()
        self._bytes = 0
        return ids


class _OwnAnswer(SessionMessage):
    """An answer the reader writes itself, to a line the server never had: writing it frees no request's room.

    Its id may be that of a request the server is still serving (a repeated
    id, a malformed request reusing one), whose room must stay taken.
    """


def _busy(request_id: types.RequestId) -> _OwnAnswer:
    return _OwnAnswer(
        message=_error(
            request_id,
            types.INTERNAL_ERROR,
            "Service Unavailable: too many requests are waiting; send it again once one is answered",
        )
    )


def _repeated(request_id: types.RequestId) -> _OwnAnswer:
    return _OwnAnswer(
        message=_error(
            request_id,
            types.INVALID_REQUEST,
            "Invalid Request: a request with this id is still unanswered; send it again with another id",
        )
    )


async def _read(
    end: _End,
    inbound: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
    limit: int,
    unanswered: _Unanswered,
) -> None:
    lines = _Lines(limit)
    held = _Held()

    async def deliver(line: bytes | None) -> None:
        item = _TOO_LARGE if line is None else read_line(line)
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, types.JSONRPCRequest):
                if unanswered.serving(message.id) or held.holds(message.id):
                    # The server would keep only this one: the first would run on uncounted and uncancellable.
                    await answers.send(_repeated(message.id))
                    return
                # Behind a held request, never past it: requests reach the server in the order sent.
                if held or unanswered.full():
                    assert line is not None
                    if not held.hold(item, message.id, len(line)):
                        await answers.send(_busy(message.id))
                    return
                item = unanswered.admit(item, message.id)
            elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                cancelled = cancelled_request_id_from_params(message.params)
                if cancelled is not None and held.drop(cancelled):
                    return  # it never reached the server: nothing to cancel there, nothing to answer
                # One the server has keeps its room until the server settles it (see _Unanswered).
            elif isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
                unanswered.heard(message.id)
            await inbound.send(item)
        elif item is not None:
            waited = None if line is None else answer_id(line)
            if waited is not None and unanswered.heard(waited):
                # A malformed answer to the server's own request (a confirmation
                # it asked for, say): the server is told it failed, so what waits
                # on it ends rather than waiting for an answer that never comes.
                await inbound.send(SessionMessage(message=unreadable_answer(waited)))
            await answers.send(_OwnAnswer(message=item))

    async with inbound, answers, anyio.create_task_group() as task_group:
        handing_over, stopped = anyio.CancelScope(), anyio.Event()
        task_group.start_soon(_handing_over, held, inbound, unanswered, handing_over, stopped)
        # Caught in here: the task group would wrap it in an exception group.
        try:
            while chunk := await end.read():
                for line in lines.feed(chunk):
                    await deliver(line)
            last = lines.end()
            if last is not None:
                await deliver(last)
            # Every request read is served before the server hears the input ended.
            # Meanwhile what waits on the client ends: calls waiting on a person
            # would otherwise keep the room held requests wait for, forever.
            task_group.start_soon(_fail_unanswerable, unanswered, inbound)
            with anyio.move_on_after(HELD_AT_END_TIMEOUT):
                await held.handed_over()
            if held:
                # The calls in flight are not ending: what is still held never
                # reaches the server, and is told so, once the hand-over has
                # stopped (it may be handing one over this instant).
                handing_over.cancel()
                await stopped.wait()
                with anyio.move_on_after(DRAIN_TIMEOUT):
                    for request_id in held.release():
                        await answers.send(_OwnAnswer(message=_error(request_id, types.CONNECTION_CLOSED, _NO_ROOM)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the server stopped reading: nothing more to deliver
        task_group.cancel_scope.cancel()


_NO_ROOM = "Connection closed: the input ended before the server had room for this request"


async def _fail_unanswerable(unanswered: _Unanswered, inbound: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
    """After the end of input, answer each of the server's requests to the client with an error, as it is asked.

    The server hears that the client cannot answer (a confirmation it asked
    for declines), exactly as for an answer that could not be read.
    """
    try:
        while True:
            for waited in await unanswered.unanswerable():
                await inbound.send(SessionMessage(message=_no_answer(waited)))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the server stopped reading


def _no_answer(request_id: types.RequestId) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=types.CONNECTION_CLOSED, message="Connection closed: the input ended before an answer came"),
    )


async def _handing_over(
    held: _Held,
    inbound: MemoryObjectSendStream[SessionMessage | Exception],
    unanswered: _Unanswered,
    scope: anyio.CancelScope,
    stopped: anyio.Event,
) -> None:
    try:
        with scope:
            await held.hand_over(inbound, unanswered)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the server stopped reading
    finally:
        stopped.set()


def _frame(message: SessionMessage) -> bytes:
    try:
        text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
    except Exception:
        # Never a silent gap: a request still gets an answer.
        _logger.exception("a message could not be written to stdout")
        request_id: object = getattr(message.message, "id", None)
        if not isinstance(request_id, str | int):
            return b""
        text = _error(request_id, types.INTERNAL_ERROR, "Internal error").model_dump_json(
            by_alias=True, exclude_unset=True
        )
    return text.encode() + b"\n"


async def _write(
    end: _End,
    outbound: MemoryObjectReceiveStream[SessionMessage],
    drained: anyio.Event,
    unanswered: _Unanswered,
    broke: Callable[[], None],
) -> None:
    broken = False
    try:
        async with outbound:
            async for message in outbound:
                if broken:
                    continue
                data = _frame(message)
                try:
                    await end.write(data)
                except OSError:
                    # The client closed its end: what is left has nobody to
                    # read it, and nothing it still sends can be answered.
                    broken = True
                    _logger.warning("the client closed stdout; serving stops")
                    broke()
                    continue
                answer = message.message
                if isinstance(message, _OwnAnswer):
                    pass  # it answers no request the server had: the room stays as it is
                elif isinstance(answer, types.JSONRPCResponse | types.JSONRPCError) and answer.id is not None:
                    unanswered.answered(answer.id)
                elif isinstance(answer, types.JSONRPCRequest):
                    unanswered.ask(answer.id)
    finally:
        drained.set()


@asynccontextmanager
async def stdio_transport(
    read_fd: int, write_fd: int, *, limit: int = MAX_LINE
) -> AsyncGenerator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]]:
    """The server's two streams over a pair of descriptors: messages read from one, answers written to the other.

    Unreadable lines are answered here and never reach the read stream.
    While :data:`MAX_UNANSWERED` requests wait for their answers to be
    written, the requests read after them wait too (see the module); once writing fails (the client closed its
    end) nothing more is read at all, so the read stream ends. On leaving
    the block reading stops at once; what the server already sent is written
    within :data:`DRAIN_TIMEOUT` seconds.

    Args:
        read_fd: Where lines are read (stdin's, or a pipe's read end).
        write_fd: Where messages are written (stdout's, or a pipe's write end).
        limit: The longest line accepted, in bytes.
    """
    reading_end, writing_end = _End(read_fd, writing=False), _End(write_fd, writing=True)
    inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outbound, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
    # The reader answers unreadable lines on its own handle, so the writer
    # ends only once both it and the server are done.
    answers = outbound.clone()
    drained = anyio.Event()
    reading = anyio.CancelScope()
    unanswered = _Unanswered(MAX_UNANSWERED)

    async def read() -> None:
        with reading:
            await _read(reading_end, inbound_send, answers, limit, unanswered)

    try:
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(read)
            task_group.start_soon(_write, writing_end, outbound_receive, drained, unanswered, reading.cancel)
            try:
                yield inbound, outbound
            finally:
                reading.cancel()
                # Closed here too, in case the reader was cancelled before it ran.
                for stream in (inbound, inbound_send, answers, outbound):
                    stream.close()
                # Shielded: when serving was cancelled, answers already given still go out.
                with anyio.move_on_after(DRAIN_TIMEOUT, shield=True):
                    await drained.wait()
                task_group.cancel_scope.cancel()
    finally:
        writing_end.restore()


async def serve_stdio(runtime: AgentRuntime[Any, Any], *, name: str = "agentfx", version: str = __version__) -> None:
    """Serve the runtime over this process's stdin and stdout until the client closes either, or until cancelled.

    While serving, anything the application prints goes to stderr, never onto
    the wire. Cancelling it (a SIGTERM handler, say) stops reading at once
    and aborts every pending call, each recorded by the runtime's audit as a
    cancellation, before it returns. ``agentfx serve MODULE:ATTR`` does this
    for an App, stopping on SIGTERM or SIGINT::

        async with app.run() as runtime:
            await serve_stdio(runtime)

    Args:
        runtime: A bound agentfx runtime.
        name: The server name reported to clients.
        version: The server version reported to clients; agentfx's own by default.

    Raises:
        ContractError: ``runtime`` is not a bound runtime (an App, say), before stdio is touched.
        RuntimeError: This process's stdio is already being served.
    """
    check_served("serve_stdio()", runtime)
    with claim_stdio() as (wire_in, wire_out):
        await serve_descriptors(runtime, wire_in, wire_out, name=name, version=version)


async def serve_descriptors(
    runtime: AgentRuntime[Any, Any], read_fd: int, write_fd: int, *, name: str = "agentfx", version: str = __version__
) -> None:
    """Serve the runtime over two descriptors its caller has claimed, as :func:`serve_stdio` serves over stdio's.

    For a caller that claims stdio itself, earlier than serving: ``agentfx
    serve`` claims it before importing its target, so what the target prints
    while it imports, starts or stops reaches stderr, never the wire, and
    serves here on the copies of fds 0 and 1 it kept. Until the client closes
    ``read_fd`` or ``write_fd``, or until cancelled, as :func:`serve_stdio`.

    Args:
        runtime: A bound agentfx runtime.
        read_fd: Where the client's lines are read.
        write_fd: Where the answers are written.
        name: The server name reported to clients.
        version: The server version reported to clients; agentfx's own by default.
    """
    app = server(runtime, name=name, version=version)
    async with stdio_transport(read_fd, write_fd) as (read, write):
        await app.run(read, write, app.create_initialization_options())
