"""agentfx serve against the MCP SDK's ``MCPServer`` (and FastMCP 4) as real server processes.

Every contender serves the same tool (:mod:`benchmarks.served`) in its own
process and is driven by the same thin client (:mod:`benchmarks.wire`); every
figure is a ratio against ``MCPServer`` (mcp 2.3) in the same run, over
paired rounds whose order rotates. Times are wall-clock per call, as the
servers run in other processes; a ratio below 1 is faster than ``MCPServer``.

- ``stdio``: sequential calls, and a window of requests in flight;
- ``http``: 1, 16 and 64 concurrent clients, each with its own session;
  resident memory per open session (the server's RSS growth while sessions
  open, per session); and one client's calls with 500 idle sessions open
  against the same server with none (a cost per call that grows with idle
  sessions is a scaling defect); and the same once every one of those sessions
  has listed tools and a few hold a GET stream (every call changes the Model:
  its cost must follow the sessions that listen, not the ones that listed);
- ``cold start``: process spawn to the answer of the first ``tools/list``
  over stdio.

FastMCP 4 joins when it is installed (it installs beside mcp 2.3; its figures
are informational). This module deliberately knows nothing of agentfx's
internals: it measures processes from the outside.
"""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack

import anyio

from .harness import Config, Measure, Row, column, compare_measured, row
from .wire import CONTENDERS, HttpClient, ServerProcess, StdioClient, cpu_ns, open_sessions, rss_bytes, spawn

__all__ = ["IDLE_TARGET", "SERVED_TARGET", "cold_start", "contenders", "http_peers", "stdio_peers"]

SERVED_TARGET = 1.0
"""agentfx serve's time per call may be at most this multiple of ``MCPServer``'s."""

IDLE_TARGET = 1 / 0.95
"""Time per call with the idle sessions open, as a multiple of none: throughput ≥ 0.95×."""

_AGENTFX, _MCPSERVER, _FASTMCP = CONTENDERS
_WARM_SESSIONS = 8
_LISTENING = 4
"""Of the idle sessions, how many hold a GET stream in the listening row."""


_CONCURRENT_BATCH = 8
"""With concurrent HTTP clients, a timed batch holds this many times ``served_calls`` calls in all.

One client process drives every concurrent client, and it and the server
share this machine's cores: a batch of a couple of hundred calls lasted a
fraction of a second at 64 clients, short enough for a round to swing by 3×
on how the two processes happened to be scheduled. About 800 calls per
batch keep each round's ratio within a few percent.
"""


def contenders() -> tuple[str, ...]:
    """The contenders this environment can run (FastMCP 4 only when installed)."""
    if importlib.util.find_spec("fastmcp") is None:
        return (_AGENTFX, _MCPSERVER)
    return CONTENDERS


def _label(contender: str) -> str:
    return "MCPServer (mcp 2.3)" if contender == _MCPSERVER else contender


def _peer_rows(
    scenario: str,
    what: str,
    series: dict[str, list[float]],
    names: Sequence[str],
    *,
    unit: str = "us",
    target: float | None = SERVED_TARGET,
) -> list[Row]:
    """agentfx's row (with its target) and FastMCP's, each against MCPServer's series."""
    base = series[_MCPSERVER]
    rows: list[Row] = []
    for name in names:
        if name == _MCPSERVER:
            continue
        limit = target if name == _AGENTFX else None
        rows.append(row(scenario, f"{name}, {what}", f"{_label(_MCPSERVER)}, {what}", series[name], base, unit=unit, target=limit))
    return rows


async def _timed(pid: int, calls: int, work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    """Wall-clock and server CPU microseconds per call of one batch."""
    cpu = cpu_ns(pid)
    started = time.perf_counter_ns()
    await work()
    wall = time.perf_counter_ns() - started
    return wall / calls / 1_000, (cpu_ns(pid) - cpu) / calls / 1_000


def _served_rows(scenario: str, what: str, series: dict[str, list[tuple[float, ...]]], names: Sequence[str]) -> list[Row]:
    """The wall-clock rows (agentfx's with its target), then the server CPU rows (informational)."""
    return [
        *_peer_rows(scenario, f"{what}: time per call", column(series, 0), names),
        *_peer_rows(scenario, f"{what}: server CPU per call", column(series, 1), names, target=None),
    ]


def _stdio_batch(pid: int, client: StdioClient, workers: int, per_worker: int) -> Measure:
    async def batch() -> None:
        async def worker() -> None:
            for _ in range(per_worker):
                await client.call()

        async with anyio.create_task_group() as group:
            for _ in range(workers):
                group.start_soon(worker)

    return lambda: _timed(pid, workers * per_worker, batch)


def _http_batch(pid: int, client: HttpClient, sessions: Sequence[str], per_client: int) -> Measure:
    async def batch() -> None:
        async def worker(session: str) -> None:
            for _ in range(per_client):
                await client.call(session)

        async with anyio.create_task_group() as group:
            for session in sessions:
                group.start_soon(worker, session)

    return lambda: _timed(pid, len(sessions) * per_client, batch)


async def _spawn_all(stack: AsyncExitStack, names: Sequence[str], transport: str) -> dict[str, ServerProcess]:
    # Entered one after another (the processes start at once; only waiting
    # for them is sequential), and left in reverse, all stopped on any exit.
    return {name: await stack.enter_async_context(spawn(name, transport)) for name in names}


async def stdio_peers(config: Config) -> list[Row]:
    """``tools/call`` over stdio, sequential and with requests in flight, against ``MCPServer``."""
    names = contenders()
    in_flight = config.concurrency[0]
    async with AsyncExitStack() as stack:
        servers = await _spawn_all(stack, names, "stdio")
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)
        clients = {name: StdioClient(server, group) for name, server in servers.items()}
        for client in clients.values():
            await client.initialize()
        rows: list[Row] = []
        for workers, what in ((1, "sequential"), (in_flight, f"{in_flight} requests in flight")):
            per_worker = max(2, config.served_calls * 2 // workers)
            ops = {name: _stdio_batch(servers[name].pid, client, workers, per_worker) for name, client in clients.items()}
            series = await compare_measured(ops, rounds=config.served_rounds)
            rows.extend(_served_rows("stdio peers", what, series, names))
    return rows


async def http_peers(config: Config) -> list[Row]:
    """Streamable HTTP: concurrent clients, RSS per open session, and calls beside idle sessions."""
    names = contenders()
    levels = (1, *config.concurrency)
    most = max(levels)
    async with AsyncExitStack() as stack:
        # Per contender: one server for the concurrent clients, one with a
        # single session (the baseline for idle sessions, and c = 1), one that
        # collects the idle sessions (and whose RSS is measured as they open).
        # The smoke run only checks the paths, so one server per contender
        # plays every role there.
        busy = await _spawn_all(stack, names, "http")
        full = config.mode == "full"
        fresh = await _spawn_all(stack, names, "http") if full else busy
        idle = await _spawn_all(stack, names, "http") if full else busy
        clients: dict[tuple[str, str], HttpClient] = {}
        for role, servers in (("busy", busy), ("fresh", fresh), ("idle", idle)):
            for name, server in servers.items():
                # Room for the GET streams some sessions hold open besides the calls.
                client = HttpClient(await server.listening(), most + _LISTENING)
                stack.push_async_callback(client.aclose)
                clients[role, name] = client
        sessions = {key: await open_sessions(client, most if key[0] == "busy" else 1) for key, client in clients.items()}
        rows: list[Row] = []
        for clients_n in levels:
            per_client = max(2, _CONCURRENT_BATCH * config.served_calls // clients_n) if clients_n > 1 else config.served_calls
            role, servers = ("fresh", fresh) if clients_n == 1 else ("busy", busy)
            ops = {
                name: _http_batch(servers[name].pid, clients[role, name], sessions[role, name][:clients_n], per_client)
                for name in names
            }
            series = await compare_measured(ops, rounds=config.served_rounds)
            what = "1 client" if clients_n == 1 else f"{clients_n} concurrent clients"
            rows.extend(_served_rows("HTTP peers", what, series, names))
        opened: dict[str, list[str]] = {name: [] for name in names}
        rows.extend(await _session_memory(config, names, idle, {name: clients["idle", name] for name in names}, opened))
        rows.extend(await _beside(config, names, fresh, idle, clients, sessions, "idle sessions"))
        # The same sessions, now as a client keeps them: each has listed
        # tools, a few hold a GET stream (the one calling is not among them).
        for name in names:
            await _each(clients["idle", name].list_tools, [*sessions["idle", name], *opened[name]])
        listening = {name: opened[name][:_LISTENING] for name in names}
        for name in names:
            for session in listening[name]:
                await stack.enter_async_context(clients["idle", name].listening(session))
        what = f"listed sessions ({len(listening[_AGENTFX])} with a GET stream)"
        rows.extend(await _beside(config, names, fresh, idle, clients, sessions, what))
    return rows


async def _each(step: Callable[[str], Awaitable[None]], sessions: Sequence[str], *, concurrency: int = 8) -> None:
    """``step(session)`` for every session, ``concurrency`` at a time."""
    limiter = anyio.Semaphore(concurrency)

    async def one(session: str) -> None:
        async with limiter:
            await step(session)

    async with anyio.create_task_group() as group:
        for session in sessions:
            group.start_soon(one, session)


async def _beside(
    config: Config,
    names: Sequence[str],
    fresh: dict[str, ServerProcess],
    idle: dict[str, ServerProcess],
    clients: dict[tuple[str, str], HttpClient],
    sessions: dict[tuple[str, str], list[str]],
    what: str,
) -> list[Row]:
    """One client's calls beside the idle server's other sessions, against a server with none."""
    ops: dict[str, Measure] = {}
    for name in names:
        none, beside = fresh[name].pid, idle[name].pid
        ops[f"{name} none"] = _http_batch(none, clients["fresh", name], sessions["fresh", name], config.served_calls)
        ops[f"{name} idle"] = _http_batch(beside, clients["idle", name], sessions["idle", name][:1], config.served_calls)
    series = await compare_measured(ops, rounds=config.served_rounds)
    rows: list[Row] = []
    for index, figure in ((0, "time per call"), (1, "server CPU per call")):
        figures = column(series, index)
        for name in names:
            rows.append(
                row(
                    "HTTP peers",
                    f"{name}, 1 client beside {config.idle_sessions:,} {what}: {figure}",
                    f"{name}, 1 client, no idle session",
                    figures[f"{name} idle"],
                    figures[f"{name} none"],
                    target=IDLE_TARGET if name == _AGENTFX and index == 0 else None,
                )
            )
    return rows


async def _session_memory(
    config: Config,
    names: Sequence[str],
    servers: dict[str, ServerProcess],
    clients: dict[str, HttpClient],
    opened: dict[str, list[str]],
) -> list[Row]:
    """RSS growth per opened session, in paired rounds, leaving the idle sessions open (their ids added to ``opened``)."""
    for name in names:
        # First-use allocations (imports, caches, pools) are no session's cost.
        opened[name] += await open_sessions(clients[name], _WARM_SESSIONS if config.mode == "full" else 1)
    rounds = max(1, config.idle_sessions // config.session_batch)
    series: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in [*names[shift:], *names[:shift]]:
            before = rss_bytes(servers[name].pid)
            opened[name] += await open_sessions(clients[name], config.session_batch)
            series[name].append((rss_bytes(servers[name].pid) - before) / config.session_batch)
    # The figure is a ratio of per-session growth; a round in which a
    # contender's RSS did not grow (its heap had room) would divide by zero.
    floor = 1.0
    series = {name: [max(floor, value) for value in values] for name, values in series.items()}
    return _peer_rows("HTTP peers", "RSS per open session", series, names, unit="B")


async def cold_start(config: Config) -> list[Row]:
    """Process spawn to the first ``tools/list`` answer over stdio, against ``MCPServer``."""
    names = contenders()

    def measure(name: str) -> Measure:
        async def once() -> tuple[float]:
            elapsed = 0.0
            started = time.perf_counter_ns()
            async with spawn(name, "stdio") as server, anyio.create_task_group() as group:
                client = StdioClient(server, group)
                await client.initialize()
                tools = await client.request("tools/list", {})
                if [tool["name"] for tool in tools["tools"]] != ["create_todo"]:
                    raise AssertionError(f"{name} lists {tools!r}")
                elapsed = (time.perf_counter_ns() - started) / 1_000_000
                group.cancel_scope.cancel()
            return (elapsed,)

        return once

    # The untimed first spawns warm the page cache for the timed ones; the
    # smoke run only checks the path.
    series = await compare_measured(
        {name: measure(name) for name in names}, rounds=config.cold_rounds, warm_up=config.mode == "full"
    )
    return _peer_rows("cold start", "spawn to first tools/list (stdio)", column(series, 0), names, unit="ms", target=None)
