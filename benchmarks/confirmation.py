"""Human confirmation at step 7, against the same capability authorized outright.

Two bindings of the benchmark app's ``create_todo``: one whose ``authorize``
answers ``True``, one whose ``authorize`` answers ``Confirm``. The baseline is
the first one's success path for the second one confirmed out of band, and
asked and approved (a ``confirm`` that answers at once); the refusals
(declined, no way to ask) are held to the asked-and-approved dispatch. Asking
a person costs what the person costs: agentfx's own share, measured here,
should be small, and a refusal should never cost more than a dispatch.

This module deliberately knows nothing of transports: it calls the runtime in
process; what an MCP client adds is the ``mcp`` scenario's business.
"""

from __future__ import annotations

from collections.abc import Callable

from returns.future import FutureResult
from returns.io import IOFailure, IOSuccess
from returns.unsafe import unsafe_perform_io

import agentfx
from agentfx import Invocation

from .app import Agent, CreateTodo, KeepNothingHost, Model, User, is_open, may_write
from .harness import AsyncOp, Config, Row, compare_async, row

__all__ = ["CONFIRMED_TARGET", "confirmation_paths"]

CONFIRMED_TARGET = 1.25
"""A confirmed or approved call may cost at most this many times the same call authorized outright."""

_PAYLOAD: dict[str, object] = {"title": "Buy milk", "priority": 2}
_BASE = "authorized outright"
_APPROVED = "Confirm, asked and approved"


def _confirming() -> agentfx.Definition[Model, User]:
    def ask(request: agentfx.AuthorizationRequest[User, CreateTodo, Model]) -> bool | agentfx.Confirm:
        return agentfx.Confirm("Create it?") if may_write(request.principal) else False

    return Agent.define(
        Agent.expose(
            CreateTodo,
            Agent.variant(
                CreateTodo, "Create a todo", name="create_todo", available=is_open, authorize=ask, may_confirm=True
            ),
        )
    )


async def _approve(request: agentfx.ConfirmationRequest) -> bool:
    return True


async def _decline(request: agentfx.ConfirmationRequest) -> bool:
    return False


async def confirmation_paths(config: Config) -> list[Row]:
    """Each way step 7 can end for a ``Confirm`` answer, as a multiple of an outright yes."""
    from .app import CONTRACT

    host = KeepNothingHost(Model(), User("u1"))
    outright = agentfx.bind(CONTRACT, host=host.host)
    confirming = agentfx.bind(_confirming(), host=host.host)
    payload = _PAYLOAD
    confirmed = Invocation(confirmed=True)
    approving = Invocation(confirm=_approve)
    declining = Invocation(confirm=_decline)
    calls: dict[str, Callable[[], FutureResult[agentfx.DispatchResult, agentfx.DispatchError]]] = {
        _BASE: lambda: outright.messages.dispatch(CreateTodo, payload),
        "Confirm, confirmed out of band": lambda: confirming.messages.dispatch(CreateTodo, payload, confirmed),
        "Confirm, asked and approved": lambda: confirming.messages.dispatch(CreateTodo, payload, approving),
        "Confirm, asked and declined": lambda: confirming.messages.dispatch(CreateTodo, payload, declining),
        "Confirm, nobody to ask": lambda: confirming.messages.dispatch(CreateTodo, payload),
    }
    # Each contender must end the way its name says: a path that failed early would look fast.
    expected: dict[str, type[object] | None] = {
        _BASE: None,
        "Confirm, confirmed out of band": None,
        "Confirm, asked and approved": None,
        "Confirm, asked and declined": agentfx.AgentAuthorizationError,
        "Confirm, nobody to ask": agentfx.AgentConfirmationRequiredError,
    }
    for name, error in expected.items():
        before = host.sent
        outcome = await calls[name]()
        if error is None:
            if not isinstance(outcome, IOSuccess) or host.sent != before + 1:
                raise AssertionError(f"{name} did not dispatch: {outcome!r}")
        elif not (isinstance(outcome, IOFailure) and isinstance(unsafe_perform_io(outcome.failure()), error)):
            raise AssertionError(f"{name} was not refused with {error.__name__}: {outcome!r}")
    ops: dict[str, AsyncOp] = dict(calls)
    series = await compare_async(ops, calls=config.calls, rounds=config.rounds)
    base = series.pop(_BASE)
    approved = series[_APPROVED]
    rows: list[Row] = []
    for name, subject in series.items():
        if expected[name] is None:
            rows.append(row("confirmation", name, _BASE, subject, base, target=CONFIRMED_TARGET))
        else:
            # A refusal is held to the same capability's dispatch, asked the same way.
            rows.append(row("confirmation", name, _APPROVED, subject, approved, target=1.0))
    return rows
