"""The application the served benchmarks run, three ways, each in its own server process.

One tool, ``create_todo`` (``title``, ``priority``), over a Model that counts
the todos created, behind the same two predicates (``is_open``, ``may_write``):

- :data:`APP`, an :class:`agentfx.App` served by ``agentfx serve
  benchmarks.served:APP`` (the reference program as its host, so every call
  changes the Model, as in a real application);
- the MCP SDK's ``MCPServer`` with an ``async`` tool calling the predicates
  and ``update`` by hand;
- FastMCP 4 with the same tool.

``python -m benchmarks.served mcpserver|fastmcp stdio|http`` runs a peer. Over
HTTP every server (agentfx's included) binds 127.0.0.1 on a free port, runs
under uvicorn on anyio's asyncio loop with warnings-only logging, and writes
the same line to stderr once it listens, which the client reads to find it.

Every contender's tool declares the same output schema and answers the same
``structuredContent`` (``{"capability": "create_todo", "tag": "CreateTodo"}``),
as agentfx's does for every capability: the same tool, answered the same way.
(The thin client of these benchmarks validates nothing.) This module
deliberately knows nothing of timing.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import msgspec

import agentfx

from .app import CreateTodo as CreateTodo
from .app import Dispatched, dispatched
from .app import User as User
from .app import may_write as may_write

__all__ = ["APP", "PEERS", "CreateTodo", "Model", "User", "create", "is_open", "may_write", "update"]


class Model(msgspec.Struct, frozen=True):
    open: bool = True
    todos: int = 0


def is_open(model: Model) -> bool:
    """The ``available`` predicate."""
    return model.open


def update(model: Model, message: CreateTodo) -> Model:
    """Count the todo; every call changes the Model."""
    return Model(model.open, model.todos + 1)


Agent = agentfx.for_model(Model, principal=User)

CONTRACT = Agent.define(
    Agent.expose(
        CreateTodo,
        Agent.variant(
            CreateTodo,
            "Create a todo",
            name="create_todo",
            available=is_open,
            authorize=lambda request: may_write(request.principal),
        ),
    )
)

APP = agentfx.App(CONTRACT, init=Model(), update=update, principal=User("u1"))
"""What ``agentfx serve benchmarks.served:APP`` serves."""


class _State:
    """A peer's whole application: the Model and the one principal."""

    def __init__(self) -> None:
        self.model = Model()
        self.user = User("u1")


def create(state: _State, title: str, priority: int) -> Dispatched:
    """A peer tool's body: the same predicates and ``update`` agentfx's capability runs."""
    if not is_open(state.model):
        raise ValueError("Not available")
    if not may_write(state.user):
        raise ValueError("Not authorized")
    state.model = update(state.model, CreateTodo(title, priority))
    return dispatched()


def _mcpserver() -> tuple[Any, Callable[[], Awaitable[None]], Callable[[], Any]]:
    from mcp.server.mcpserver import MCPServer

    state = _State()
    server: MCPServer[Any] = MCPServer("peer")

    async def create_todo(title: str, priority: int = 0) -> Dispatched:
        """Create a todo"""
        return create(state, title, priority)

    server.add_tool(create_todo, structured_output=True)
    return server, server.run_stdio_async, server.streamable_http_app


def _fastmcp() -> tuple[Any, Callable[[], Awaitable[None]], Callable[[], Any]]:
    from fastmcp import FastMCP

    state = _State()
    server = FastMCP("peer")

    async def create_todo(title: str, priority: int = 0) -> Dispatched:
        """Create a todo"""
        return create(state, title, priority)

    server.tool(create_todo)

    async def stdio() -> None:
        await server.run_stdio_async(show_banner=False, log_level="WARNING")

    return server, stdio, lambda: server.http_app(path="/mcp")


PEERS: dict[str, Callable[[], tuple[Any, Callable[[], Awaitable[None]], Callable[[], Any]]]] = {
    "mcpserver": _mcpserver,
    "fastmcp": _fastmcp,
}
"""Each peer: its server, its stdio runner and its Streamable HTTP ASGI app."""


async def _serve_http(asgi: Any) -> None:
    import uvicorn

    # IPPROTO_TCP, as agentfx serve's socket from getaddrinfo: asyncio sets
    # TCP_NODELAY only on sockets whose proto says TCP, and without it every
    # streamed answer's last chunk waits out the client's delayed ACK (~40 ms).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning"))
    async with anyio.create_task_group() as group:
        group.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        host, port = sock.getsockname()
        # The line agentfx serve writes, so one client finds every server.
        sys.stderr.write(f"Serving MCP over Streamable HTTP at http://{host}:{port}/mcp\n")
        sys.stderr.flush()


def main(argv: list[str]) -> int:
    """Run a peer: ``mcpserver|fastmcp stdio|http``."""
    if len(argv) != 2 or argv[0] not in PEERS or argv[1] not in ("stdio", "http"):
        sys.stderr.write("usage: python -m benchmarks.served mcpserver|fastmcp stdio|http\n")
        return 2
    _, stdio, http = PEERS[argv[0]]()
    if argv[1] == "stdio":
        anyio.run(stdio)
    else:
        anyio.run(_serve_http, http())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
