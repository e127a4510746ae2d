"""Timing and bookkeeping shared by every scenario: paired rounds, medians, ratios, targets.

Every figure the suite reports is a ratio against a baseline measured in the
same run. Rounds are *paired*: each round times every contender once, in an
order that rotates from round to round, and the round's ratio divides the
contender by the baseline timed moments before. The reported figure is the
median of those per-round ratios, so a burst of load from anything else on the
machine lands on both sides of a pair and mostly cancels.

This module deliberately knows nothing of agentfx: it times callables.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal

import msgspec

__all__ = [
    "FULL",
    "SMOKE",
    "AsyncOp",
    "Config",
    "Measure",
    "Row",
    "SyncOp",
    "compare_async",
    "compare_measured",
    "compare_sync",
    "column",
    "median_ratio",
    "quartiles",
    "row",
]

AsyncOp = Callable[[], Awaitable[object]]
SyncOp = Callable[[], object]
Measure = Callable[[], Awaitable[tuple[float, ...]]]
"""A batch that measures itself: it returns its own figures (say, wall-clock and server CPU per call)."""


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """How hard each scenario works.

    Attributes:
        mode: ``"full"`` or ``"smoke"``.
        rounds: Paired rounds per comparison.
        calls: Calls per timed batch of a microsecond-scale operation.
        mcp_calls: Calls per timed batch through an in-process MCP client.
        scale: The numbers of concurrent pending invocations for completion at scale.
        scale_budget: Invocations per timed round at each ``N`` (small ``N`` is repeated to reach it).
        scale_rounds: Rounds per ``N`` for completion at scale.
        correlate_max: The largest ``N`` timed with ``correlate`` (it is quadratic in ``N``).
        correlate_rounds_at_max: Rounds at that largest ``N``.
        capabilities: The size of the contract documented by ``to_manifest``.
        served_rounds: Paired rounds per comparison of served (subprocess) contenders.
        served_calls: Calls per timed batch against a served contender with one client; batches
            of concurrent clients or requests in flight hold a multiple of it in all.
        concurrency: The numbers of concurrent clients (HTTP) or requests in flight (stdio).
        idle_sessions: The idle HTTP sessions opened beside the one client calling.
        session_batch: HTTP sessions opened per resident-memory round.
        cold_rounds: Spawns per contender for cold start.
    """

    mode: Literal["full", "smoke"]
    rounds: int
    calls: int
    mcp_calls: int
    scale: tuple[int, ...]
    scale_budget: int
    scale_rounds: int
    correlate_max: int
    correlate_rounds_at_max: int
    capabilities: int
    served_rounds: int
    served_calls: int
    concurrency: tuple[int, ...]
    idle_sessions: int
    session_batch: int
    cold_rounds: int


FULL = Config(
    mode="full",
    rounds=15,
    calls=4000,
    mcp_calls=60,
    scale=(1, 100, 1_000, 10_000),
    scale_budget=4_000,
    scale_rounds=5,
    correlate_max=10_000,
    correlate_rounds_at_max=1,
    capabilities=200,
    served_rounds=7,
    served_calls=100,
    concurrency=(16, 64),
    idle_sessions=500,
    session_batch=100,
    cold_rounds=7,
)

SMOKE = Config(
    mode="smoke",
    rounds=2,
    calls=20,
    mcp_calls=2,
    scale=(1, 10),
    scale_budget=10,
    scale_rounds=2,
    correlate_max=10,
    correlate_rounds_at_max=1,
    capabilities=5,
    served_rounds=2,
    served_calls=3,
    concurrency=(2, 3),
    idle_sessions=4,
    session_batch=2,
    cold_rounds=1,
)


class Row(msgspec.Struct, frozen=True, kw_only=True):
    """One reported figure.

    Attributes:
        scenario: The scenario's name.
        name: What was measured.
        baseline: What it was divided by.
        ratio: The median of the per-round ratios (subject / baseline).
        ratio_iqr: The first and third quartile of those ratios.
        value: The subject's own median, in ``unit``.
        baseline_value: The baseline's own median, in ``unit``.
        unit: ``"us"`` per call or per invocation, ``"ms"`` per process start, or ``"B"`` per pending
            invocation or open session.
        target: The limit a target sets, or ``None`` for an informational row.
        target_on: Whether the limit applies to ``ratio`` or to ``value``.
        verdict: ``"PASS"``/``"MISS"`` against ``target``, ``None`` without one.
        rounds: How many rounds the medians are over.
    """

    scenario: str
    name: str
    baseline: str
    ratio: float
    ratio_iqr: tuple[float, float]
    value: float
    baseline_value: float
    unit: str
    target: float | None = None
    target_on: Literal["ratio", "value"] = "ratio"
    verdict: Literal["PASS", "MISS"] | None = None
    rounds: int = 0


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The first and third quartile (both the value itself for a single one).

    >>> quartiles([1.0, 2.0, 3.0, 4.0])
    (1.75, 3.25)
    >>> quartiles([2.0])
    (2.0, 2.0)
    """
    if len(values) < 2:
        return (values[0], values[0])
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return (q1, q3)


def median_ratio(subject: Sequence[float], baseline: Sequence[float]) -> tuple[float, tuple[float, float]]:
    """The median and quartiles of the per-round ratios of two paired series.

    >>> median_ratio([2.0, 4.0, 9.0], [1.0, 2.0, 3.0])
    (2.0, (2.0, 2.5))
    """
    ratios = [s / b for s, b in zip(subject, baseline, strict=True)]
    return statistics.median(ratios), quartiles(ratios)


def row(
    scenario: str,
    name: str,
    baseline: str,
    subject: Sequence[float],
    reference: Sequence[float],
    *,
    unit: str = "us",
    target: float | None = None,
    target_on: Literal["ratio", "value"] = "ratio",
) -> Row:
    """A :class:`Row` from paired per-round series of the subject and its baseline."""
    ratio, iqr = median_ratio(subject, reference)
    value = statistics.median(subject)
    verdict: Literal["PASS", "MISS"] | None = None
    if target is not None:
        verdict = "PASS" if (ratio if target_on == "ratio" else value) <= target else "MISS"
    return Row(
        scenario=scenario,
        name=name,
        baseline=baseline,
        ratio=ratio,
        ratio_iqr=iqr,
        value=value,
        baseline_value=statistics.median(reference),
        unit=unit,
        target=target,
        target_on=target_on,
        verdict=verdict,
        rounds=len(subject),
    )


async def _batch_async(op: AsyncOp, calls: int) -> float:
    started = time.process_time_ns()
    for _ in range(calls):
        await op()
    return (time.process_time_ns() - started) / calls / 1_000


def _batch_sync(op: SyncOp, calls: int) -> float:
    started = time.process_time_ns()
    for _ in range(calls):
        op()
    return (time.process_time_ns() - started) / calls / 1_000


def _order(names: Sequence[str], round_: int) -> list[str]:
    # Rotating the order spreads whatever the first or last batch of a round
    # pays (a collection, a cold cache) over every contender.
    shift = round_ % len(names)
    return [*names[shift:], *names[:shift]]


async def compare_async(ops: Mapping[str, AsyncOp], *, calls: int, rounds: int) -> dict[str, list[float]]:
    """Time each operation once per round, in rotating order; microseconds per call, per round.

    One untimed batch of each runs first, so lazy set-up is not timed.
    """
    names = list(ops)
    for name in names:
        await _batch_async(ops[name], max(1, calls // 4))
    series: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        # A collection between rounds, never inside one: what a batch allocates
        # and frees is its own cost, what an earlier batch left is not.
        gc.collect()
        for name in _order(names, round_):
            series[name].append(await _batch_async(ops[name], calls))
    return series


def compare_sync(ops: Mapping[str, SyncOp], *, calls: int, rounds: int) -> dict[str, list[float]]:
    """:func:`compare_async` for synchronous operations."""
    names = list(ops)
    for name in names:
        _batch_sync(ops[name], max(1, calls // 4))
    series: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        gc.collect()
        for name in _order(names, round_):
            series[name].append(_batch_sync(ops[name], calls))
    return series


async def compare_measured(
    ops: Mapping[str, Measure], *, rounds: int, warm_up: bool = True
) -> dict[str, list[tuple[float, ...]]]:
    """:func:`compare_async` for batches that measure themselves (across processes).

    A served contender runs in another process, so the client's CPU time says
    nothing of it; each batch measures itself and returns its figures, one
    tuple per round. One unmeasured batch of each runs first unless
    ``warm_up`` is false; rounds rotate as in :func:`compare_async`.
    """
    names = list(ops)
    for name in names if warm_up else ():
        await ops[name]()
    series: dict[str, list[tuple[float, ...]]] = {name: [] for name in names}
    for round_ in range(rounds):
        gc.collect()
        for name in _order(names, round_):
            series[name].append(await ops[name]())
    return series


def column(series: Mapping[str, Sequence[tuple[float, ...]]], index: int) -> dict[str, list[float]]:
    """One figure of every round of :func:`compare_measured`, per contender.

    >>> column({"a": [(1.0, 2.0), (3.0, 4.0)]}, 1)
    {'a': [2.0, 4.0]}
    """
    return {name: [figures[index] for figures in rounds] for name, rounds in series.items()}
