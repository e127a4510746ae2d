"""What the SDK's JSON-RPC parser leaves unsaid, for the transports that read raw messages.

This layer owns two facts about the wire the transports need before a
message reaches the SDK. Whether a message the SDK's parser read as a
notification carried an ``id`` after all: the SDK reads a request whose id is
neither a string nor an integer (an object, a bool, a float, ``null``, an
array) as a notification, which nobody answers, so its client would wait
forever; a transport asks :func:`has_id` and answers ``-32600 Invalid
Request`` with ``id: null`` instead. And which request a message the parser
refused was answering (:func:`answer_id`), so a malformed answer to the
server's own request still ends the wait for it.

It deliberately knows nothing of transports, sessions or dispatch: parsing
messages stays the SDK's (``jsonrpc_message_adapter``); it only words the
error answer a transport hands the server for an unreadable one
(:func:`unreadable_answer`).
"""

from __future__ import annotations

import mcp_types as types
import msgspec

__all__ = ["answer_id", "has_id", "unreadable_answer"]


class _Id(msgspec.Struct):
    """Whether a message has a top-level ``id`` (any value, ``null`` included); every other field is skipped."""

    id: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


def has_id(data: str | bytes) -> bool:
    """Whether a JSON object has a top-level ``id``, whatever its value; a parsed notification with one was a bad request.

    The SDK's parser reads a request whose id is not a string or an integer
    as a notification, which nobody answers: a transport asks this to answer
    it ``-32600`` instead.

    >>> has_id('{"jsonrpc": "2.0", "id": null, "method": "x"}'), has_id('{"method": "x", "params": {"id": 1}}')
    (True, False)
    >>> has_id(b'{"jsonrpc": "2.0", "id": [1], "method": "x"}'), has_id(b"[1, 2]")
    (True, False)
    """
    try:
        return msgspec.json.decode(data, type=_Id).id is not msgspec.UNSET
    except (msgspec.DecodeError, RecursionError):
        return False


class _Answer(msgspec.Struct):
    """What makes a message an answer (an ``id``, a ``result`` or an ``error``, no ``method``); every other field is skipped."""

    id: str | int | msgspec.UnsetType = msgspec.UNSET
    method: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


def answer_id(data: str | bytes) -> str | int | None:
    """The id a JSON object answers: its string or integer ``id`` when it has a ``result`` or an ``error`` and no ``method``.

    Read however malformed the rest is (a ``result`` of the wrong shape, an
    ``error`` without a message), so a transport can tell the server which of
    its requests got an answer it could not read. A request that lost its
    ``method`` is no answer: it is refused as the request it was meant to be.

    >>> answer_id('{"jsonrpc": "2.0", "id": 3, "result": []}'), answer_id('{"id": "a", "error": {}}')
    (3, 'a')
    >>> answer_id('{"jsonrpc": "2.0", "id": 3, "method": "x"}'), answer_id('{"id": 7, "params": {}}')
    (None, None)
    >>> answer_id('{"id": true, "result": 1}'), answer_id(b"[3]")
    (None, None)
    """
    try:
        answer = msgspec.json.decode(data, type=_Answer)
    except (msgspec.DecodeError, RecursionError):
        return None
    if answer.method is not msgspec.UNSET or answer.id is msgspec.UNSET:
        return None
    if answer.result is msgspec.UNSET and answer.error is msgspec.UNSET:
        return None
    return answer.id


def unreadable_answer(request_id: str | int) -> types.JSONRPCError:
    """What the server hears for a client's answer to its request ``request_id`` that could not be read: an error answer.

    >>> unreadable_answer(4).error.message
    'Invalid Request: the answer could not be read'
    """
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(code=types.INVALID_REQUEST, message="Invalid Request: the answer could not be read"),
    )
