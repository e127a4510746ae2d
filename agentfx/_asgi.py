"""A request body, already read, handed back to an ASGI app as if it were unread.

``agentfx.mcp`` and ``agentfx.a2a`` both read a request's body before the
SDK does (to bound its size and to inspect it), then pass the SDK a
``receive`` that yields the body once and, after it, the client's own
messages (a disconnect). That one step lives here.

Private and core-side: Starlette's types are named for annotations only, so
importing this module imports no optional dependency; it knows nothing of
either protocol.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Message, Receive


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that yields ``body`` whole once, then defers to ``receive``."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
