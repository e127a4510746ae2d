"""The ``agentfx`` command: document a contract, check its manifest, serve it, or watch the demo.

This layer owns argument parsing, loading ``MODULE:ATTR`` targets and the
exit codes (0 success, 1 a drifted manifest, 2 a usage error, 3 ``serve``
could not listen on the address it was given); an application that stops
with an error while served ends ``serve``, over either transport, with that
error. It deliberately knows nothing of how a contract is documented or
served: it calls :mod:`agentfx.docs` and :mod:`agentfx.mcp`, and imports the
MCP adapter only for the commands that need it.

``MODULE:ATTR`` names a ``Definition`` (``manifest``, ``markdown``), an
:class:`~agentfx.app.App` (every command), or for ``serve`` a zero-argument
callable returning an async context manager that yields a bound runtime. The
current directory is importable, as it is for ``python -m``.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import ipaddress
import json
import socket
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import anyio

from .app import App
from .contract import Definition
from .docs import to_manifest, to_markdown

if TYPE_CHECKING:
    from .mcp import HttpApp
    from .runtime import AgentRuntime

__all__ = ["UsageError", "load", "main", "render_manifest"]

_OK, _DRIFTED, _USAGE, _CANNOT_LISTEN = 0, 1, 2, 3


class UsageError(Exception):
    """A command line the CLI cannot act on; its message is printed and the exit code is 2."""


class _CannotListen(Exception):
    """The address to serve on cannot be bound; its message is printed and the exit code is 3."""


def render_manifest(definition: Definition[Any, Any]) -> str:
    """The manifest exactly as ``agentfx manifest`` prints it: JSON indented 2, one trailing newline.

    >>> import msgspec, agentfx
    >>> class Ping(msgspec.Struct, tag=True):
    ...     pass
    >>> print(render_manifest(agentfx.define(agentfx.expose(Ping))), end="")
    {
      "capabilities": [],
      "resources": []
    }
    """
    return json.dumps(to_manifest(definition), indent=2, ensure_ascii=False) + "\n"


def load(target: str) -> object:
    """The object ``MODULE:ATTR`` names (``ATTR`` may be dotted).

    Raises:
        UsageError: The target is malformed, or the module or attribute cannot be found.

    >>> load("agentfx.docs:to_manifest").__name__
    'to_manifest'
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f'"{target}" is not MODULE:ATTR (for example examples.todo.app:AppAgent)')
    _cwd_importable()
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name
        if missing is None:
            raise
        if missing == module_name or module_name.startswith(missing + "."):
            raise UsageError(f'Cannot import "{module_name}": no such module') from None
        # The module exists but imports one that is not installed.
        raise UsageError(
            f'Cannot import "{module_name}": it needs the module "{missing}", which is not installed'
        ) from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f'"{module_name}" has no attribute "{attribute}"') from None
    return obj


def _cwd_importable() -> None:
    # As for ``python -m``: a console script's sys.path starts at its own
    # directory, not at the one the user is standing in.
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, "")


def _definition(target: str) -> Definition[Any, Any]:
    obj = load(target)
    if isinstance(obj, App):
        return cast("App[Any, Any, Any]", obj).definition
    if isinstance(obj, Definition):
        return cast("Definition[Any, Any]", obj)
    raise UsageError(f'"{target}" names neither a Definition nor an App')


def _manifest(target: str, check: str | None, out: TextIO) -> int:
    rendered = render_manifest(_definition(target))
    if check is None:
        out.write(rendered)
        return _OK
    path = Path(check)
    try:
        committed_text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"Cannot read {check}: {exc.strerror or exc}") from None
    try:
        committed: object = json.loads(committed_text)
    except ValueError:
        out.write(f"{check} is not valid JSON; regenerate it with: agentfx manifest {target} > {check}\n")
        return _DRIFTED
    if committed == json.loads(rendered):
        out.write(f"{check} matches {target}\n")
        return _OK
    # Both sides in the same rendering, so the diff shows only what changed.
    expected = json.dumps(committed, indent=2, ensure_ascii=False) + "\n"
    diff = difflib.unified_diff(
        expected.splitlines(keepends=True),
        rendered.splitlines(keepends=True),
        fromfile=f"{check} (committed)",
        tofile=f"{target} (current)",
    )
    out.writelines(diff)
    out.write(f"\n{check} has drifted from {target}; regenerate it with: agentfx manifest {target} > {check}\n")
    return _DRIFTED


_MCP_EXTRA = "pip install 'agentfx[mcp]'"


def _require(*modules: str) -> None:
    """Import the optional modules a command needs, or say how to install them."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            reason = str(exc)
            if _MCP_EXTRA not in reason:
                missing = f'"{exc.name}" is not installed' if isinstance(exc, ModuleNotFoundError) else reason
                reason = f"{missing}; this command needs the MCP extra: {_MCP_EXTRA}"
            raise UsageError(reason) from None


RuntimeFactory = Callable[[], AbstractAsyncContextManager["AgentRuntime[Any, Any]"]]


def _served(target: str) -> App[Any, Any, Any] | RuntimeFactory:
    obj = load(target)
    if isinstance(obj, App):
        return cast("App[Any, Any, Any]", obj)
    if callable(obj) and not isinstance(obj, type | Definition):
        return cast("RuntimeFactory", obj)
    raise UsageError(
        f'"{target}" cannot be served: name an App, or a zero-argument callable returning an async '
        "context manager that yields a bound runtime"
    )


async def _serve_stdio(served: App[Any, Any, Any] | RuntimeFactory) -> None:
    from .mcp import serve_stdio

    opened: AbstractAsyncContextManager[AgentRuntime[Any, Any]] = (
        cast("App[Any, Any, Any]", served).run() if isinstance(served, App) else served()
    )
    async with opened as runtime:
        await serve_stdio(runtime)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, for the HTTP server to listen on.

    Bound here rather than by the server, so a busy port or an unknown host
    is one line on stderr and not a server's startup failure.
    """
    shown = f"[{host}]" if ":" in host else host
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError:
            sock.close()
            raise
    except OSError as exc:
        raise _CannotListen(f"cannot listen on {shown}:{port}: {exc.strerror or exc}") from None
    return sock


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


async def _serve_http(served: App[Any, Any, Any] | RuntimeFactory, sock: socket.socket, err: TextIO) -> None:
    from .mcp import http_app

    if isinstance(served, App):
        # One application, many agents: every session binds its own runtime
        # to the same running program.
        await _uvicorn(http_app(cast("App[Any, Any, Any]", served)), sock, err)
    else:
        factory = served
        await _uvicorn(http_app(lambda _principal: factory()), sock, err)


_SHUTDOWN_GRACE = 5
"""Seconds ``serve --transport http`` lets open requests finish when it stops."""


async def _uvicorn(asgi: HttpApp[Any], sock: socket.socket, err: TextIO) -> None:
    import uvicorn

    # The app runs here, around the server, not in the server's lifespan,
    # which could only log a failure: a program that stops with an error (a
    # command raised) stops the server and propagates, as it does over stdio.
    config = uvicorn.Config(asgi, lifespan="off", log_level="warning", timeout_graceful_shutdown=_SHUTDOWN_GRACE)
    server = uvicorn.Server(config)
    finished = anyio.Event()

    async def serve() -> None:
        try:
            await server.serve([sock])
        finally:
            finished.set()

    failure: Exception | None = None
    launched = False
    # The server runs outside the app's block, so the program's failure, which
    # cancels everything inside it, lets the server shut down in good order.
    async with anyio.create_task_group() as task_group:
        try:
            async with asgi.running():
                task_group.start_soon(serve)
                launched = True
                while not server.started:
                    if finished.is_set():
                        return
                    await anyio.sleep(0.01)
                _announce(server.servers[0].sockets[0].getsockname(), err)
                await finished.wait()
        except Exception as exc:
            failure = exc
        finally:
            server.should_exit = True
            if launched:
                with anyio.CancelScope(shield=True):
                    await finished.wait()
    if failure is not None:
        raise failure


def _announce(bound: Any, err: TextIO) -> None:
    shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
    if not _loopback(str(bound[0])):
        # The CLI has no authenticate hook: whoever reaches the port acts
        # as the App's principal.
        err.write(
            f"agentfx: warning: serving {shown} without authentication; anyone who can reach it can call "
            "every capability. Serve on 127.0.0.1, or serve agentfx.mcp.http_app(app, authenticate=...) "
            "from your own ASGI server.\n"
        )
    err.write(f"Serving MCP over Streamable HTTP at http://{shown}:{bound[1]}/mcp\n")
    err.flush()


DEMO_APP = "examples.todo.app"
"""The module ``agentfx demo`` runs: the todo example of a source checkout."""


async def _demo(out: TextIO) -> int:
    import mcp
    import mcp_types as types

    from .audit import audit_log
    from .mcp import server

    _cwd_importable()
    try:
        example: Any = importlib.import_module(DEMO_APP)
    except ModuleNotFoundError:
        raise UsageError(
            f"The demo runs the todo example ({DEMO_APP}); run it from the root of an agentfx source checkout."
        ) from None
    app: App[Any, Any, Any] = example.app
    user, guest = example.User(id="ada", can_delete=True), example.User(id="guest", can_delete=False)
    log = audit_log(principal=lambda principal: principal.id)

    def show(line: str) -> None:
        out.write(line + "\n")

    def result(answer: types.CallToolResult) -> None:
        text = " ".join(block.text for block in answer.content if isinstance(block, types.TextContent))
        show(f"  <- {'error: ' if answer.is_error else ''}{text}")
        if answer.structured_content is not None:
            show(f"     {json.dumps(answer.structured_content)}")

    async def notified(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            show("  <- notifications/tools/list_changed")

    async def call(client: mcp.Client, who: str, name: str, arguments: dict[str, Any]) -> None:
        show(f"{who} -> tools/call {name} {json.dumps(arguments)}")
        try:
            result(await client.call_tool(name, arguments))
        except mcp.MCPError as exc:
            show(f"  <- JSON-RPC error {exc.error.code}: {exc.error.message}")

    async def tools(client: mcp.Client, who: str) -> None:
        show(f"{who} -> tools/list")
        listed = await client.list_tools()
        show(f"  <- {', '.join(tool.name for tool in listed.tools)}")

    show(f"agentfx demo: the todo example ({DEMO_APP}) served over MCP to two in-process clients.")
    show("ada may delete todos; guest may not. Both act on the same running program.\n")
    async with app.program() as program:
        ada = server(app.bind(program, principal=user, audit=log), name="todo")
        visitor = server(app.bind(program, principal=guest, audit=log), name="todo")
        async with (
            mcp.Client(ada, mode="legacy", message_handler=notified) as client,
            mcp.Client(visitor, mode="legacy") as other,
        ):
            await tools(client, "ada")
            await call(client, "ada", "create_todo", {"title": "Try agentfx"})
            await call(client, "ada", "create_todo", {"title": 42})
            await call(client, "ada", "delete_selected_todo", {})
            await call(client, "ada", "select_todo", {"id": "todo-1"})
            # The list_changed notification is debounced; give it its window.
            await anyio.sleep(0.2)
            await tools(client, "ada")
            await call(other, "guest", "delete_selected_todo", {})
            await call(client, "ada", "delete_selected_todo", {})
            await call(client, "ada", "no_such_tool", {})
            show("ada -> resources/read app://todos")
            read = await client.read_resource("app://todos")
            for contents in read.contents:
                if isinstance(contents, types.TextResourceContents):
                    show(f"  <- {contents.text}")
    show("\nAudit log (one entry per call, written by the runtime, not by the adapter):")
    rows = [("principal", "capability", "decision", "outcome")]
    for entry in log.entries():
        principal = entry.principal if isinstance(entry.principal, str) else "-"
        rows.append((principal, entry.capability, entry.decision, entry.outcome))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for row in rows:
        show("  " + "".join(cell.ljust(width + 2) for cell, width in zip(row, widths, strict=False)) + row[3])
    return _OK


def _port(text: str) -> int:
    """A ``--port`` value, checked here because the socket layer would wrap one out of range around silently."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: ports are 0 to 65535 (0 picks a free one)")
    return port


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentfx",
        description="Document, check and serve agentfx contracts.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    manifest = commands.add_parser("manifest", help="print a contract's JSON manifest, or check a committed one")
    manifest.add_argument("target", metavar="MODULE:ATTR", help="a Definition or an App")
    manifest.add_argument("--check", metavar="FILE", help="exit 1 with a diff when FILE differs from the manifest")

    markdown = commands.add_parser("markdown", help="print a contract's Markdown documentation")
    markdown.add_argument("target", metavar="MODULE:ATTR", help="a Definition or an App")

    serve = commands.add_parser("serve", help="serve an App over MCP")
    serve.add_argument("target", metavar="MODULE:ATTR", help="an App, or a callable returning a runtime context")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="HTTP only; default: 127.0.0.1. There is no authentication: any other address warns",
    )
    serve.add_argument("--port", type=_port, default=8000, help="HTTP only; 0 picks a free port; default: 8000")

    commands.add_parser("demo", help="run the todo example end to end over a real MCP client")
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``agentfx`` command and return its exit code.

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` by default.
        out: Where results go; standard output by default.
        err: Where errors go; standard error by default.

    Returns:
        0 on success, 1 when ``manifest --check`` found drift, 2 for a usage
        error (including a missing MCP extra), 3 when ``serve --transport
        http`` cannot listen on its host and port.

    Raises:
        Exception: Whatever stopped the application ``serve`` was serving
            (a command that raised), once the server has shut down.
    """
    stdout = sys.stdout if out is None else out
    stderr = sys.stderr if err is None else err
    args = _parser().parse_args(argv)
    try:
        match args.command:
            case "manifest":
                return _manifest(args.target, args.check, stdout)
            case "markdown":
                stdout.write(to_markdown(_definition(args.target)))
                return _OK
            case "serve":
                _require("agentfx.mcp", *(("uvicorn",) if args.transport == "http" else ()))
                served = _served(args.target)
                if args.transport == "stdio":
                    anyio.run(_serve_stdio, served)
                else:
                    with _listen(args.host, args.port) as sock:
                        # uvicorn runs on asyncio only.
                        anyio.run(_serve_http, served, sock, stderr, backend="asyncio")
                return _OK
            case _:
                _require("agentfx.mcp")
                return anyio.run(_demo, stdout)
    except UsageError as exc:
        stderr.write(f"agentfx: {exc}\n")
        return _USAGE
    except _CannotListen as exc:
        stderr.write(f"agentfx: {exc}\n")
        return _CANNOT_LISTEN
    except KeyboardInterrupt:
        return _OK
