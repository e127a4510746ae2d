"""One Model, many processes: the reference program and the MCP subscription bus on Redis.

Install with ``pip install 'agentfx[redis]'`` (redis-py's asyncio client; the
bus also needs ``agentfx[mcp]``). Several server processes sharing a
namespace share one Model with Elm's single writer kept: Messages go through
a stream, one process at a time holds the writer lease and applies them, and
every process keeps a local copy by tailing the log. It deliberately knows
nothing of contracts or transports: it is a program, and the adapters take
it unchanged. Nothing in agentfx's core imports it. asyncio only.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("redis") is None:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "agentfx.redis needs redis-py, an optional dependency. Install it with: pip install 'agentfx[redis]'"
    )

from ._bus import RedisSubscriptionBus as RedisSubscriptionBus
from ._bus import subscription_bus as subscription_bus
from ._program import DEFAULT_LEASE as DEFAULT_LEASE
from ._program import LOG_BYTES as LOG_BYTES
from ._program import LOG_LENGTH as LOG_LENGTH
from ._program import MAX_PENDING as MAX_PENDING
from ._program import RedisProgram as RedisProgram
from ._program import RedisProgramError as RedisProgramError
from ._program import program as program
from ._program import run_program as run_program

__all__ = (
    "DEFAULT_LEASE",
    "LOG_BYTES",
    "LOG_LENGTH",
    "MAX_PENDING",
    "RedisProgram",
    "RedisProgramError",
    "RedisSubscriptionBus",
    "program",
    "run_program",
    "subscription_bus",
)
