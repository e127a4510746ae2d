"""What the MCP tests send and read: hand-built JSON-RPC requests and the text of tool results.

Shared by the in-process adapter tests and the stdio and HTTP integration tests;
it knows the protocol's shapes, not any transport or the application served.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
"""A raw client's first request: the session-based 2025-11-25 handshake."""


def text(result: types.CallToolResult) -> str:
    """The text blocks of a tool result, joined."""
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def call(request_id: int, name: str, arguments: object) -> dict[str, Any]:
    """A raw ``tools/call`` request; ``arguments`` may be anything, to test what the server refuses."""
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def nested(depth: int) -> object:
    """``"leaf"`` inside ``depth`` lists: a payload deeper than a decoder may be willing to go."""
    value: object = "leaf"
    for _ in range(depth):
        value = [value]
    return value


async def tools_changed(notifications: list[object]) -> None:
    """Wait (boundedly) until a ``tools/list_changed`` notification is among ``notifications``."""
    with anyio.fail_after(5):
        while not any(isinstance(m, types.ToolListChangedNotification) for m in notifications):
            await anyio.sleep(0.02)
