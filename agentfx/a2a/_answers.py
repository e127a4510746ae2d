"""The A2A endpoint's error answers: the endpoint's own fixed words, whatever the SDK filled in.

This layer owns what a JSON-RPC error from ``/a2a`` says. The SDK answers a
body it cannot decode, a request that does not validate, or an exception it
did not expect, with the decoder's, the validator's or the exception's own
text (with what the client sent quoted in it), in ``message`` and in
``data``; its 0.3 binding answers params it cannot convert (a message's
file bytes that are not base64 or data nested too deep, a ``historyLength``
past 32 bits) as ``-32603``, an internal error.
So, as the MCP HTTP server does:

- a body that is not JSON, or not one JSON object, is answered here, before
  the SDK reads it (:func:`read_envelope`): ``-32700`` or ``-32600``; so is
  an object without an ``id`` (a JSON-RPC notification), which the SDK would
  carry out and answer: every A2A method is a request, and a call nobody
  hears the outcome of must not run;
- every error answer the SDK sends, a JSON body or an event of a stream, is
  rewritten (:class:`Answers`): its ``id`` and ``code`` kept, its message
  one of a fixed set per code (:data:`MESSAGES`) unless it is one of the
  fixed refusals agentfx or the SDK word without any input in them
  (:data:`KEPT`, the SDK's terminal-state refusal), its ``data`` dropped
  but for A2A 1.0's ``ErrorInfo`` reason and domain (its metadata emptied);
- an ``-32603`` of the 0.3 binding that the request itself caused (its
  ``A2A-Version`` is not 0.3's, or its params could not be converted: a
  message's file bytes or data, a ``historyLength`` past 32 bits), for any
  0.3 method, is answered as the client's mistake: ``-32600`` or ``-32602``.

It deliberately knows nothing of tasks, dispatch or authentication: what it
knows of a request is the :class:`Exchange` the guard and the SDK's hooks
fill in.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter
from a2a.server.context import ServerCallContext
from a2a.utils import constants
from a2a.utils.errors import VersionNotSupportedError
from a2a.utils.version_validator import validate_version
from starlette.datastructures import MutableHeaders
from starlette.responses import JSONResponse

if TYPE_CHECKING:
    from starlette.types import Message, Send

__all__ = [
    "EXCHANGE_KEY",
    "INVALID_PARAMS",
    "KEPT",
    "MESSAGES",
    "NOT_ONE_REQUEST",
    "NOT_READABLE",
    "NO_ID",
    "PARSE_ERROR",
    "VERSION_MISMATCH_0_3",
    "Answers",
    "Envelope",
    "Exchange",
    "read_envelope",
]

PARSE_ERROR = "Parse error: the body is not JSON, or is nested too deep to read"
NOT_ONE_REQUEST = "Invalid Request: the body must be one JSON-RPC 2.0 request object"
NO_ID = "Invalid Request: an A2A request must have an id; A2A defines no notifications"
INVALID_PARAMS = "Invalid params: the params are not what the method takes"
NOT_READABLE = "Invalid params: the message could not be read (file bytes that are not base64, data nested too deep)"
VERSION_MISMATCH_0_3 = "Invalid Request: an A2A 0.3 method, sent with an A2A-Version header of another version"

MESSAGES: Final[dict[int, str]] = {
    -32700: PARSE_ERROR,
    -32600: "Invalid Request: the request is not what its method takes",
    -32601: "Method not found",
    -32602: INVALID_PARAMS,
    -32603: "Internal error",
    -32001: "Task not found",
    -32002: "Task cannot be canceled",
    -32003: "Push notifications are not supported",
    -32004: "This operation is not supported",
    -32005: "Incompatible content types",
    -32006: "Invalid agent response",
    -32007: "Authenticated extended card is not configured",
    -32008: "Extension support is required",
    -32009: "A2A version not supported: this endpoint serves A2A 1.0 and 0.3",
}
"""The message of each JSON-RPC error code the endpoint answers, unless the SDK's is one of :data:`KEPT`."""

_OTHER = "Request failed"

KEPT: Final[frozenset[str]] = frozenset(
    {
        # The SDK's own, fixed, with nothing of the request in them.
        "Invalid request: 'jsonrpc' must be exactly '2.0'",
        "Invalid request: id must be a string, integer, or null",
        "Method is required",
        "Payload too large",
        "Streaming is not supported by the agent",
        "Push notifications are not supported by the agent",
        "The agent does not support authenticated extended cards",
    }
)
"""Messages of the SDK's passed as they are: fixed, with nothing of the request in them.

Beside these, the refusals agentfx words itself are passed (the caller
adds them), and the SDK's refusal of a message to a finished task, which
names the task (an id the server made) and its state.
"""

_TASK_FINISHED = re.compile(
    r"Task [0-9A-Za-z-]{1,64} is (in terminal state: TASK_STATE_[A-Z_]{1,32}|already completed\.( Cannot start it again\.)?)"
)
_REASON = re.compile(r"[A-Z][A-Z_]{0,63}")
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_DOMAIN = "a2a-protocol.org"
_SEND_0_3 = frozenset({"message/send", "message/stream"})
_OUT_OF_RANGE = re.compile(r"Value out of range: -?[0-9]{1,64}")
"""Protobuf's words for a number its 32-bit field cannot hold: a 0.3 ``historyLength``, the only integer 0.3 params carry."""

EXCHANGE_KEY = "agentfx.a2a.exchange"
"""Where the :class:`Exchange` of a request is kept: in its ASGI scope, and in the SDK's call context state."""


@dataclass(frozen=True)
class Envelope:
    """What a body that is one JSON object says of itself: its method (as the SDK reads it).

    ``finite`` is false when a number in it is not finite: ``1e400`` (valid
    JSON, past a double's range) or a ``NaN`` or ``Infinity`` (which
    Python's parser, the SDK's, takes), none of which a protobuf ``Value``
    holding it can be written back as.
    """

    method: str | None
    finite: bool = True


def read_envelope(body: bytes) -> Envelope | JSONResponse:
    """The body's method, or the answer refusing it in this endpoint's words.

    Decoded as the SDK will decode it, so that a failure (a nesting too deep
    for the decoder included, which the SDK answers as an internal error)
    is answered here.

    >>> read_envelope(b'{"jsonrpc": "2.0", "id": 3, "method": "GetTask"}')
    Envelope(method='GetTask', finite=True)
    >>> read_envelope(b'{"id": 1, "method": "SendMessage", "params": {"x": [1.5, -1e400]}}').finite
    False
    >>> json.loads(read_envelope(b'{"jsonrpc": "2.0", "method": "SendMessage"}').body)["error"]["code"]
    -32600
    >>> json.loads(read_envelope(b"{nope").body)["error"]
    {'code': -32700, 'message': 'Parse error: the body is not JSON, or is nested too deep to read'}
    """
    # Told while parsing, at the parser's own pace: only a number written
    # with a fraction or an exponent, or a constant, calls back.
    finite = True

    def number(text: str) -> float:
        nonlocal finite
        value = float(text)
        if not math.isfinite(value):
            finite = False
        return value

    def constant(text: str) -> float:
        nonlocal finite
        finite = False
        return float(text)

    try:
        raw: object = json.loads(body, parse_float=number, parse_constant=constant)
    except (ValueError, RecursionError):
        return _answer(None, -32700, PARSE_ERROR)
    if not isinstance(raw, dict):
        return _answer(None, -32600, NOT_ONE_REQUEST)
    request = cast("dict[str, object]", raw)
    if "id" not in request:
        # A notification, to JSON-RPC, but A2A defines none: refused, not run,
        # and answered (with no id to echo) so the client learns why.
        return _answer(None, -32600, NO_ID)
    method = request.get("method")
    return Envelope(method if isinstance(method, str) else None, finite)


def _answer(request_id: str | int | None, code: int, message: str) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


@dataclass(eq=False)
class Exchange:
    """One request to the endpoint, as far as the SDK took it.

    ``context`` is set once the SDK built the call context, ``reached``
    once the request handler was handed the request's params; between the
    two the 0.3 binding checks the version and converts the params.
    """

    envelope: Envelope
    context: ServerCallContext | None = None
    reached: bool = False


@validate_version(constants.PROTOCOL_VERSION_0_3)
async def _speaks_0_3(context: ServerCallContext) -> None:
    """Raises the SDK's ``VersionNotSupportedError`` if ``context``'s version header is not one 0.3 takes."""


async def _versions_agree(context: ServerCallContext) -> bool:
    try:
        await _speaks_0_3(context)
    except VersionNotSupportedError:
        return False
    return True


def _error_info(data: object) -> list[dict[str, object]]:
    """Of the SDK's ``data``, only A2A 1.0's ``ErrorInfo``: its reason and domain."""
    if not isinstance(data, list):
        return []
    kept: list[dict[str, object]] = []
    for entry in cast("list[object]", data):
        if not isinstance(entry, dict):
            continue
        fields = cast("dict[str, object]", entry)
        reason = fields.get("reason")
        if (
            fields.get("@type") == _ERROR_INFO
            and fields.get("domain") == _DOMAIN
            and isinstance(reason, str)
            and _REASON.fullmatch(reason)
        ):
            # Its metadata is the SDK's detail (a parse error's text, say): left empty.
            kept.append({"@type": _ERROR_INFO, "reason": reason, "domain": _DOMAIN, "metadata": {}})
    return kept


class Answers:
    """A wrapper of an ASGI ``send`` that rewrites the SDK's error answers into the endpoint's words.

    Args:
        send: The server's ``send``.
        exchange: The request being answered.
        own: The refusals agentfx words itself, passed as they are.

    A JSON body is held until it is whole, so its ``Content-Length`` is
    right once rewritten; a stream is rewritten event by event, as sent.
    Anything else passes untouched.
    """

    def __init__(self, send: Send, exchange: Exchange, own: frozenset[str]) -> None:
        self._send = send
        self._exchange = exchange
        self._own = own
        self._mode: Callable[[Message], Any] | None = None
        self._start: Message | None = None
        self._body = bytearray()

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            content_type = MutableHeaders(raw=list(message.get("headers", []))).get("content-type", "")
            if content_type.startswith("application/json"):
                self._start, self._mode = message, self._json
                return
            if content_type.startswith("text/event-stream"):
                self._mode = self._events
            await self._send(message)
            return
        if message["type"] == "http.response.body" and self._mode is not None:
            await self._mode(message)
            return
        await self._send(message)

    async def _json(self, message: Message) -> None:
        chunk: bytes = message.get("body", b"")
        if message.get("more_body", False):
            self._body += chunk
            return
        # The SDK sends a JSON answer in one piece: it is not copied then.
        whole = bytes(self._body) + chunk if self._body else chunk
        body = await self._rewritten(whole)
        start = cast("Message", self._start)
        if body is not whole:
            headers = MutableHeaders(raw=list(start.get("headers", [])))
            headers["content-length"] = str(len(body))
            start = {**start, "headers": headers.raw}
        await self._send(start)
        await self._send({"type": "http.response.body", "body": body})

    async def _events(self, message: Message) -> None:
        # An event ends at a blank line; one split over two sends is put together first.
        self._body += message.get("body", b"")
        more = message.get("more_body", False)
        out = bytearray()
        while True:
            end = _event_end(self._body)
            if end is None:
                break
            out += await self._event(bytes(self._body[:end]))
            del self._body[:end]
        if not more:
            out += self._body
            self._body.clear()
        if out or not more:
            await self._send({"type": "http.response.body", "body": bytes(out), "more_body": more})

    async def _event(self, event: bytes) -> bytes:
        if not _may_be_error(event):
            return event
        lines = event.splitlines(keepends=True)
        data = [line for line in lines if line.startswith(b"data:")]
        if len(data) != 1:
            return event
        payload = data[0][len(b"data:") :].strip()
        rewritten = await self._rewritten(payload)
        if rewritten is payload:  # handed back as it came: not an error to rewrite
            return event
        return b"".join(b"data: " + rewritten + b"\r\n" if line is data[0] else line for line in lines)

    async def _rewritten(self, body: bytes) -> bytes:
        if not _may_be_error(body):
            return body
        try:
            answer: object = json.loads(body)
        except (ValueError, RecursionError):
            return body
        if not isinstance(answer, dict):
            return body
        fields = cast("dict[str, object]", answer)
        error = fields.get("error")
        if not isinstance(error, dict):
            return body
        error_fields = cast("dict[str, object]", error)
        code = error_fields.get("code")
        code = code if isinstance(code, int) and not isinstance(code, bool) else -32603
        message = error_fields.get("message")
        code, words = await self._words(code, message if isinstance(message, str) else "")
        rewritten: dict[str, object] = {"code": code, "message": words}
        if "data" in error_fields:
            # Kept in the shape it had: 1.0's list, 0.3's null.
            rewritten["data"] = _error_info(error_fields["data"]) or None
        request_id = fields.get("id")
        answer_id = request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None
        reply = {"jsonrpc": "2.0", "id": answer_id, "error": rewritten}
        return json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode()

    async def _words(self, code: int, message: str) -> tuple[int, str]:
        """The code and message the client is told, for the SDK's."""
        exchange = self._exchange
        if code == -32603 and exchange.context is not None and not exchange.reached:
            method = exchange.envelope.method
            # The 0.3 binding checks the version and converts the params
            # between building the context and handing them over; what
            # fails there is the request's doing, whichever method it is.
            if method in JSONRPC03Adapter.METHOD_TO_MODEL:
                if not await _versions_agree(exchange.context):
                    return -32600, VERSION_MISMATCH_0_3
                # A historyLength too large is refused as 1.0 refuses it; the
                # rest of a message's conversion is its parts'.
                if method in _SEND_0_3 and not _OUT_OF_RANGE.fullmatch(message):
                    return -32602, NOT_READABLE
                return -32602, INVALID_PARAMS
        if message in self._own or message in KEPT or _TASK_FINISHED.fullmatch(message):
            return code, message
        return code, MESSAGES.get(code, _OTHER)


def _may_be_error(body: bytes) -> bool:
    """Whether ``body`` may be a JSON-RPC error answer, read without scanning a long result.

    A key ``"result":`` or ``"error":`` cannot occur inside a JSON string
    (its quotes would be escaped), and before the answer's own one there is
    at most its ``jsonrpc`` and its ``id``: whichever comes first is the
    answer's. So a success answer is told by its first few bytes.

    >>> _may_be_error(b'{"jsonrpc":"2.0","id":1,"result":{"error":1}}'), _may_be_error(b'{"error":{"code":1}}')
    (False, True)
    """
    result = body.find(b'"result":')
    return body.find(b'"error":', 0, result if result >= 0 else len(body)) >= 0


def _event_end(buffer: bytearray) -> int | None:
    """Where the first whole event in ``buffer`` ends (after its blank line), or ``None``."""
    ends = [i + len(sep) for sep in (b"\r\n\r\n", b"\n\n", b"\r\r") if (i := buffer.find(sep)) >= 0]
    return min(ends) if ends else None
