"""What the agent-framework adapters share: the install hint, one call through the runtime, tool metadata.

``agentfx.anthropic``, ``agentfx.openai_agents``, ``agentfx.pydantic_ai`` and
``agentfx.langchain`` each translate a :class:`~agentfx.tools.ToolView` and a
:class:`~agentfx.tools.ToolReply` into their framework's types. The steps that
are the same in all of them live here once: naming the extra when the
framework is not installed, running one call so that it never raises (a
defect is logged on the adapter's own logger and answered with
:func:`~agentfx.tools.defect_reply`), the invocation id that keeps the
framework's call id visible, and the metadata a framework keeps beside a tool.

Private and core-side: it imports no framework and no adapter, and
deliberately knows nothing of any framework's exceptions or result types;
which exception a refusal becomes, and where the reply's data goes, stays
with each adapter.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from .errors import is_failure
from .invocation import Invocation, new_invocation_id
from .tools import ToolReply, ToolView, defect_reply, reply

if TYPE_CHECKING:
    from .errors import DispatchError
    from .runtime import AgentRuntime

__all__ = ["call_invocation_id", "missing_framework", "run_call", "tool_metadata"]


def missing_framework(
    missing: ImportError, *, adapter: str, needs: str, extra: str, packages: frozenset[str]
) -> NoReturn:
    """Raise what an adapter's failed framework import should: the install hint, or the error itself.

    Call it from the ``except ImportError`` around the adapter's framework
    imports. Only a framework that is absent gets the hint; one that is
    installed but broken keeps its own error, which says more than a hint would.

    Args:
        missing: The error the framework import raised.
        adapter: The adapter's module, as the hint names it.
        needs: What to install, in words (``"the Anthropic SDK"``).
        extra: The agentfx extra that installs it.
        packages: The top-level packages whose absence means "not installed".

    >>> missing_framework(ModuleNotFoundError("no", name="anthropic.types"), adapter="agentfx.anthropic",
    ...                   needs="the Anthropic SDK", extra="anthropic", packages=frozenset({"anthropic"}))
    Traceback (most recent call last):
    ImportError: agentfx.anthropic needs the Anthropic SDK, an optional dependency. Install it with: pip install 'agentfx[anthropic]'
    """
    if not isinstance(missing, ModuleNotFoundError) or (missing.name or "").partition(".")[0] not in packages:
        raise missing
    raise ImportError(
        f"{adapter} needs {needs}, an optional dependency. Install it with: pip install 'agentfx[{extra}]'"
    ) from missing


def call_invocation_id(call_id: str | None) -> str:
    """A fresh invocation id per call, with the framework's call id (when it has one) kept visible.

    A model may reuse a call id (a resumed, approved call does), so the id is
    always fresh; the call id after the slash matches the audit with the
    conversation.

    >>> call_invocation_id("toolu_1").endswith("/toolu_1"), "/" in call_invocation_id(None)
    (True, False)
    """
    fresh = new_invocation_id()
    return fresh if call_id is None else f"{fresh}/{call_id}"


async def run_call(
    runtime: AgentRuntime[Any, Any], name: str, payload: object, invocation: Invocation, logger: logging.Logger
) -> tuple[ToolReply, DispatchError | None]:
    """Dispatch one call and answer it; never raises an ``Exception``.

    Every framework either aborts its run or shows the model an exception's
    text when a tool raises, so a defect (a hook or the host raised) is logged
    on ``logger`` and answered with :func:`~agentfx.tools.defect_reply`.

    Returns:
        The reply, and the failure value when the runtime refused the call
        (``None`` for a dispatch that reached update, and for a defect).

    >>> import anyio, logging, msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> runtime = agentfx.bind(
    ...     agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping the app"))),
    ...     host=agentfx.Host(model=lambda: None, dispatch=lambda message: None),
    ... )
    >>> answer, failure = anyio.run(run_call, runtime, "ping", {}, agentfx.Invocation(), logging.getLogger("x"))
    >>> answer.text, failure
    ('Dispatched Ping', None)
    """
    try:
        outcome = await runtime.messages.attempt(name, payload, invocation)
        return reply(outcome), outcome if is_failure(outcome) else None
    except Exception:
        logger.exception("capability %r failed unexpectedly", name)
        return defect_reply(name), None


def tool_metadata(view: ToolView) -> dict[str, Any]:
    """What a framework keeps beside a tool and never sends a model: the output schema, title and hints.

    >>> from agentfx.hints import Hints
    >>> view = ToolView("ping", "Ping", "Ping the app", {}, {"type": "object"}, Hints(read_only=True))
    >>> tool_metadata(view)
    {'output_schema': {'type': 'object'}, 'title': 'Ping', 'hints': {'read_only': True}}
    """
    metadata: dict[str, Any] = {"output_schema": view.output_schema}
    if view.title is not None:
        metadata["title"] = view.title
    if view.hints is not None:
        # Only what the capability said: ``None`` is unsaid, not "no".
        metadata["hints"] = {k: v for k, v in msgspec.structs.asdict(view.hints).items() if v is not None}
    return metadata
