"""One Model across processes: agentfx.redis against the in-process program, on wall-clock time.

Two kinds of figure, each a median of paired rounds against a baseline timed
moments before in the same run:

- **Messages through one writer**: a burst of ``Bumped`` Messages sent 64 at
  a time through ``agentfx.redis.run_program`` (this process holds the lease,
  so it both sends and applies) until its copy has applied the last one,
  against the same burst through the in-process ``agentfx.run_program``. Per
  Message: the inbox ``XADD`` (a Lua script), the writer's ``XREAD``, ``update``,
  the apply script (Model, version, applied id, one log entry per Message)
  and the log ``XREAD`` back into the copy.
- **End-to-end tool calls over HTTP**: six ``mcp.Client`` sessions, each
  calling ``bump`` in turn, against ``agentfx serve --transport http``
  processes: one serving the in-process program (the baseline), one with
  ``--redis``, and three with ``--redis`` sharing a namespace, the sessions
  spread across them. Every process, Redis and the clients share the
  machine's cores.

Wall-clock time, not process time: the work happens in other processes
(redis-server, the servers). redis-py's client is asyncio-only, so on another
backend the scenario runs in a thread with an asyncio loop of its own.

This module deliberately knows nothing of agentfx's internals: it uses the
public program, CLI and client.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec

import agentfx

from .harness import Config, Row, row

__all__ = ["APP", "redis_program"]

SCENARIO = "redis program"
ROOT = Path(__file__).resolve().parent.parent
_IN_FLIGHT = 64
_SESSIONS = 6


class Bumped(msgspec.Struct, frozen=True, tag=True):
    """Add ``by`` to the counter."""

    by: int = 1


def _update(count: int, message: Bumped) -> int:
    return count + message.by


APP = agentfx.App(
    agentfx.define(agentfx.expose(Bumped, agentfx.variant(Bumped, "Bump the counter", name="bump"))),
    init=0,
    update=_update,
)
"""Served by the HTTP figures: ``agentfx serve benchmarks.redis_program:APP``."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _redis_server() -> Generator[str]:
    """A throwaway ``redis-server`` on a free loopback port, nothing saved; yields its URL."""
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    with tempfile.TemporaryDirectory(prefix="agentfx-bench-redis-") as directory:
        for _attempt in range(20):
            port = _free_port()
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", directory, "--loglevel", "warning"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and process.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2) as probe:
                        probe.sendall(b"PING\r\n")
                        if probe.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    time.sleep(0.01)
            else:
                process.kill()
                process.wait()
                continue
            try:
                yield f"redis://127.0.0.1:{port}/0"
            finally:
                process.kill()
                process.wait()
            return
    raise RuntimeError("redis-server did not start")


async def _wall(op: Callable[[], Awaitable[int]]) -> float:
    """Microseconds per unit of work ``op`` reports doing."""
    started = time.perf_counter()
    units = await op()
    return (time.perf_counter() - started) * 1e6 / units


async def _paired(ops: dict[str, Callable[[], Awaitable[int]]], rounds: int) -> dict[str, list[float]]:
    names = list(ops)
    for name in names:
        await ops[name]()
    series: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        shift = round_ % len(names)
        for name in [*names[shift:], *names[:shift]]:
            series[name].append(await _wall(ops[name]))
    return series


def _burst(send: Callable[[Bumped], Awaitable[None]], count: int) -> Callable[[], Awaitable[int]]:
    """``count`` Messages from :data:`_IN_FLIGHT` senders, each waiting for its last send to return."""

    async def op() -> int:
        each = max(1, count // _IN_FLIGHT)

        async def sender() -> None:
            for _ in range(each):
                await send(Bumped())

        async with anyio.create_task_group() as group:
            for _ in range(_IN_FLIGHT):
                group.start_soon(sender)
        return each * _IN_FLIGHT

    return op


async def _writer_figures(url: str, config: Config) -> list[Row]:
    from agentfx.redis import run_program

    ns = f"bench-{uuid.uuid4().hex[:8]}"
    async with (
        agentfx.run_program(init=0, update=_update) as local,
        run_program(url, namespace=ns, init=0, update=_update, message_type=Bumped) as shared,
    ):
        with anyio.fail_after(10):
            while not shared.is_writer:
                await anyio.sleep(0.01)
        series = await _paired(
            {"local": _burst(local.send, config.calls), "redis": _burst(shared.send, config.calls)}, config.rounds
        )
    per_message = statistics.median(series["redis"])
    return [
        row(
            SCENARIO,
            f"Messages through one writer, {_IN_FLIGHT} in flight ({1e6 / per_message:,.0f}/s)",
            "in-process agentfx.run_program",
            series["redis"],
            series["local"],
        )
    ]


@asynccontextmanager
async def _serve(*options: str) -> AsyncGenerator[str]:
    """``agentfx serve benchmarks.redis_program:APP --transport http`` in a subprocess; yields its URL."""
    command = [sys.executable, "-m", "agentfx", "serve", "benchmarks.redis_program:APP", "--transport", "http", "--port", "0", *options]
    async with await anyio.open_process(command, cwd=ROOT) as process, anyio.create_task_group() as group:
        try:
            from anyio.streams.buffered import BufferedByteReceiveStream

            assert process.stderr is not None
            lines = BufferedByteReceiveStream(process.stderr)
            with anyio.fail_after(30):
                while not (line := (await lines.receive_until(b"\n", 4096)).decode()).startswith("Serving"):
                    pass

            async def drain() -> None:
                try:
                    while True:
                        await lines.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    pass

            group.start_soon(drain)
            yield line.rsplit(" ", 1)[-1]
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(10):
                await process.wait()
            group.cancel_scope.cancel()


def _calls(sessions: list[object], per_session: int) -> Callable[[], Awaitable[int]]:
    import mcp

    clients = [session for session in sessions if isinstance(session, mcp.Client)]

    async def op() -> int:
        async def run(client: mcp.Client) -> None:
            for _ in range(per_session):
                answer = await client.call_tool("bump", {})
                if answer.is_error:
                    raise RuntimeError("a benchmark call failed")

        async with anyio.create_task_group() as group:
            for client in clients:
                group.start_soon(run, client)
        return len(clients) * per_session

    return op


async def _http_figures(url: str, config: Config) -> list[Row]:
    import mcp
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    ns = f"bench-{uuid.uuid4().hex[:8]}"
    per_session = max(1, config.mcp_calls // _SESSIONS)
    async with AsyncExitStack() as stack:
        servers = await _start_servers(stack, url, ns)

        async def sessions(urls: list[str]) -> list[object]:
            opened: list[object] = []
            for index in range(_SESSIONS):
                http = await stack.enter_async_context(create_mcp_http_client())
                client = mcp.Client(streamable_http_client(urls[index % len(urls)], http_client=http))
                opened.append(await stack.enter_async_context(client))
            return opened

        ops = {
            "local": _calls(await sessions(servers["local"]), per_session),
            "one": _calls(await sessions(servers["one"]), per_session),
            "three": _calls(await sessions(servers["three"]), per_session),
        }
        series = await _paired(ops, config.rounds)
    baseline = "tool calls over HTTP, 1 server, in-process program"
    rows: list[Row] = []
    for key, label in (("one", "1 server, --redis"), ("three", "3 servers, --redis")):
        per_call = statistics.median(series[key])
        rows.append(
            row(SCENARIO, f"tool calls over HTTP, {label} ({1e6 / per_call:,.0f}/s)", baseline, series[key], series["local"])
        )
    return rows


async def _start_servers(stack: AsyncExitStack, url: str, ns: str) -> dict[str, list[str]]:
    # Started one after another: five interpreters importing at once on two
    # cores take longer than in turn, and the startup is not measured.
    local = [await stack.enter_async_context(_serve())]
    one = [await stack.enter_async_context(_serve("--redis", url, "--namespace", f"{ns}-one"))]
    three = [await stack.enter_async_context(_serve("--redis", url, "--namespace", f"{ns}-three")) for _ in range(3)]
    return {"local": local, "one": one, "three": three}


async def _measure(config: Config) -> list[Row]:
    with _redis_server() as url:
        return [*await _writer_figures(url, config), *await _http_figures(url, config)]


async def redis_program(config: Config) -> list[Row]:
    """The scenario: Messages through one writer, and tool calls across 1 and 3 server processes."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        # Not asyncio (trio): redis-py needs an asyncio loop, so give it one in a thread.
        return await anyio.to_thread.run_sync(lambda: anyio.run(_measure, config, backend="asyncio"))
    return await _measure(config)
