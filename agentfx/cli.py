"""The ``agentfx`` command: document a contract, check its manifest, serve it, or watch the demo.

This layer owns argument parsing, loading ``MODULE:ATTR`` targets, telling
the user in one line what a target is when it is not what a command accepts,
and the exit codes (:class:`ExitCode`, listed by ``agentfx --help``). It
deliberately knows nothing of how a contract is documented or served: it
calls :mod:`agentfx.docs` and :mod:`agentfx.mcp`, and imports the MCP adapter
only for the commands that need it.

``MODULE:ATTR`` names a ``Definition`` (``manifest``, ``markdown``), an
:class:`~agentfx.app.App` (every command), or for ``serve`` a zero-argument
callable returning an async context manager that yields a bound runtime.
``MODULE`` is dotted (``examples.todo.app``), never a file path. The current
directory is importable, as it is for ``python -m``.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import errno
import gc
import importlib
import inspect
import ipaddress
import json
import os
import re
import shlex
import signal
import socket
import sys
import threading
import traceback
import urllib.parse
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    ExitStack,
    asynccontextmanager,
    contextmanager,
    nullcontext,
    redirect_stderr,
)
from pathlib import Path, PurePath
from types import ModuleType
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TextIO, cast

import anyio

from . import __version__
from ._fds import claim_stdio
from ._hosts import LOOPBACK_HOSTS
from .app import App
from .contract import Definition, Exposed, bare_signature
from .docs import to_manifest, to_markdown
from .errors import kind_of
from .runtime import AgentRuntime

if TYPE_CHECKING:
    from mcp.server.request_state import RequestStateSecurity

    from .mcp import HttpApp

__all__ = [
    "REQUEST_STATE_KEYS",
    "STOP_SIGNALS",
    "ExitCode",
    "UsageError",
    "load",
    "main",
    "render_manifest",
    "stopped_by_signals",
]


class ExitCode(enum.IntEnum):
    """What ``agentfx`` exits with: one meaning per code, so a script can tell them apart.

    >>> int(ExitCode.DRIFTED)
    1
    """

    OK = 0
    """The command did what it was asked."""
    DRIFTED = 1
    """``manifest --check``: the committed manifest differs from the contract, or is absent."""
    USAGE = 2
    """The command line cannot be acted on: see :class:`UsageError`."""
    CANNOT_START = 3
    """``serve``: the server cannot start: its address is busy or unknown, or ``--redis`` cannot be reached or used."""
    APP_FAILED = 4
    """``serve``: the served application stopped with an error; its traceback is printed."""
    INTERRUPTED = 130
    """Ctrl-C (SIGINT) stopped ``manifest``, ``markdown`` or ``demo`` before it finished (``serve`` stops with 0)."""


_MEANINGS = {
    ExitCode.OK: "success",
    ExitCode.DRIFTED: "manifest --check: the committed manifest differs from the contract, or is absent",
    ExitCode.USAGE: (
        "usage error: bad arguments or flags, a MODULE:ATTR that cannot be imported or found,\n"
        "     a target of the wrong kind, a --check FILE that is not a manifest, a missing extra,\n"
        "     a stdin or stdout that is closed (or stdout cannot be written), or a stderr closed for serve"
    ),
    ExitCode.CANNOT_START: (
        "serve: the server cannot start (its address is busy or unknown,\n"
        "     or the --redis server cannot be reached or used)"
    ),
    ExitCode.APP_FAILED: "serve: the served application stopped with an error (its traceback is printed)",
    ExitCode.INTERRUPTED: "interrupted: Ctrl-C stopped manifest, markdown or demo before it finished",
}


class UsageError(Exception):
    """A command line the CLI cannot act on; its message is printed and the exit code is 2.

    A malformed or unknown ``MODULE:ATTR``, a module that raised on import, a
    target of the wrong kind, flags that do not go together, a missing extra.
    """


class _ImportFailed(UsageError):
    """The target's module raised on import: its traceback is printed above the message."""

    def __init__(self, message: str, shown: str) -> None:
        super().__init__(message)
        self.shown = shown


class _CannotStart(Exception):
    """What serving needs is not there; its message is printed and the exit code is 3."""


class _CannotListen(_CannotStart):
    """The address to serve on cannot be bound."""


class _Output(Protocol):
    """Where a command writes its result: the caller's text stream, or :class:`_StandardOutput`."""

    def write(self, text: str, /) -> object: ...


def _utf8(text: str) -> bytes:
    r"""``text`` as UTF-8, whatever it holds.

    A path from the command line keeps its own bytes; a lone surrogate (a
    committed file's ``"\ud800"``, shown in a diff) is written as its escape.

    >>> _utf8("caf\udce9"), _utf8("\ud800")
    (b'caf\xe9', b'\\ud800')
    """
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


class _StandardOutput:
    """This process's stdout, written as UTF-8 whatever the locale's encoding, and never raising.

    A manifest is byte-stable: written in the locale's encoding it would be a
    file ``--check`` refuses (cp1252), or fail halfway (ascii). A stdout that
    is closed, full or whose reader has gone is kept in :attr:`failure`, for
    ``main`` to say in one line, and what follows is dropped: the command
    runs to its end without a traceback from any task that wrote.
    """

    __slots__ = ("failure",)

    def __init__(self) -> None:
        self.failure: OSError | None = None

    def write(self, text: str, /) -> int:
        if self.failure is None:
            stream = sys.stdout
            try:
                if stream is None:
                    raise OSError(errno.EBADF, "it is closed")
                buffer = getattr(stream, "buffer", None)
                if buffer is None:
                    stream.write(text)
                else:
                    # What was printed to the text layer goes first, in its order.
                    stream.flush()
                    cast("BinaryIO", buffer).write(_utf8(text))
            except OSError as exc:
                self._failed(exc)
        return len(text)

    def flush(self) -> None:
        stream = sys.stdout
        if self.failure is None and stream is not None:
            try:
                stream.flush()
            except OSError as exc:
                self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.failure = exc
        # What is still buffered would fail again as the interpreter exits,
        # with a traceback of its own: it goes to the null device instead.
        try:
            fd = cast("TextIO", sys.stdout).fileno()
            null = os.open(os.devnull, os.O_WRONLY)
        except (AttributeError, OSError, ValueError):
            return
        try:
            os.dup2(null, fd)
        except OSError:
            pass
        finally:
            os.close(null)

    def said(self) -> str | None:
        """The one line for stderr when stdout could not be written, else ``None``."""
        if self.failure is None:
            return None
        return f"cannot write to stdout: {self.failure.strerror or self.failure}"


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
        UsageError: The target is malformed, a file path (the message
            suggests the dotted form) or a relative module name, the module
            or attribute cannot be found, or the module raised (or called
            sys.exit) on import.

    >>> load("agentfx.docs:to_manifest").__name__
    'to_manifest'
    """
    module_name, sep, attribute = target.partition(":")
    if not sep and _is_a_path(target):
        # A file path without its attribute: the dotted module, and where the attribute goes.
        raise UsageError(_dotted_instead(target, "ATTR"))
    if not sep or not module_name or not attribute:
        raise UsageError(f'"{target}" is not MODULE:ATTR (for example examples.todo.app:AppAgent)')
    if _is_a_path(module_name):
        raise UsageError(_dotted_instead(module_name, attribute))
    if module_name.startswith("."):
        # Relative to no package: importing it fails inside importlib, which is no fault of a module.
        raise UsageError(
            f'"{module_name}" is a relative module name, but MODULE is an absolute dotted module name, '
            "importable from the current directory"
        )
    _cwd_importable()
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name
        if missing is None:
            raise _import_failed(module_name, exc) from None
        if missing == module_name or module_name.startswith(missing + "."):
            raise UsageError(f'Cannot import "{module_name}": no such module') from None
        # The module exists but imports one that is not installed.
        raise UsageError(
            f'Cannot import "{module_name}": it needs the module "{missing}", which is not installed'
        ) from None
    except (KeyboardInterrupt, _Abandoned):
        raise
    except BaseException as exc:
        # The user's own module is broken: its traceback is what they need. A module
        # that calls sys.exit on import is one too, not the CLI's own exit status, and
        # so is one that lets a CancelledError or a GeneratorExit out of its import.
        raise _import_failed(module_name, exc) from None
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f'"{module_name}" has no attribute "{attribute}"') from None
        except Exception as exc:
            # A module ``__getattr__`` or a property raised: the user's code is broken, as on import.
            raise _lookup_failed(target, exc) from None
    return obj


def _is_a_path(module_name: str) -> bool:
    return "/" in module_name or "\\" in module_name or module_name.endswith(".py")


def _dotted_instead(module_name: str, attribute: str) -> str:
    """What to say for a ``MODULE`` written as a file path: the dotted form, when there is one."""
    said = f'"{module_name}" is a file path, but MODULE is a dotted module name'
    path = PurePath(module_name.replace("\\", "/"))
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            return f"{said}, importable from the current directory"
    if path.suffix == ".py":
        path = path.with_suffix("")
    parts = [part for part in path.parts if part != "."]
    if parts and parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(part.isidentifier() for part in parts):
        return f"{said}, importable from the current directory"
    return f"{said}: try {'.'.join(parts)}:{attribute}"


def _import_failed(module_name: str, exc: BaseException) -> _ImportFailed:
    return _ImportFailed(
        f'Cannot import "{module_name}": it raised {type(exc).__name__} (traceback above)', _users_traceback(exc)
    )


def _lookup_failed(target: str, exc: BaseException) -> _ImportFailed:
    return _ImportFailed(f'Cannot load "{target}": looking it up raised {type(exc).__name__} (traceback above)', _users_traceback(exc))


def _users_traceback(exc: BaseException) -> str:
    # Drop the frames of this module and of importlib: the traceback starts in the user's code.
    tb = exc.__traceback__
    while tb is not None and _machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _machinery(filename: str) -> bool:
    return filename in (__file__, importlib.__file__) or filename.startswith("<frozen importlib")


def _cwd_importable() -> None:
    # As for ``python -m``: a console script's sys.path starts at its own
    # directory, not at the one the user is standing in.
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, "")


def _describe(obj: object) -> str:
    """What a target turned out to be, for a message that says what was expected instead.

    >>> _describe(print), _describe(3), _describe(ExitCode)
    ('the function print(*args, sep, end, file, flush)', 'an int', 'the class ExitCode')
    """
    if isinstance(obj, ModuleType):
        return f"the module {obj.__name__}"
    if isinstance(obj, type):
        return f"the class {obj.__qualname__}"
    if isinstance(obj, Definition):
        return "a Definition, a contract without a program to run"
    if isinstance(obj, Exposed):
        return "the result of expose(...), never passed to define(...)"
    if inspect.isroutine(obj):
        kind = (
            "async generator function"
            if inspect.isasyncgenfunction(obj)
            else "async function"
            if inspect.iscoroutinefunction(obj)
            else "function"
        )
        return f"the {kind} {getattr(obj, '__qualname__', '?')}{_parameters(obj)}"
    return kind_of(obj)


def _parameters(routine: Callable[..., object]) -> str:
    """``(a, b, *rest)``: the parameter names alone, since defaults and annotations can be long."""
    try:
        signature = inspect.signature(routine)
    except (ValueError, TypeError):
        # No signature, or a __signature__ that is not one.
        return "(...)"
    return bare_signature(signature)


def _definition(target: str, command: str) -> Definition[Any, Any]:
    obj = load(target)
    if isinstance(obj, App):
        return cast("App[Any, Any, Any]", obj).definition
    if isinstance(obj, Definition):
        return cast("Definition[Any, Any]", obj)
    raise UsageError(f'"{target}" is {_describe(obj)}; {command} accepts a Definition or an App')


def _manifest(target: str, check: str | None, out: _Output) -> int:
    if check == "":
        # Path("") is the current directory, which would be reported as unreadable.
        raise UsageError('--check takes the FILE of a committed manifest; "" names no file')
    rendered = render_manifest(_definition(target, "manifest"))
    if check is None:
        out.write(rendered)
        return ExitCode.OK
    regenerate = f"agentfx manifest {shlex.quote(target)} > {shlex.quote(check)}"
    try:
        # An editor may have saved it with a byte order mark: still the same JSON.
        committed_text = Path(check).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        out.write(f"{check} does not exist; write it with: {regenerate}\n")
        return ExitCode.DRIFTED
    except OSError as exc:
        raise UsageError(f"Cannot read {check}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(_not_a_manifest(check, "it is not UTF-8 text")) from None
    try:
        committed: object = json.loads(committed_text)
    except (ValueError, RecursionError):
        # Only a file that is a manifest is worth regenerating: this one may
        # be anything (a README), and the suggestion would overwrite it.
        raise UsageError(_not_a_manifest(check, "it is not JSON")) from None
    if not _is_a_manifest(committed):
        raise UsageError(_not_a_manifest(check, 'it has no "capabilities" list'))
    # Compared as canonical JSON text, not as Python values: 0 == False there,
    # so a committed false where the contract says 0 would pass.
    try:
        same = _canonical(committed) == _canonical(json.loads(rendered))
        # Both sides in the same rendering, so the diff shows only what changed.
        expected = "" if same else json.dumps(committed, indent=2, ensure_ascii=False) + "\n"
    except RecursionError:
        # Read, but nested deeper than the writer goes: no manifest is.
        raise UsageError(_not_a_manifest(check, "it is nested too deeply")) from None
    if same:
        out.write(f"{check} matches {target}\n")
        return ExitCode.OK
    diff = difflib.unified_diff(
        expected.splitlines(keepends=True),
        rendered.splitlines(keepends=True),
        fromfile=f"{check} (committed)",
        tofile=f"{target} (current)",
    )
    for line in diff:
        out.write(line)
    out.write(f"\n{check} has drifted from {target}; regenerate it with: {regenerate}\n")
    return ExitCode.DRIFTED


def _canonical(document: object) -> str:
    """``document`` as JSON text that tells every value apart (``0``, ``false``, ``0.0``) and nothing of formatting or key order."""
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _is_a_manifest(document: object) -> bool:
    # The shape, not the contents: a manifest from an older contract is drift, not a wrong file.
    return isinstance(document, dict) and isinstance(cast("dict[str, object]", document).get("capabilities"), list)


def _not_a_manifest(check: str, why: str) -> str:
    return f"{check} is not an agentfx manifest ({why}); --check compares a file written by agentfx manifest"


_MCP_EXTRA = "pip install 'agentfx[mcp]'"


def _require(*modules: str, needs: str = "this command needs the MCP extra", extra: str = _MCP_EXTRA) -> None:
    """Import the optional modules a command needs, or say how to install them (``needs``: ``extra``)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            reason = str(exc)
            if extra not in reason:
                missing = f'"{exc.name}" is not installed' if isinstance(exc, ModuleNotFoundError) else reason
                reason = f"{missing}; {needs}: {extra}"
            raise UsageError(reason) from None


_Served = App[Any, Any, Any] | Callable[[], object]
"""What ``serve`` serves: an App, or a runtime factory whose result is checked when it is called."""

_SERVABLE = "an App, or a zero-argument callable returning an async context manager that yields a bound runtime"

_NETWORK_TRANSPORTS = ("http", "a2a")
"""The transports that listen on ``--host`` and ``--port``; stdio has neither."""


def _network_flags_fit(args: argparse.Namespace) -> None:
    """``--host`` and ``--port`` given to a transport that does not listen are a mistake, not a default."""
    if args.transport in _NETWORK_TRANSPORTS:
        return
    for flag, value in (("--host", args.host), ("--port", args.port), ("--allowed-host", args.allowed_host)):
        if value is not None:
            listening = " or ".join(f"--transport {name}" for name in _NETWORK_TRANSPORTS)
            raise UsageError(
                f"{flag} is only for a network transport ({listening}); {args.transport} has no {flag[2:]}"
            )


def _served(target: str) -> _Served:
    """An App, or what looks like a runtime factory; what the factory returns is checked when it is called."""
    obj = load(target)
    if isinstance(obj, App):
        return cast("App[Any, Any, Any]", obj)
    # Each check is one a callable can fail without being called: calling
    # ``update`` or a class to find out would run the user's code for nothing.
    if (
        not callable(obj)
        or isinstance(obj, type | Definition)
        or inspect.iscoroutinefunction(obj)
        or inspect.isasyncgenfunction(obj)
        or not _takes_no_arguments(obj)
    ):
        raise UsageError(f'"{target}" is {_describe(cast("object", obj))}; serve accepts {_SERVABLE}')
    return obj


def _takes_no_arguments(factory: Callable[..., object]) -> bool:
    try:
        inspect.signature(factory).bind()
    except TypeError:
        return False
    except ValueError:
        pass  # No signature to read (some builtins): calling it will tell.
    return True


@asynccontextmanager
async def _runtime(served: _Served, target: str) -> AsyncGenerator[AgentRuntime[Any, Any]]:
    """The runtime ``serve`` serves: the App's, or the one a factory's context manager yields, checked."""
    if isinstance(served, App):
        async with cast("App[Any, Any, Any]", served).run() as runtime:
            yield runtime
        return
    opened = served()
    if not isinstance(opened, AbstractAsyncContextManager):
        if inspect.iscoroutine(opened):
            opened.close()  # never awaited, and it must not warn so
        raise UsageError(f'"{target}" returned {_describe(opened)}; serve accepts {_SERVABLE}')
    async with cast("AbstractAsyncContextManager[object]", opened) as runtime:
        if isinstance(runtime, AgentRuntime):
            yield cast("AgentRuntime[Any, Any]", runtime)
            return
        found = _describe(runtime)
    # Raised once the factory's context has exited, so it cannot swallow this.
    raise UsageError(f'"{target}" yielded {found}, not a runtime; serve accepts {_SERVABLE}')


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What stops ``agentfx serve`` in good order: pending calls aborted and audited, the App closed, exit 0."""


@asynccontextmanager
async def stopped_by_signals(err: TextIO) -> AsyncGenerator[anyio.CancelScope]:
    """A cancel scope that SIGTERM or SIGINT cancels, both caught until the block ends.

    Serve inside the scope and close the App outside it: a signal then stops
    the serving (a pending call is aborted through its signal, so the audit
    records it) and the App still closes in good order. Where signals cannot
    be received (not the main thread, or Windows' event loop), the scope is
    returned as it is, and Ctrl-C stops the process as Python does. An
    exception leaving the block leaves as it is, not in an exception group.
    """
    async with _stop_signals(err) as stop:
        yield stop.serving


class _Stop:
    """What a stop signal cancels: the scope ``serving`` runs in, and the startup while it lasts.

    ``serve`` starts inside :meth:`starting` (the App, its program, a
    factory's context: a Redis that never answers, say) and serves inside
    ``serving``. A signal during startup cancels the startup, and whatever it
    had entered is undone as cancelled; once :meth:`started` it stops the
    serving alone, and what startup entered closes in good order after it.
    """

    __slots__ = ("_starting", "serving")

    def __init__(self) -> None:
        self.serving = anyio.CancelScope()
        self._starting: anyio.CancelScope | None = None

    def stop(self) -> None:
        self.serving.cancel()
        if self._starting is not None:
            self._starting.cancel()

    @contextmanager
    def starting(self) -> Generator[anyio.CancelScope]:
        """The scope startup runs in; a stop signal cancels it until :meth:`started`, and the block then ends quietly."""
        with anyio.CancelScope() as scope:
            if self.serving.cancel_called:
                scope.cancel()
            self._starting = scope
            try:
                yield scope
            finally:
                self._starting = None

    def started(self) -> bool:
        """Startup is over: whether to serve, which is no when a signal already stopped it."""
        self._starting = None
        return not self.serving.cancel_called


@asynccontextmanager
async def _stop_signals(err: TextIO) -> AsyncGenerator[_Stop]:
    """A :class:`_Stop` that SIGTERM or SIGINT stops, both caught until the block ends (as :func:`stopped_by_signals`)."""
    stop = _Stop()
    with ExitStack() as stack:
        try:
            signals = stack.enter_context(anyio.open_signal_receiver(*STOP_SIGNALS))
        except (NotImplementedError, RuntimeError, ValueError):
            signals = None
        # What serve's startup received before this receiver replaced its handlers.
        pending = _hand_over(signals is not None)
        if signals is None:
            yield stop
            return

        def stopping(received: int) -> None:
            if not stop.serving.cancel_called:
                err.write(f"agentfx: {signal.Signals(received).name} received; stopping\n")
                err.flush()
            stop.stop()

        if pending is not None:
            # Now, not once the watcher runs: a startup that never waits would serve first.
            stopping(pending)
        try:
            async with anyio.create_task_group() as task_group:

                async def watch() -> None:
                    async for received in signals:
                        stopping(received)

                task_group.start_soon(watch)
                try:
                    yield stop
                finally:
                    task_group.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The watcher never fails, so a lone exception is the block's own,
            # which the task group wrapped: it leaves as itself, as it came.
            if len(group.exceptions) != 1:
                raise
            lone = group.exceptions[0]
            raise lone from lone.__cause__


_REDIS_EXTRA = "pip install 'agentfx[redis]'"


def _on_redis(served: _Served, target: str, url: str, namespace: str | None) -> App[Any, Any, Any]:
    """The App served on the program ``agentfx.redis`` runs, imported only here."""
    if not isinstance(served, App):
        raise UsageError(f'--redis serves an App, and "{target}" names a runtime factory, which runs its own program')
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - read for its check: a port that is not a number raises here
    except ValueError as exc:
        raise UsageError(f'--redis takes a redis://, rediss:// or unix:// URL; "{_redacted(url)}" is not one ({exc})') from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise UsageError(f'--redis takes a redis://, rediss:// or unix:// URL, got "{_redacted(url)}"')
    if parts.scheme != "unix" and not re.fullmatch(r"/?|/[0-9]+", parts.path):
        # redis-py would take any other path for database 0, silently.
        raise UsageError(
            f'--redis: the path of "{_redacted(url)}" names no database; write none, or a number: redis://HOST:PORT/0'
        )
    try:
        adapter: Any = importlib.import_module("agentfx.redis")
    except ImportError:
        raise UsageError(f"--redis needs the Redis extra: {_REDIS_EXTRA}") from None
    refused = _redis_refuses(url)
    if refused is not None:
        raise UsageError(
            f'--redis: "{_redacted(url)}" is not a URL redis-py accepts ({_without(refused, _secrets(parts))})'
        )
    app = cast("App[Any, Any, Any]", served)
    try:
        factory = adapter.program(url, namespace=target if namespace is None else namespace, message_type=app.definition.union)
    except ValueError as exc:
        raise UsageError(_without(str(exc), _secrets(parts))) from None
    return App(
        app.definition, app.init, app.update, app.principal, audit=app.audit, program=_FirstLoad(factory, parts)
    )


def _redis_refuses(url: str) -> str | None:
    """Why redis-py would refuse ``url`` when the program starts, else ``None``; nothing is connected.

    Its own reading of the URL, query options included, down to the connection
    it would open: an option no connection takes (a misspelt one, an SSL one on
    ``redis://``) is passed through as a keyword, and only refused there.
    """
    from redis.asyncio import BlockingConnectionPool
    from redis.exceptions import RedisError

    from_url = cast("Callable[[str], BlockingConnectionPool]", getattr(BlockingConnectionPool, "from_url"))
    try:
        from_url(url).make_connection()
    except TypeError as exc:
        unknown = re.search(r"unexpected keyword argument '([^']*)'", str(exc))
        if unknown is None:
            return str(exc)
        return f'a {urllib.parse.urlsplit(url).scheme}:// URL takes no option "{unknown[1]}"'
    except (ValueError, RedisError) as exc:
        return str(exc)
    return None


_CREDENTIALS = ("password", "username")
"""Query parameters redis-py takes as credentials (``?password=...``): never printed."""


def _redacted(url: str) -> str:
    """``url`` without its credentials, for a message: ``redis://:***@host:6379/0``, ``redis://host/0?password=***``."""
    return _query_redacted(_netloc_redacted(url))


def _query_redacted(url: str) -> str:
    """``url`` with the value of each credential in its query masked, however its name is spelled or escaped."""
    head, mark, rest = url.partition("?")
    if not mark:
        return url
    query, hashmark, fragment = rest.partition("#")
    fields: list[str] = []
    for field in query.split("&"):
        name, equals, _value = field.partition("=")
        if equals and urllib.parse.unquote_plus(name).lower() in _CREDENTIALS:
            field = f"{name}=***"
        fields.append(field)
    return f"{head}?{'&'.join(fields)}{hashmark}{fragment}"


def _secrets(parts: urllib.parse.SplitResult) -> tuple[str, ...]:
    """The passwords in ``--redis``, in the netloc or the query, as given and as unescaped: for scrubbing text."""
    found = [parts.password or "", urllib.parse.unquote(parts.password or "")]
    for field in parts.query.split("&"):
        name, equals, value = field.partition("=")
        if equals and urllib.parse.unquote_plus(name).lower() == "password":
            found += [value, urllib.parse.unquote_plus(value)]
    return tuple(sorted({secret for secret in found if secret}, key=len, reverse=True))


def _netloc_redacted(url: str) -> str:
    """``url`` without the password its netloc holds: ``redis://:***@host:6379/0``."""
    try:
        parts = urllib.parse.urlsplit(url)
        password = parts.password
    except ValueError:
        password = None
        parts = None
    if parts is None or not password:
        # Unparsable: whatever sits between "//" and the last "@" may be credentials.
        head, at, tail = url.rpartition("@")
        if not at:
            return url
        scheme, slashes, _ = head.partition("//")
        return f"{scheme}{slashes}***@{tail}" if slashes else f"***@{tail}"
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _redis_address(parts: urllib.parse.SplitResult) -> str:
    """Where ``--redis`` points, never its credentials: ``127.0.0.1:6379``, ``[::1]:6379``, a socket path."""
    if parts.scheme == "unix":
        return parts.path
    host = parts.hostname or "localhost"
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{parts.port or 6379}"


class _FirstLoad:
    """The Redis program factory, with a Redis that fails its first load turned into :class:`_CannotStart`.

    Once the program has loaded, a Redis error is the served application's,
    and leaves as it is.
    """

    __slots__ = ("_factory", "_parts")

    def __init__(self, factory: Callable[[Any, Any], AbstractAsyncContextManager[Any]], parts: urllib.parse.SplitResult) -> None:
        self._factory = factory
        self._parts = parts

    def __call__(self, init: Any, update: Any) -> AbstractAsyncContextManager[Any]:
        return self._started(init, update)

    @asynccontextmanager
    async def _started(self, init: Any, update: Any) -> AsyncGenerator[Any]:
        from redis.exceptions import RedisError

        from .redis import RedisProgramError

        loaded = False
        try:
            async with self._factory(init, update) as program:
                loaded = True
                yield program
        except (RedisError, OSError) as exc:
            if loaded:
                raise
            raise _CannotStart(_redis_failure(self._parts, exc)) from None
        except RedisProgramError as exc:
            if loaded:
                raise
            # What the namespace holds cannot be served (a key of the wrong
            # kind, a Model these types cannot read): its message says which
            # key and what to do.
            raise _CannotStart(f"cannot start: {_without(str(exc), _secrets(self._parts))}") from None

    def __repr__(self) -> str:
        return repr(self._factory)


def _redis_failure(parts: urllib.parse.SplitResult, exc: BaseException) -> str:
    """One line on why the first load failed: where, and what to do, never the password."""
    from redis.exceptions import AuthenticationError, AuthorizationError, ResponseError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    where = _redis_address(parts)
    secrets = _secrets(parts)
    if isinstance(exc, AuthenticationError):
        if not secrets:
            user, _, host = parts.netloc.rpartition("@")
            return (
                f"cannot start: the Redis at {where} needs a password; give it in the --redis URL "
                f"({parts.scheme}://{user}:PASSWORD@{host}{parts.path})"
            )
        return f"cannot start: the Redis at {where} refused the credentials in the --redis URL"
    if isinstance(exc, AuthorizationError | ResponseError):
        said = _without(str(exc), secrets)
        return f"cannot start: the Redis at {where} refused the program's first commands ({said})"
    if isinstance(exc, RedisTimeoutError | TimeoutError):
        return f"cannot start: the Redis at {where} did not answer in time"
    if isinstance(exc, RedisConnectionError | OSError):
        cause = _os_error(exc)
        if cause is None:
            reason = _without(str(exc), secrets)
        elif cause.errno and cause.errno > 0 and not isinstance(cause, socket.gaierror):
            reason = os.strerror(cause.errno)  # asyncio's words repeat the address: the errno's are the reason
        else:
            reason = cause.strerror or str(cause)
        return f"cannot start: the Redis at {where} cannot be reached ({reason})"
    # InvalidResponse and the like: something answers there, but not as Redis does.
    return f"cannot start: {where} does not answer as Redis does ({_without(str(exc), secrets)})"


def _os_error(exc: BaseException) -> OSError | None:
    seen: BaseException | None = exc
    for _ in range(8):  # a bounded walk: a chain may loop
        if seen is None:
            return None
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _without(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


async def _serve_stdio(served: _Served, target: str, err: TextIO, wire: tuple[int, int]) -> None:
    """Serve over ``wire``, the copies of fds 0 and 1 :func:`_stdio_claimed` kept."""
    from .mcp._stdio import serve_descriptors

    async with _stop_signals(err) as stop:
        with stop.starting():
            async with _runtime(served, target) as runtime:
                if not stop.started():
                    return
                # stdout is the protocol's: the one line for a person goes to stderr,
                # once the target has proved servable.
                err.write(f'serving "{target}" over stdio; Ctrl-C to stop\n')
                err.flush()
                with stop.serving, _startup_frozen():
                    await serve_descriptors(runtime, *wire)


@contextmanager
def _stdio_claimed() -> Generator[tuple[int, int]]:
    """Private copies of fds 0 and 1 for the wire, from before the target is imported until its runtime has exited.

    Meanwhile fd 0 reads the null device and fd 1 writes to stderr, so what
    the target prints as it imports, starts or stops reaches stderr, never
    the protocol. A stdin or stdout closed when the process started is
    refused: its descriptor is free for whatever opens next (the event
    loop's own), which the wire would then read or overwrite.

    Raises:
        UsageError: fd 0 or fd 1 is not open.
    """
    for fd, stream, name in ((0, sys.__stdin__, "stdin"), (1, sys.__stdout__, "stdout")):
        if _closed(fd, stream):
            raise UsageError(f"--transport stdio serves over stdin and stdout, and {name} is closed")
    with claim_stdio() as wire:
        yield wire


def _closed(fd: int, stream: object) -> bool:
    """Whether this process started with ``fd`` closed (``stream`` is its ``sys.__std*__``), or it is closed now."""
    if stream is None:
        return True
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


class _Spoken:
    """Standard error, for a person: a reader that went away (``serve 2>&1 | head -1``) ends what is said there, never the command.

    A signal that stops ``serve`` says so on stderr first; a write that failed
    there used to end the signal's watcher, and ``serve`` with exit 1, not 0.
    """

    __slots__ = ("_gone", "_stream")

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str, /) -> int:
        if not self._gone:
            try:
                self._stream.write(text)
            except (OSError, ValueError):  # a closed pipe, or a stream closed under us
                self._gone = True
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._gone = True


class _Unsaid:
    """Where what is said for a person goes when stderr is closed: nowhere, without raising."""

    __slots__ = ()

    def write(self, text: str, /) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@contextmanager
def _startup_frozen() -> Generator[None]:
    """Serve with what startup built kept out of the cyclic collector's walks.

    The imported modules, the SDK's models and the application live as long
    as the server, yet every full collection a long-running server makes would
    walk them all again (some 90,000 objects: about 14 µs of each HTTP call's
    ~800 µs of CPU). ``gc.freeze()`` moves them to the permanent generation;
    reference counting still frees each one that is let go. No collection
    runs first, so starting costs nothing more; the heap is thawed when
    serving ends, for whatever the process does next, unless something had
    frozen it before (an application that freezes its own heap keeps it so).
    """
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


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
    except UnicodeError:
        # The name's IDNA encoding failed (an empty label, one past 63 characters).
        raise _CannotListen(f"cannot listen on {shown}:{port}: it is not a valid host name") from None
    return sock


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


REQUEST_STATE_KEYS = "AGENTFX_REQUEST_STATE_KEYS"
"""The environment variable ``serve --transport http`` reads the ``requestState`` key ring from.

Comma-separated secrets of at least 32 bytes each (``python -c "import
secrets; print(secrets.token_hex(32))"``): the first seals, every one
unseals, so keys rotate without downtime. Processes given the same ring
redeem each other's 2026-07-28 confirmations; unset, each process makes a key
of its own and a retry must come back to it.
"""


def _request_state_security(environ: Mapping[str, str]) -> RequestStateSecurity | None:
    """The ``RequestStateSecurity`` :data:`REQUEST_STATE_KEYS` names, or ``None`` when it is unset or empty."""
    ring = [key.strip() for key in environ.get(REQUEST_STATE_KEYS, "").split(",") if key.strip()]
    if not ring:
        return None
    from mcp.server.request_state import RequestStateSecurity

    try:
        return RequestStateSecurity(keys=ring)
    except ValueError as exc:
        # The SDK's words name the short key by position, never its value.
        raise UsageError(f"{REQUEST_STATE_KEYS}: {exc}") from None


async def _serve_http(
    served: _Served,
    target: str,
    sock: socket.socket,
    err: TextIO,
    hosts: Sequence[str] = (),
    sealing: RequestStateSecurity | None = None,
) -> None:
    from .mcp import http_app

    if isinstance(served, App):
        # One application, many agents: every session binds its own runtime
        # to the same running program.
        app = cast("App[Any, Any, Any]", served)
        asgi = http_app(app, allowed_hosts=hosts, request_state_security=sealing)

        @asynccontextmanager
        async def running() -> AsyncGenerator[HttpApp[Any]]:
            async with asgi.running():
                yield asgi

    else:
        factory = served
        entered: list[AgentRuntime[Any, Any]] = []

        @asynccontextmanager
        async def lent(_principal: None) -> AsyncGenerator[AgentRuntime[Any, Any]]:
            # The runtime entered at startup, lent and never closed here: http_app
            # releases a principal gone idle, which must not end the factory's
            # program, its Model or its audit sink.
            yield entered[0]

        asgi = http_app(lent, allowed_hosts=hosts, request_state_security=sealing)

        @asynccontextmanager
        async def running() -> AsyncGenerator[HttpApp[Any]]:
            # Entered once, before serving, as over stdio and A2A: a factory that
            # cannot give a runtime is refused before anyone connects.
            async with _runtime(factory, target) as runtime:
                entered.append(runtime)
                async with asgi.running():
                    yield asgi

    await _uvicorn(running, sock, err, lambda bound: _announce(bound, err))


def _allowed_hosts(host: str, listed: Sequence[str]) -> tuple[str, ...]:
    """The ``Host`` headers ``serve --transport http`` accepts: loopback, the address it binds, and those listed.

    The address bound counts whatever it is, a loopback one too
    (``127.0.0.2`` is none of the default names), except a wildcard, which
    no client names: those serving on one list their names with ``--allowed-host``.
    """
    named = list(listed)
    shown = f"[{host}]" if ":" in host else host
    if not _wildcard(host) and shown not in LOOPBACK_HOSTS:
        named += [shown, f"{shown}:*"]
    if not named:
        return ()  # http_app's own default: loopback only
    return (*named, *LOOPBACK_HOSTS)


def _wildcard(host: str) -> bool:
    """Whether ``host`` binds every address (``0.0.0.0``, ``::``), so that no client reaches it by that name."""
    try:
        return host == "" or ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


_SHUTDOWN_GRACE = 5
"""Seconds ``serve --transport http`` lets open requests finish when it stops."""

_LIMIT_CONCURRENCY = 2048
"""Connections and requests ``serve --transport http`` serves at once; more are answered 503 (a session's GET stream is one)."""


async def _uvicorn(
    running: Callable[[], AbstractAsyncContextManager[Any]],
    sock: socket.socket,
    err: TextIO,
    announce: Callable[[Any], None],
) -> None:
    """Serve the ASGI app ``running()`` yields on ``sock``, until it fails or a signal stops it.

    ``running()`` does what the app's lifespan would (uvicorn's is off): it
    starts the app's program, and leaving it aborts every pending call (each
    audited) and closes the app. ``announce(address)`` is told where serving
    began. Every transport served over uvicorn stops this one way.
    """
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from ._request_deadline import request_deadlines

    class _Server(uvicorn.Server):
        # uvicorn's own handlers would wait out the grace period on open calls
        # and then re-raise the signal, killing the process before the calls
        # are audited; stopped_by_signals stops it in order instead.
        @contextmanager
        def capture_signals(self) -> Generator[None]:
            yield

    finished = anyio.Event()
    server: uvicorn.Server | None = None
    failure: Exception | None = None
    # The server runs outside the app's block, so the program's failure, which
    # cancels everything inside it, lets the server shut down in good order.
    async with _stop_signals(err) as stop, anyio.create_task_group() as task_group:
        try:
            with stop.starting():
                async with running() as asgi:
                    # The app runs here, around the server, not in the server's
                    # lifespan, which could only log a failure: a program that
                    # stops with an error (a command raised) stops the server and
                    # propagates, as it does over stdio.
                    config = uvicorn.Config(
                        asgi,
                        lifespan="off",
                        log_level="warning",
                        timeout_graceful_shutdown=_SHUTDOWN_GRACE,
                        # Bounded, for a server that may face slow or many clients:
                        # past the concurrency limit uvicorn answers 503; headers are
                        # capped at 16 KiB; idle keep-alive connections close after 5 s;
                        # a connection that has not sent a whole request head within
                        # 10 s of connecting or of its last response, or its body
                        # within 30 s of its head, or that leaves what is written to it
                        # unread for 30 s, is closed, so slow, silent or deaf
                        # connections hold the limit that long at most.
                        # h11 always, even where httptools is installed: these bounds
                        # are h11's and the request deadlines'.
                        http=request_deadlines(H11Protocol),
                        limit_concurrency=_LIMIT_CONCURRENCY,
                        timeout_keep_alive=5,
                        h11_max_incomplete_event_size=16 * 1024,
                    )
                    launched = server = _Server(config)

                    async def serve() -> None:
                        try:
                            await launched.serve([sock])
                        finally:
                            finished.set()

                    task_group.start_soon(serve)
                    while not launched.started:
                        if finished.is_set():
                            return
                        await anyio.sleep(0.01)
                    if not stop.started():
                        return
                    announce(launched.servers[0].sockets[0].getsockname())
                    with stop.serving, _startup_frozen():
                        await finished.wait()
                    # Stopped by a signal: accept nothing new, then leave the block,
                    # which aborts (and audits) every pending call and closes the app.
                    for listener in launched.servers:
                        listener.close()
        except Exception as exc:
            failure = exc
        finally:
            if server is not None:
                server.should_exit = True
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


_A2A_EXTRA = "pip install 'agentfx[a2a]'"


def _require_a2a() -> None:
    """Import what ``--transport a2a`` needs, or say how to install it."""
    _require("agentfx.a2a", "uvicorn", needs="--transport a2a needs the A2A extra", extra=_A2A_EXTRA)


async def _serve_a2a(
    served: _Served, target: str, sock: socket.socket, err: TextIO, hosts: Sequence[str], listed: Sequence[str] = ()
) -> None:
    """The runtime over A2A: its card names the address bound (see :func:`_card_url`); it stops as ``--transport http`` does."""
    from .a2a import a2a_app, agent_card

    address, port = sock.getsockname()[:2]
    shown = f"[{address}]" if ":" in address else address
    url = f"http://{shown}:{port}/a2a"
    card_url = _card_url(address, port, listed) or url

    @asynccontextmanager
    async def running() -> AsyncGenerator[Any]:
        async with _runtime(served, target) as runtime:
            card = agent_card(
                runtime.definition, name=target, description=f"The agentfx contract {target}", url=card_url,
                version=__version__,
            )
            asgi = a2a_app(runtime, card, allowed_hosts=hosts)
            # The app's lifespan, run here: leaving it aborts the pending
            # tasks through their signals (each audited) before the runtime closes.
            async with asgi.router.lifespan_context(asgi):
                yield asgi

    def announce(_bound: Any) -> None:
        if not _loopback(str(address)):
            err.write(
                f"agentfx: warning: serving {shown} without authentication; anyone who can reach it can "
                "call every capability. Serve on 127.0.0.1, or serve agentfx.a2a.a2a_app(app, card, "
                "authenticate=...) from your own ASGI server.\n"
            )
        if card_url != url:
            err.write(f"agentfx: the agent card names {card_url}, after the first --allowed-host\n")
        elif _wildcard(str(address)):
            err.write(
                f"agentfx: warning: the agent card names {url}, which no client can reach; give the address "
                "clients use as the first --allowed-host\n"
            )
        err.write(f"Serving A2A (1.0 and 0.3; agent card at /.well-known/agent-card.json) at {url}\n")
        err.flush()

    await _uvicorn(running, sock, err, announce)


def _card_url(address: str, port: int, listed: Sequence[str]) -> str | None:
    """The URL an agent card names when the address bound is a wildcard: the first ``--allowed-host``'s, else ``None``.

    ``name:*`` is reached on the port bound, ``name:port`` on that port (a
    proxy's), and a bare ``name`` on the default one, as its Host header says.

    >>> _card_url("0.0.0.0", 8000, ["agents.example:*"]), _card_url("::", 8000, ["agents.example"])
    ('http://agents.example:8000/a2a', 'http://agents.example/a2a')
    >>> _card_url("127.0.0.1", 8000, ["agents.example:*"]) is None
    True
    """
    if not listed or not _wildcard(address):
        return None
    first = listed[0]
    if first.endswith(":*"):
        return f"http://{first[:-2]}:{port}/a2a"
    return f"http://{first}/a2a"


DEMO_APP = "examples.todo.app"
"""The module ``agentfx demo`` runs: the todo example of a source checkout."""


async def _demo(out: _Output) -> int:
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
        # The text is what a model reads; it carries the same facts as the
        # structured content (the new todo's id, what to fix), so only it is shown.
        text = "\n".join(block.text for block in answer.content if isinstance(block, types.TextContent))
        first, *rest = text.splitlines() or [""]
        show(f"  <- {'error: ' if answer.is_error else ''}{first}")
        for line in rest:
            show(f"     {line}")

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

    # The person at ada's client: says no to the first question, yes to the next.
    answers = ["decline", "accept"]

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        show(f"  <- elicitation/create: {params.message}")
        action = answers.pop(0) if answers else "decline"
        confirmed = action == "accept"
        show(f"  ada's person -> {action}" + (' {"confirm": true}' if confirmed else ""))
        return types.ElicitResult(action="accept", content={"confirm": True}) if confirmed else types.ElicitResult(action="decline")

    show(f"agentfx demo: the todo example ({DEMO_APP}) served over MCP to in-process clients.")
    show("ada may delete todos once a person confirms; guest may not. All act on the same running program.\n")
    async with app.program() as program:
        ada = server(app.bind(program, principal=user, audit=log), name="todo")
        visitor = server(app.bind(program, principal=guest, audit=log), name="todo")
        script = server(app.bind(program, principal=user, audit=log), name="todo")
        async with (
            mcp.Client(ada, mode="legacy", message_handler=notified, elicitation_callback=person) as client,
            mcp.Client(visitor, mode="legacy") as other,
            mcp.Client(script, mode="legacy") as unattended,
        ):
            await tools(client, "ada")
            await call(client, "ada", "create_todo", {"title": "Try agentfx"})
            await call(client, "ada", "create_todo", {"title": 42})
            await call(client, "ada", "delete_selected_todo", {})
            # The call changes which tools exist, so the server says so before answering.
            await call(client, "ada", "select_todo", {"id": "todo-1"})
            await tools(client, "ada")
            await call(other, "guest", "delete_selected_todo", {})
            await call(unattended, "ada's script (no one to ask)", "delete_selected_todo", {})
            await call(client, "ada", "delete_selected_todo", {})
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
        outcome = entry.outcome + (" (confirmed)" if entry.confirmed is True else "")
        rows.append((principal, entry.capability, entry.decision, outcome))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    for row in rows:
        show("  " + "".join(cell.ljust(width + 2) for cell, width in zip(row, widths, strict=False)) + row[3])
    return ExitCode.OK


def _port(text: str) -> int:
    """A ``--port`` value, checked here because the socket layer would wrap one out of range around silently."""
    # ASCII digits only: int() also reads "1_0000", " 80 ", "+80" and other scripts' digits.
    if re.fullmatch(r"-?[0-9]+", text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number")
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: ports are 0 to 65535 (0 picks a free one)")
    return port


_HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def _host(text: str) -> str:
    """A ``--host`` value: a name or an address, an IPv6 one with or without its URL brackets.

    >>> _host("[::1]"), _host("::1"), _host("localhost")
    ('::1', '::1', 'localhost')
    """
    if text.startswith("[") and text.endswith("]") and ":" in text:
        return text[1:-1]
    return text


def _allowed_host(text: str) -> str:
    """An ``--allowed-host`` value: a ``Host`` header as clients send it (``name``, ``name:port``), or ``name:*``.

    Checked here: the value is matched against Host headers and names the
    A2A agent card's URL, so a URL given instead would refuse every request
    and publish a card no client can follow.

    >>> _allowed_host("agents.example:*"), _allowed_host("[::1]:8443")
    ('agents.example:*', '[::1]:8443')
    >>> _allowed_host("https://agents.example")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'https://agents.example' is not a host: give a Host header's name (agents.example), name:port or name:* (any port), not a URL
    """
    name, port = text, None
    if text.startswith("["):
        end = text.find("]")
        name, rest = text[: end + 1], text[end + 1 :]
        try:
            valid = end > 0 and ipaddress.ip_address(name[1:-1]).version == 6 and rest[:1] in ("", ":")
        except ValueError:
            valid = False
        port = rest[1:] if rest else None
    else:
        if ":" in text:
            name, _, port = text.rpartition(":")
        labels = name.removesuffix(".").split(".")
        valid = name != "" and len(name) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)
    if valid and port is not None:
        valid = port == "*" or (port.isascii() and port.isdigit() and 0 < int(port) <= 65535)
    if not valid:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host: give a Host header's name (agents.example), name:port or name:* (any port), not a URL"
        )
    return text


def _exit_codes() -> str:
    return "exit status:\n" + "\n".join(f"  {int(code)}  {meaning}" for code, meaning in _MEANINGS.items())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentfx",
        description="Document, check and serve agentfx contracts.",
        epilog=_exit_codes(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"agentfx {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    manifest = commands.add_parser("manifest", help="print a contract's JSON manifest, or check a committed one")
    manifest.add_argument("target", metavar="MODULE:ATTR", help="a Definition or an App")
    manifest.add_argument(
        "--check", metavar="FILE", help="exit 1 with a diff when FILE differs from the manifest, or is absent"
    )
    manifest.set_defaults(run=_manifest_command)

    markdown = commands.add_parser("markdown", help="print a contract's Markdown documentation")
    markdown.add_argument("target", metavar="MODULE:ATTR", help="a Definition or an App")
    markdown.set_defaults(run=_markdown_command)

    serve = commands.add_parser("serve", help="serve an App over MCP, or over A2A with --transport a2a")
    serve.add_argument("target", metavar="MODULE:ATTR", help="an App, or a callable returning a runtime context")
    serve.add_argument(
        "--transport", choices=("stdio", *_NETWORK_TRANSPORTS), default="stdio", help="default: stdio"
    )
    # Defaults are applied in _serve_command, so a flag the transport cannot use is told apart from one left out.
    serve.add_argument(
        "--host",
        type=_host,
        help=(
            f"network transports only; default: {_DEFAULT_HOST}. There is no authentication: "
            "an address that is not loopback warns"
        ),
    )
    serve.add_argument(
        "--port", type=_port, help=f"network transports only; 0 picks a free port; default: {_DEFAULT_PORT}"
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        type=_allowed_host,
        metavar="HOST",
        help=(
            "network transports only; a Host header to accept besides loopback and --host (name:* for any port); "
            "repeatable. On a wildcard --host, the first is the address the A2A agent card names"
        ),
    )
    serve.add_argument(
        "--redis",
        metavar="URL",
        help="share one Model with every process serving the App on this Redis (needs agentfx[redis])",
    )
    serve.add_argument("--namespace", metavar="NS", help="with --redis: the prefix of its keys; default: MODULE:ATTR")
    serve.set_defaults(run=_serve_command)

    demo = commands.add_parser("demo", help="run the todo example end to end over a real MCP client (from the root of a source checkout)")
    demo.set_defaults(run=_demo_command)
    return parser


_DEFAULT_HOST, _DEFAULT_PORT = "127.0.0.1", 8000


def _manifest_command(args: argparse.Namespace, out: _Output, err: TextIO) -> int:
    return _manifest(args.target, args.check, out)


def _markdown_command(args: argparse.Namespace, out: _Output, err: TextIO) -> int:
    out.write(to_markdown(_definition(args.target, "markdown")))
    return ExitCode.OK


def _serve_command(args: argparse.Namespace, out: _Output, err: TextIO) -> int:
    with _abandoned_by_signals() as startup:
        _network_flags_fit(args)
        if args.transport != "stdio":
            return _serve(args, err, None, startup)
        # Over stdio, stdout carries only the protocol: claimed before the target
        # is imported, given back once its runtime has exited.
        with _stdio_claimed() as wire:
            return _serve(args, err, wire, startup)


class _Abandoned(BaseException):
    """A stop signal arrived while ``serve`` was starting, before its event loop received signals.

    A ``BaseException``, so the target's import, which turns its module's
    errors into a :class:`UsageError`, lets it through; ``main`` exits 0.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Startup:
    """The stop signal ``serve`` received while starting, before its event loop took signals over.

    Python runs a signal's handler between any two bytecodes, those of a
    callback that native code made included (pydantic-core building a
    schema, ``type.__new__`` calling ``__set_name__``), and such code turns
    what its callback raised into an error of its own: a handler that raised
    would make a signal during startup a traceback and exit 1 or 2, now and
    then. So :meth:`receive` only records the first signal, and
    :meth:`check`, between the startup's phases, abandons it there. The
    target's import alone is :meth:`interruptible`: it is the user's code,
    which may block for any time, so the signal raises at once in it.
    """

    __slots__ = ("_interruptible", "received")

    def __init__(self) -> None:
        self.received: int | None = None
        self._interruptible = False

    def receive(self, signum: int, _frame: object) -> None:
        """The handler of SIGTERM and SIGINT: the first is recorded, and raised at once only while interruptible."""
        # Once: another signal while the startup unwinds changes nothing.
        if self.received is None:
            self.received = signum
            if self._interruptible:
                raise _Abandoned(signum)

    def check(self) -> None:
        """Abandon the startup here if a stop signal was received.

        Raises:
            _Abandoned: A stop signal was received.
        """
        if self.received is not None:
            raise _Abandoned(self.received)

    @contextmanager
    def interruptible(self) -> Generator[None]:
        """A phase a stop signal interrupts at once; whatever it raises once one was received is the abandonment.

        Raises:
            _Abandoned: A stop signal was received, before or during the phase.
        """
        self.check()
        self._interruptible = True
        try:
            yield
        except Exception as exc:
            # Native code the signal interrupted may have turned _Abandoned into its own error.
            if self.received is None:
                raise
            raise _Abandoned(self.received) from exc
        finally:
            self._interruptible = False
        # The phase may have caught _Abandoned and carried on.
        self.check()

    def hand_over(self, receiving: bool) -> int | None:
        """The event loop serves from here: a stop signal recorded until now is not lost.

        Args:
            receiving: The loop's receiver has replaced this startup's
                handlers. Else the loop cannot receive signals, the handlers
                stay, and a stop signal raises :class:`_Abandoned` at once,
                wherever the loop is.

        Returns:
            The stop signal recorded, for the receiving loop to stop on, or ``None``.

        Raises:
            _Abandoned: The loop cannot receive signals, and one was received.
        """
        if receiving:
            return self.received
        self.check()
        self._interruptible = True
        return None


_starting: _Startup | None = None
"""The startup of the ``serve`` that holds SIGTERM and SIGINT until its event loop receives them."""


@contextmanager
def _abandoned_by_signals() -> Generator[_Startup]:
    """SIGTERM and SIGINT abandon the startup (:class:`_Startup`) until the event loop takes them over, then are as before.

    From the start of ``serve``: the target's import, the Redis URL's check,
    binding the port and the event loop's own start all come before
    :func:`_stop_signals` receives them. Its receiver replaces these handlers
    (the loop puts the defaults back as it leaves, so a signal after serving
    has stopped acts as Python's own), and :func:`_hand_over` passes it a
    signal recorded meanwhile; the previous ones are put back here. Outside
    the main thread nothing is installed, and nothing is ever received.
    """
    global _starting
    startup = _Startup()
    previous: dict[signal.Signals, Any] = {}
    try:
        for signum in STOP_SIGNALS:
            try:
                previous[signum] = signal.signal(signum, startup.receive)
            except ValueError:  # not the main thread
                break
        if previous:
            _starting = startup
        yield startup
    finally:
        if _starting is startup:
            _starting = None
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _hand_over(receiving: bool) -> int | None:
    """:meth:`_Startup.hand_over` for the ``serve`` starting in this thread, if any; once."""
    global _starting
    startup = _starting
    if startup is None or threading.current_thread() is not threading.main_thread():
        return None
    _starting = None
    return startup.hand_over(receiving)


def _serve(args: argparse.Namespace, err: TextIO, wire: tuple[int, int] | None, startup: _Startup) -> int:
    # The target first: a wrong one is told apart without loading the MCP SDK.
    with startup.interruptible():
        served = _served(args.target)
    if args.redis is not None:
        served = _on_redis(served, args.target, args.redis, args.namespace)
    elif args.namespace is not None:
        raise UsageError("--namespace names the keys of --redis; give --redis URL too")
    startup.check()
    if args.transport == "a2a":
        _require_a2a()
    else:
        _require("agentfx.mcp", *(("uvicorn",) if args.transport == "http" else ()))
    sealing = _request_state_security(os.environ) if args.transport == "http" else None
    startup.check()
    try:
        if wire is not None:
            anyio.run(_serve_stdio, served, args.target, err, wire)
        else:
            host = _DEFAULT_HOST if args.host is None else args.host
            port = _DEFAULT_PORT if args.port is None else args.port
            with _listen(host, port) as sock:
                startup.check()
                # uvicorn runs on asyncio only.
                hosts = _allowed_hosts(host, args.allowed_host or ())
                if args.transport == "a2a":
                    listed = args.allowed_host or ()
                    anyio.run(_serve_a2a, served, args.target, sock, err, hosts, listed, backend="asyncio")
                else:
                    anyio.run(_serve_http, served, args.target, sock, err, hosts, sealing, backend="asyncio")
    except (UsageError, _CannotStart):
        raise
    except Exception as exc:
        # The application's own error (a command raised), once the server has
        # shut down: the traceback is for the person who wrote it.
        err.write("agentfx: the served application stopped with an error:\n")
        traceback.print_exception(exc, file=err)
        return ExitCode.APP_FAILED
    return ExitCode.OK


def _demo_command(args: argparse.Namespace, out: _Output, err: TextIO) -> int:
    _require("agentfx.mcp")
    return anyio.run(_demo, out)


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the ``agentfx`` command and return its exit code.

    Args:
        argv: The arguments after the program name; ``sys.argv[1:]`` by default.
        out: Where results go; standard output, written as UTF-8, by default.
        err: Where errors and messages for a person go; standard error by default.

    Returns:
        An :class:`ExitCode`: 0 on success, 1 when ``manifest --check`` found
        drift, 2 for a usage error (including a module that raised on import,
        a missing MCP extra, a standard output that is closed or cannot be
        written, and ``serve`` with a standard error that is closed), 3 when ``serve`` cannot start (its address, or its Redis), 4
        when the application ``serve`` was serving stopped with an error, 130
        when Ctrl-C interrupted any other command. Errors argparse finds exit 2
        through ``SystemExit``, as ``--help`` and ``--version`` exit 0.
    """
    standard: _StandardOutput | None = None
    stdout: _Output
    if out is None:
        stdout = standard = _StandardOutput()
    else:
        stdout = out
    stderr: TextIO | None = sys.stderr if err is None else err
    unsaid = stderr is None or (err is None and _closed(2, sys.__stderr__))
    if stderr is None or unsaid:
        stderr = cast("TextIO", _Unsaid())
    else:
        stderr = cast("TextIO", _Spoken(stderr))
    # argparse prints its usage to stdout when sys.stderr is None: to no one, as the rest.
    with redirect_stderr(stderr) if unsaid else nullcontext():
        args = _parser().parse_args(argv)
    command: Callable[[argparse.Namespace, _Output, TextIO], int] = args.run
    if unsaid and args.command == "serve":
        # Refused, as a closed stdin or stdout is: fd 2 is free for whatever
        # opens next (the event loop's own, a Redis connection), which what the
        # target prints over stdio would then overwrite; and why serving stopped
        # or could not start would be said to no one. The code is all there is.
        return ExitCode.USAGE
    try:
        code = int(command(args, stdout, stderr))
    except _ImportFailed as exc:
        stderr.write(exc.shown)
        stderr.write(f"agentfx: {exc}\n")
        return ExitCode.USAGE
    except UsageError as exc:
        stderr.write(f"agentfx: {exc}\n")
        return ExitCode.USAGE
    except _CannotStart as exc:
        stderr.write(f"agentfx: {exc}\n")
        return ExitCode.CANNOT_START
    except _Abandoned as exc:
        # As a signal that stops the startup in the event loop: nothing was served or announced.
        stderr.write(f"agentfx: {signal.Signals(exc.signum).name} received; stopping\n")
        return ExitCode.OK
    except KeyboardInterrupt:
        if args.command == "serve":
            return ExitCode.OK  # interrupted before it served: serving stops on SIGINT with 0 too
        # Not 0: a manifest redirected to a file would be empty, a check would pass unfinished.
        stderr.write("agentfx: interrupted\n")
        return ExitCode.INTERRUPTED
    if standard is not None:
        standard.flush()
        unwritten = standard.said()
        if unwritten is not None:
            stderr.write(f"agentfx: {unwritten}\n")
            return ExitCode.USAGE
    return code
