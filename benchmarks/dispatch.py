"""Dispatch overhead and refusal paths, against a hand-written floor and the success path.

The *floor* is what an application would write by hand to do the same work
with no library: read the Model, call ``available``, decode the payload with
one ``msgspec.convert``, resolve the principal, call ``authorize``, call the
host. Everything the runtime adds (the capability lookup, the strict closed
decode, the invocation id, the snapshot environment, the outcome values and
the ``returns`` containers) shows as the ratio above 1.

Refusals are timed against the runtime's own success path: a call the runtime
turns away should never cost more than one it carries out.

This module deliberately knows nothing of transports: it calls the runtime in
process.
"""
# pyright: reportPrivateUsage=false
# (these tests and measurements look at internals on purpose)

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from returns.future import FutureResult
from returns.io import IOFailure
from returns.result import Failure, Result, Success
from returns.unsafe import unsafe_perform_io

import agentfx
from agentfx import Invocation
from agentfx._tracing import active_tracer

from .app import CONTRACT, CreateTodo, KeepNothingHost, Model, User, is_open, may_write
from .harness import AsyncOp, Config, Row, compare_async, row

__all__ = ["CALL_TARGET", "DISPATCH_TARGET", "dispatch_overhead", "refusal_paths"]

DISPATCH_TARGET = 1.5
"""``messages.dispatch`` may cost at most this multiple of the floor returning a ``FutureResult``.

That baseline is the least any runtime returning the design's ``FutureResult``
pays: the floor's own work, then ``returns``' containers around it.
"""

CALL_TARGET = 4.0
"""``messages.call`` (no containers) may cost at most this many times the floor."""

_PAYLOAD: dict[str, object] = {"title": "Buy milk", "priority": 2}
_FLOOR = "hand-written floor"


def _floor(host: KeepNothingHost, payload: dict[str, object]) -> Callable[[], Any]:
    invocation = Invocation(id="floor")
    convert = msgspec.convert

    async def floor() -> CreateTodo | None:
        model = host.model()
        if not is_open(model):
            return None
        message = convert(payload, CreateTodo)
        if not may_write(host.principal(invocation)):
            return None
        host.dispatch(message)
        return message

    return floor


async def _check(ops: dict[str, AsyncOp], host: KeepNothingHost) -> None:
    # Each contender must do the real work: a path that failed quickly would
    # look like a fast one.
    for name, op in ops.items():
        before = host.sent
        outcome = await op()
        if host.sent != before + 1 or outcome is None or isinstance(outcome, (IOFailure, Failure)):
            raise AssertionError(f"{name} did not dispatch: {outcome!r}")


async def dispatch_overhead(config: Config) -> list[Row]:
    """Every way of running the success path, as a multiple of the floor."""
    host = KeepNothingHost(Model(), User("u1"))
    if active_tracer() is not None:
        raise AssertionError("a tracer provider is configured; the default rows would include span work")
    plain = agentfx.bind(CONTRACT, host=host.host)
    audited = agentfx.bind(CONTRACT, host=host.host, audit=agentfx.audit_log(principal=lambda user: user.id))
    # With no SDK provider configured, the API hands out a proxy tracer whose spans record nothing.
    api_traced = agentfx.bind(CONTRACT, host=host.host, tracer=trace.get_tracer("benchmarks"))
    sdk_traced = agentfx.bind(CONTRACT, host=host.host, tracer=TracerProvider().get_tracer("benchmarks"))
    payload = _PAYLOAD
    floor = _floor(host, payload)

    async def floor_wrapped() -> object:
        return await FutureResult(_as_result(floor()))

    ops: dict[str, AsyncOp] = {
        _FLOOR: floor,
        "messages.dispatch (FutureResult)": lambda: plain.messages.dispatch(CreateTodo, payload),
        "messages.call (raise-style)": lambda: plain.messages.call(CreateTodo, payload),
        "dispatch, audit_log on": lambda: audited.messages.dispatch(CreateTodo, payload),
        "dispatch, API tracer, no SDK provider": lambda: api_traced.messages.dispatch(CreateTodo, payload),
        "dispatch, SDK tracer, no exporter": lambda: sdk_traced.messages.dispatch(CreateTodo, payload),
        "dispatch, composed RCFR pipeline": lambda: plain._dispatch_composed(CreateTodo, payload),
        "floor + FutureResult wrapping": floor_wrapped,
    }
    await _check(ops, host)
    series = await compare_async(ops, calls=config.calls, rounds=config.rounds)
    base = series.pop(_FLOOR)
    rows: list[Row] = []
    for name, subject in series.items():
        target = CALL_TARGET if name == "messages.call (raise-style)" else None
        rows.append(row("dispatch overhead", name, _FLOOR, subject, base, target=target))
    wrapped = "floor + FutureResult wrapping"
    rows.append(
        row(
            "dispatch overhead",
            "messages.dispatch (FutureResult)",
            wrapped,
            series["messages.dispatch (FutureResult)"],
            series[wrapped],
            target=DISPATCH_TARGET,
        )
    )
    return rows


async def _as_result(work: Any) -> Result[object, object]:
    return Success(await work)


async def refusal_paths(config: Config) -> list[Row]:
    """Each refusal, as a multiple of the success path through the same runtime entry point."""
    host = KeepNothingHost(Model(), User("u1"))
    closed = KeepNothingHost(Model(open=False), User("u1"))
    reader = KeepNothingHost(Model(), User("u2", can_write=False))
    runtime = agentfx.bind(CONTRACT, host=host.host)
    unavailable = agentfx.bind(CONTRACT, host=closed.host)
    unauthorized = agentfx.bind(CONTRACT, host=reader.host)
    payload = _PAYLOAD
    invalid: dict[str, object] = {"title": 3, "priority": 2}
    success = "success: messages.dispatch"
    calls: dict[str, Callable[[], FutureResult[agentfx.DispatchResult, agentfx.DispatchError]]] = {
        success: lambda: runtime.messages.dispatch(CreateTodo, payload),
        "unknown capability": lambda: runtime.messages.dispatch("no_such_capability", payload),
        "unavailable": lambda: unavailable.messages.dispatch(CreateTodo, payload),
        "invalid input": lambda: runtime.messages.dispatch(CreateTodo, invalid),
        "unauthorized": lambda: unauthorized.messages.dispatch(CreateTodo, payload),
    }
    expected: dict[str, type[object]] = {
        "unknown capability": agentfx.AgentUnknownCapabilityError,
        "unavailable": agentfx.AgentCapabilityUnavailableError,
        "invalid input": agentfx.AgentInvalidInputError,
        "unauthorized": agentfx.AgentAuthorizationError,
    }
    for name, error in expected.items():
        outcome = await calls[name]()
        if not (isinstance(outcome, IOFailure) and isinstance(unsafe_perform_io(outcome.failure()), error)):
            raise AssertionError(f"{name} was not refused with {error.__name__}: {outcome!r}")
    ops: dict[str, AsyncOp] = dict(calls)
    series = await compare_async(ops, calls=config.calls, rounds=config.rounds)
    base = series.pop(success)
    return [row("refusal paths", name, success, subject, base, target=1.0) for name, subject in series.items()]
