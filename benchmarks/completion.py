"""Completion at scale: many concurrent invocations of one capability, waiting for their results.

``N`` invocations of ``start_job`` are dispatched concurrently; each declares
a Message completion (``JobDone`` with the same ``id``). Once every one of them
is pending, the host emits all ``N`` results to its observers in a random
order, and the clock stops when the last invocation has settled. Two ways of
matching a result to its invocation are timed:

- ``correlate=lambda request, result, call: ...``: every result is offered to
  every invocation still pending, so one result costs O(pending);
- ``correlate_key=(request_key, result_key)``: a dictionary lookup per result.

Time is reported per settled invocation, as a multiple of the same mode at
``N = 1``; memory is the tracemalloc peak per pending invocation, as a
multiple of a bare anyio task waiting on an event (the least a pending
coroutine can cost).

This module deliberately knows nothing of transports or audit: a minimal host
routes results to observers and keeps only the ids it must answer.
"""

from __future__ import annotations

import gc
import random
import time
import tracemalloc
from collections.abc import Callable, Hashable
from typing import Any, Literal

import anyio
import msgspec

import agentfx

from .harness import Config, Row, row

__all__ = ["MEMORY_TARGET", "SCALE_TARGET", "completion_at_scale"]

SCALE_TARGET = 2.0
"""Keyed completion per invocation at the largest ``N`` may cost at most this multiple of ``N = 1``."""

MEMORY_TARGET = 1.5
"""Peak bytes per pending invocation, as a multiple of a bare anyio task waiting on an event."""

Mode = Literal["keyed", "correlate"]
"""How results are matched; the timing loop also runs ``"bare"``: anyio tasks with no agentfx at all."""


class Model(msgspec.Struct, frozen=True):
    pass


class StartJob(msgspec.Struct, frozen=True, tag=True):
    id: int


class JobDone(msgspec.Struct, frozen=True, tag=True):
    id: int


JobMessage = StartJob | JobDone

Jobs = agentfx.for_model(Model)


def _contract(mode: Mode) -> agentfx.Definition[Model, Any]:
    completion: agentfx.Completion[StartJob, JobDone]
    if mode == "keyed":
        completion = agentfx.Completion(success=JobDone, correlate_key=(_request_key, _result_key), timeout=600)
    else:
        completion = agentfx.Completion(success=JobDone, correlate=_correlate, timeout=600)
    return Jobs.define(Jobs.expose(JobMessage, Jobs.variant(StartJob, "Start a job", completion=completion)))


def _request_key(request: StartJob, call: agentfx.CallInfo) -> Hashable:
    return request.id


def _result_key(result: JobDone) -> Hashable:
    return result.id


def _correlate(request: StartJob, result: JobDone, call: agentfx.CallInfo) -> bool:
    return result.id == request.id


class JobHost:
    """Keeps the ids it was sent until :meth:`finish`, and calls ``ready`` when it has ``expected`` of them."""

    def __init__(self) -> None:
        self._model = Model()
        self._observers: dict[int, Callable[[JobMessage], None]] = {}
        self._next = 0
        self.ids: list[int] = []
        self.expected = 0
        self.ready: anyio.Event = anyio.Event()

    def reset(self, expected: int) -> None:
        self.ids = []
        self.expected = expected
        self.ready = anyio.Event()

    def model(self) -> Model:
        return self._model

    def dispatch(self, message: JobMessage) -> None:
        assert isinstance(message, StartJob)
        self.ids.append(message.id)
        if len(self.ids) == self.expected:
            self.ready.set()

    def observe(self, listener: Callable[[JobMessage], None]) -> Callable[[], None]:
        key = self._next
        self._next += 1
        self._observers[key] = listener

        def unsubscribe() -> None:
            self._observers.pop(key, None)

        return unsubscribe

    def finish(self, rng: random.Random) -> None:
        """Emit every result, in a random order."""
        ids = self.ids
        rng.shuffle(ids)
        for job in ids:
            done = JobDone(job)
            for listener in tuple(self._observers.values()):
                listener(done)

    @property
    def host(self) -> agentfx.Host[Model, JobMessage, Any]:
        return agentfx.Host(model=self.model, dispatch=self.dispatch, observe=self.observe)


async def _settle(runtime: agentfx.AgentRuntime[Model, Any], jobs: JobHost, n: int, rng: random.Random) -> int:
    """Run ``n`` concurrent invocations to completion; the number that completed."""
    payloads: list[dict[str, object]] = [{"id": i} for i in range(n)]
    completed = 0
    jobs.reset(n)

    async def invoke(payload: dict[str, object]) -> None:
        nonlocal completed
        result = await runtime.messages.call(StartJob, payload)
        if result.completion is not None and result.completion.status == "completed":
            completed += 1

    async with anyio.create_task_group() as group:
        for payload in payloads:
            group.start_soon(invoke, payload)
        # Every invocation registers and is sent before it suspends, so once the
        # host has all n the last one is waiting too when this task runs again.
        await jobs.ready.wait()
        jobs.finish(rng)
    return completed


async def _time_per_invocation(mode: Mode, n: int, reps: int, rng: random.Random) -> float:
    jobs = JobHost()
    runtime = agentfx.bind(_contract(mode), host=jobs.host)
    gc.collect()
    started = time.process_time_ns()
    for _ in range(reps):
        if await _settle(runtime, jobs, n, rng) != n:
            raise AssertionError(f"{mode}: not every invocation of {n} completed")
    return (time.process_time_ns() - started) / (reps * n) / 1_000


async def _bare_waiters(events: list[anyio.Event], when_all_wait: Callable[[], None]) -> None:
    """One anyio task per event, each waiting on its own; ``when_all_wait`` runs, then all are set."""
    ready = anyio.Event()
    waiting = 0

    async def wait(event: anyio.Event) -> None:
        nonlocal waiting
        waiting += 1
        if waiting == len(events):
            ready.set()
        await event.wait()

    async with anyio.create_task_group() as group:
        for event in events:
            group.start_soon(wait, event)
        await ready.wait()
        when_all_wait()
        for event in events:
            event.set()


async def _bare_round(n: int, rng: random.Random) -> None:
    events = [anyio.Event() for _ in range(n)]
    await _bare_waiters(events, lambda: rng.shuffle(events))


async def _time_bare(n: int, reps: int, rng: random.Random) -> float:
    """Microseconds per anyio task that waits on its own event, set in random order."""
    gc.collect()
    started = time.process_time_ns()
    for _ in range(reps):
        await _bare_round(n, rng)
    return (time.process_time_ns() - started) / (reps * n) / 1_000


async def _bare_memory(n: int) -> float:
    """Bytes per anyio task waiting on its own event: the floor for a pending invocation."""
    events = [anyio.Event() for _ in range(n)]
    peak = 0

    def measure() -> None:
        nonlocal peak
        peak = tracemalloc.get_traced_memory()[1]

    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        await _bare_waiters(events, measure)
    finally:
        tracemalloc.stop()
    return (peak - before) / n


async def _memory(mode: Mode, n: int, rng: random.Random) -> float:
    """Peak bytes per pending invocation, measured once all ``n`` are pending."""
    jobs = JobHost()
    runtime = agentfx.bind(_contract(mode), host=jobs.host)
    await _settle(runtime, jobs, 1, rng)  # first-use set-up is not per invocation
    payloads: list[dict[str, object]] = [{"id": i} for i in range(n)]
    jobs.reset(n)

    async def invoke(payload: dict[str, object]) -> None:
        await runtime.messages.call(StartJob, payload)

    peak = 0
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        async with anyio.create_task_group() as group:
            for payload in payloads:
                group.start_soon(invoke, payload)
            await jobs.ready.wait()
            peak = tracemalloc.get_traced_memory()[1]
            jobs.finish(rng)
    finally:
        tracemalloc.stop()
    return (peak - before) / n


async def completion_at_scale(config: Config) -> list[Row]:
    """Per-invocation time and memory of ``N`` concurrent pending invocations."""
    rng = random.Random(20_251_130)
    scale = config.scale
    largest = scale[-1]
    scenario = "completion at scale"
    rows: list[Row] = []
    for mode in ("keyed", "correlate", "bare"):
        sizes = [n for n in scale if n <= config.correlate_max] if mode == "correlate" else list(scale)
        series: dict[int, list[float]] = {n: [] for n in sizes}
        # The N = 1 baseline is timed in every round, beside each N, so a pair
        # always shares the machine's state at that moment.
        baseline: dict[int, list[float]] = {n: [] for n in sizes}
        for n in sizes[1:]:
            rounds = config.correlate_rounds_at_max if (mode == "correlate" and n == largest) else config.scale_rounds
            reps = max(1, config.scale_budget // n)
            for _ in range(rounds):
                if mode == "bare":
                    baseline[n].append(await _time_bare(1, config.scale_budget, rng))
                    series[n].append(await _time_bare(n, reps, rng))
                else:
                    baseline[n].append(await _time_per_invocation(mode, 1, config.scale_budget, rng))
                    series[n].append(await _time_per_invocation(mode, n, reps, rng))
            what = "time per anyio task (no agentfx)" if mode == "bare" else "time per invocation"
            target = SCALE_TARGET if (mode == "keyed" and n == largest) else None
            rows.append(row(scenario, f"{mode}, N={n:,}: {what}", f"{mode}, N=1", series[n], baseline[n], target=target))
    bare = [await _bare_memory(largest)]
    for mode in ("keyed", "correlate"):
        per_pending = [await _memory(mode, largest, rng)]
        rows.append(
            row(
                scenario,
                f"{mode}, N={largest:,}: peak bytes per pending invocation",
                "bare anyio task waiting on an Event",
                per_pending,
                bare,
                unit="B",
                target=MEMORY_TARGET,
            )
        )
        added = [per_pending[0] - bare[0]]
        rows.append(
            row(
                scenario,
                f"{mode}, N={largest:,}: bytes agentfx adds per pending invocation",
                "bare anyio task waiting on an Event",
                added,
                bare,
                unit="B",
            )
        )
    return rows
