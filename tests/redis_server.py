"""A real ``redis-server`` for the Redis tests: its own temp dir, a free loopback port, nothing saved.

Every server is started and stopped by the test that needs it; other test
runs on the same machine get servers of their own. A Redis test module takes
the :func:`server` and :func:`anyio_backend` fixtures by importing them
(``from tests.redis_server import anyio_backend as anyio_backend``): pytest
finds a fixture in the module that names it.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncGenerator, Generator
from pathlib import Path

import anyio
import anyio.abc
import pytest
import redis.asyncio

__all__ = ["Link", "RedisServer", "anyio_backend", "client", "redis_server", "server"]

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def free_port() -> int:
    """A loopback port nothing listens on (as of now)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _ping(port: int, answer: bytes = b"+PONG") -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(answer)
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process; :meth:`stop` and :meth:`start` again on the same port for outages."""

    def __init__(self, directory: Path, *, password: str | None = None) -> None:
        self.directory = directory
        self.password = password
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert self._process is None, "already running"
        for _attempt in range(20):
            port = self.port or free_port()
            process = subprocess.Popen(
                [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.directory), "--loglevel", "warning",
                 *(("--requirepass", self.password) if self.password is not None else ())],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and process.poll() is None:
                # A server with a password answers a PING without one with NOAUTH: it is up.
                if _ping(port, b"+PONG" if self.password is None else b"-NOAUTH"):
                    self.port, self._process = port, process
                    return
                time.sleep(0.01)
            process.kill()
            process.wait()
            # Another process took the port between the probe and the bind; a
            # restart must keep its port, so only a fresh server moves on.
            if self.port:
                time.sleep(0.1)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()


@contextlib.contextmanager
def redis_server(*, password: str | None = None) -> Generator[RedisServer]:
    """A running server for the duration of the block (asking for ``password``, when given)."""
    with tempfile.TemporaryDirectory(prefix="agentfx-redis-") as directory:
        server = RedisServer(Path(directory), password=password)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="module")
def server() -> Generator[RedisServer]:
    """One server for the whole test module; a test that stops it starts it again."""
    with redis_server() as running:
        yield running


@pytest.fixture
def anyio_backend() -> str:
    """asyncio only: redis-py's client is asyncio-only."""
    return "asyncio"


class Link:
    """A TCP proxy in front of a server that a test can cut and restore: Redis unreachable, its data kept.

    ``cut()`` closes every proxied connection and stops listening, so a client
    sees a reset and then refused connections; ``restore()`` listens again on
    the same port. Runs in the test's event loop (asyncio).
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._scope: anyio.CancelScope | None = None
        self._restored = anyio.Event()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def _pipe(self, source: anyio.abc.SocketStream, sink: anyio.abc.SocketStream) -> None:
        try:
            async for chunk in source:
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            await sink.aclose()

    async def _serve(self, client: anyio.abc.SocketStream) -> None:
        async with client:
            try:
                upstream = await anyio.connect_tcp("127.0.0.1", self.target_port)
            except OSError:
                return
            async with upstream, anyio.create_task_group() as group:
                group.start_soon(self._pipe, client, upstream)
                group.start_soon(self._pipe, upstream, client)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; ``task_group.start(link.run)`` returns once it listens."""
        started = False
        while True:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=self.port)
            with anyio.CancelScope() as scope:
                self._scope = scope
                if not started:
                    started = True
                    task_status.started()
                async with listener:
                    await listener.serve(self._serve)
            self._scope = None
            # Cut: wait to be restored.
            self._restored = anyio.Event()
            await self._restored.wait()

    def cut(self) -> None:
        assert self._scope is not None, "not serving"
        self._scope.cancel()

    def restore(self) -> None:
        self._restored.set()


@contextlib.asynccontextmanager
async def client(url: str) -> AsyncGenerator[redis.asyncio.Redis]:
    """A plain redis-py client of ``url``, closed on leaving."""
    connection = redis.asyncio.Redis.from_url(url)  # pyright: ignore[reportUnknownMemberType]
    try:
        yield connection
    finally:
        await connection.aclose()
