"""The loopback Host and Origin patterns an HTTP server allows when none are listed.

``agentfx.mcp`` (through the MCP SDK's transport security) and ``agentfx.a2a``
(through its own guard) refuse the same requests by default: only a loopback
``Host``, and only a loopback ``Origin``, on any port. The defaults live here
once so that the two servers cannot drift apart.

Private and core-side: it imports no optional dependency and deliberately
knows nothing of how a pattern is matched; each server keeps its own check.
"""

from __future__ import annotations

LOOPBACK_HOSTS = ("127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*")
"""``Host`` patterns allowed by default: loopback names, bare or on any port."""

LOOPBACK_ORIGINS = (
    "http://127.0.0.1",
    "http://127.0.0.1:*",
    "http://localhost",
    "http://localhost:*",
    "http://[::1]",
    "http://[::1]:*",
)
"""``Origin`` patterns allowed by default: loopback origins, bare or on any port."""
