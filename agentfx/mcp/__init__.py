"""The MCP adapter: a bound runtime as an MCP server, in-process, over stdio or Streamable HTTP.

Install with ``pip install 'agentfx[mcp]'``. The adapter puts the contract on
the wire through the official MCP SDK's low-level ``Server``; it deliberately
knows nothing of the pipeline's steps or of audit internals, and nothing in
agentfx's core imports it.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("mcp") is None:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "agentfx.mcp needs the MCP SDK, an optional dependency. Install it with: pip install 'agentfx[mcp]'"
    )

from ._http import AUTHENTICATE_TIMEOUT as AUTHENTICATE_TIMEOUT
from ._http import SESSION_IDLE_TIMEOUT as SESSION_IDLE_TIMEOUT
from ._http import HttpApp as HttpApp
from ._http import http_app as http_app
from ._server import PROGRESS_INTERVAL as PROGRESS_INTERVAL
from ._server import server as server
from ._stdio import serve_stdio as serve_stdio

__all__ = (
    "AUTHENTICATE_TIMEOUT",
    "HttpApp",
    "PROGRESS_INTERVAL",
    "SESSION_IDLE_TIMEOUT",
    "http_app",
    "serve_stdio",
    "server",
)
