"""The A2A adapter: a contract as an A2A agent, on the official ``a2a-sdk`` (protocol 1.0, with 0.3).

Install with ``pip install 'agentfx[a2a]'``. :func:`agent_card` describes a
contract as an ``AgentCard`` (one skill per capability), :class:`AgentfxExecutor`
runs each A2A task as one capability call, and :func:`a2a_app` serves both
over HTTP from the SDK's own routes and request handler, keeping tasks in a
:class:`BoundedTaskStore` (the SDK's in-memory store, bounded in tasks, bytes
and tasks in progress per caller). What an
agent reads (the reply text and data) is :mod:`agentfx.tools`' as for every
adapter; nothing in agentfx's core imports this package.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("a2a") is None:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "agentfx.a2a needs the A2A SDK, an optional dependency. Install it with: pip install 'agentfx[a2a]'"
    )

from ._app import A2A_PATH as A2A_PATH
from ._app import AUTHENTICATE_TIMEOUT as AUTHENTICATE_TIMEOUT
from ._app import CARD_PATH as CARD_PATH
from ._app import MAX_PRINCIPALS as MAX_PRINCIPALS
from ._app import PARKED_TASK_TIMEOUT as PARKED_TASK_TIMEOUT
from ._app import PRINCIPALS_AT_CAPACITY as PRINCIPALS_AT_CAPACITY
from ._store import MAX_LIVE_TASK_BYTES_PER_OWNER as MAX_LIVE_TASK_BYTES_PER_OWNER
from ._store import MAX_LIVE_TASKS_PER_OWNER as MAX_LIVE_TASKS_PER_OWNER
from ._store import MAX_TASK_BYTES as MAX_TASK_BYTES
from ._store import MAX_TASKS as MAX_TASKS
from ._store import BoundedTaskStore as BoundedTaskStore
from ._app import a2a_app as a2a_app
from ._card import SKILL_INPUT_SCHEMA_EXTENSION as SKILL_INPUT_SCHEMA_EXTENSION
from ._card import agent_card as agent_card
from ._card import card_json as card_json
from ._executor import MAX_CONFIRM_REASKS as MAX_CONFIRM_REASKS
from ._executor import NOT_WAITING as NOT_WAITING
from ._executor import PRINCIPAL_STATE_KEY as PRINCIPAL_STATE_KEY
from ._executor import TRANSPORT as TRANSPORT
from ._executor import AgentfxExecutor as AgentfxExecutor

__all__ = (
    "A2A_PATH",
    "AUTHENTICATE_TIMEOUT",
    "AgentfxExecutor",
    "BoundedTaskStore",
    "CARD_PATH",
    "MAX_CONFIRM_REASKS",
    "MAX_LIVE_TASKS_PER_OWNER",
    "MAX_LIVE_TASK_BYTES_PER_OWNER",
    "MAX_PRINCIPALS",
    "MAX_TASKS",
    "MAX_TASK_BYTES",
    "NOT_WAITING",
    "PARKED_TASK_TIMEOUT",
    "PRINCIPALS_AT_CAPACITY",
    "PRINCIPAL_STATE_KEY",
    "SKILL_INPUT_SCHEMA_EXTENSION",
    "TRANSPORT",
    "a2a_app",
    "agent_card",
    "card_json",
)
