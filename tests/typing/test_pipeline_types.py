"""A pipeline composed from the public steps with ``agentfx.pipeline.bind`` is fully typed.

Checked by pyright in strict mode with the rest of ``tests`` (a partially
unknown member or variable is an error there), and run under pytest: the
composition in the module's docstring gives what :func:`pipeline.dispatch` gives.
"""

from __future__ import annotations

from typing import Any, assert_type

import pytest
from returns.io import IOFailure, IOSuccess

import agentfx
from agentfx import pipeline as p
from agentfx._returns import bind as typed_bind
from tests.support import AppAgent, Model, ReceivedTodos, recorder

pytestmark = pytest.mark.anyio


def my_dispatch() -> p.Step[p.DispatchResult]:
    step = p.bind(p.bind(p.resolve(), p.check_not_aborted), p.snapshot)
    decoded = p.bind(p.bind(step, p.check_available), p.decode)
    decoded = p.bind(p.bind(decoded, p.resolve_principal), p.authorize)
    decoded = p.bind(decoded, p.check_still_not_aborted)
    return p.bind(p.bind(decoded, p.construct), p.send)


def probe() -> p.Step[Any]:
    resolved = p.bind(p.resolve(), p.check_not_aborted)
    assert_type(resolved, p.Step[agentfx.Capability[Any, Any]])
    return p.bind(p.bind(resolved, p.snapshot), p.check_available)


def _env(runtime: agentfx.AgentRuntime[Any, Any], target: object, payload: object) -> p.InvocationEnv[Any, Any]:
    bound = runtime._executor.bound  # pyright: ignore[reportPrivateUsage]
    return p.InvocationEnv(bound, target, payload, agentfx.Invocation(id="call-1"))


def test_bind_is_public_and_the_typed_one() -> None:
    assert "bind" in p.__all__
    assert p.bind is typed_bind


async def test_the_documented_composition_runs_as_dispatch_does() -> None:
    for target in ("delete_selected_todo", ReceivedTodos):
        mine, theirs = recorder(), recorder()
        ours = await my_dispatch()(_env(agentfx.bind(AppAgent, host=mine.host), target, {}))
        reference = await p.dispatch()(_env(agentfx.bind(AppAgent, host=theirs.host), target, {}))
        assert ours == reference
        assert mine.dispatched == theirs.dispatched


async def test_a_probe_that_never_sends() -> None:
    rec = recorder(Model())
    runtime = agentfx.bind(AppAgent, host=rec.host)
    refused = await probe()(_env(runtime, "delete_selected_todo", {}))
    assert isinstance(refused, IOFailure)
    assert isinstance(await probe()(_env(runtime, "cleared_selection", {})), IOSuccess)
    assert rec.dispatched == []
