"""A stop signal while ``agentfx serve`` is still starting: it stops at once, exits 0, and never says it serves."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentfx.cli import STOP_SIGNALS

ROOT = Path(__file__).resolve().parents[1]
AGENTFX = str(Path(sys.executable).with_name("agentfx"))

TRANSPORTS = {
    "stdio": (),
    "http": ("--transport", "http", "--port", "0"),
    "a2a": ("--transport", "a2a", "--port", "0"),
}


@contextmanager
def started(*argv: str, cwd: Path = ROOT) -> Generator[subprocess.Popen[str]]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    process = subprocess.Popen(
        [AGENTFX, "serve", *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def stopped(process: subprocess.Popen[str], signum: signal.Signals) -> tuple[int | None, str, str, float]:
    """Send ``signum``; the exit code (``None`` if it did not exit within 5 s), stdout, stderr and the seconds it took."""
    began = time.monotonic()
    process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        return None, "", "", time.monotonic() - began
    return process.returncode, out, err, time.monotonic() - began


@pytest.mark.parametrize("transport", list(TRANSPORTS))
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_a_slow_factory_entry_stops_serving_before_it_began(
    transport: str, signum: signal.Signals
) -> None:
    with started("tests.cli_targets:slow_start", *TRANSPORTS[transport]) as process:
        assert process.stderr is not None
        assert process.stderr.readline() == "slow_start: starting\n"
        code, out, err, took = stopped(process, signum)
    assert (code, out, err) == (0, "", f"agentfx: {signum.name} received; stopping\n")
    assert took < 5


@contextmanager
def silent_server() -> Generator[tuple[int, threading.Event]]:
    """A TCP server that accepts connections and never answers: a Redis that hangs; the event is set on the first."""
    accepted = threading.Event()
    held: list[socket.socket] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.05)
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                try:
                    held.append(listener.accept()[0])
                    accepted.set()
                except TimeoutError:
                    pass

        thread = threading.Thread(target=accept)
        thread.start()
        try:
            yield int(listener.getsockname()[1]), accepted
        finally:
            done.set()
            thread.join(5)
            for connection in held:
                connection.close()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_signal_while_redis_never_answers_stops_at_once(transport: str) -> None:
    with silent_server() as (port, accepted):
        argv = ("tests.redis_app:app", *TRANSPORTS[transport], "--redis", f"redis://127.0.0.1:{port}/0")
        with started(*argv) as process:
            assert accepted.wait(10), "the program never reached the server"
            code, out, err, took = stopped(process, signal.SIGTERM)
    # Not exit 3 some seconds later, once the connection timed out.
    assert (code, out, err) == (0, "", "agentfx: SIGTERM received; stopping\n")
    assert took < 5


SLOW_IMPORT = """\
import sys
import time

print("slow_import: importing", file=sys.stderr, flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_the_target_imports_abandons_the_startup(
    tmp_path: Path, transport: str, signum: signal.Signals
) -> None:
    (tmp_path / "slow_import.py").write_text(SLOW_IMPORT)
    with started("slow_import:app", *TRANSPORTS[transport], cwd=tmp_path) as process:
        assert process.stderr is not None
        assert process.stderr.readline() == "slow_import: importing\n"
        code, out, err, took = stopped(process, signum)
    # Not killed by the signal (-15), nor a KeyboardInterrupt's traceback.
    assert (code, out, err) == (0, "", f"agentfx: {signum.name} received; stopping\n")
    assert took < 5


def test_a_signal_while_the_target_imports_abandons_the_startup_at_once_and_once() -> None:
    from agentfx.cli import _abandoned_by_signals, _Abandoned  # pyright: ignore[reportPrivateUsage]

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    began = time.monotonic()
    with pytest.raises(_Abandoned) as raised, _abandoned_by_signals() as startup, startup.interruptible():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            # Another signal while the startup unwinds changes nothing.
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert raised.value.signum == signal.SIGTERM
    assert time.monotonic() - began < 4
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before


def test_elsewhere_before_the_event_loop_receives_it_a_signal_abandons_the_startup_at_its_next_check() -> None:
    from agentfx.cli import _abandoned_by_signals, _Abandoned  # pyright: ignore[reportPrivateUsage]

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    finished: list[str] = []
    with pytest.raises(_Abandoned) as raised, _abandoned_by_signals() as startup:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
        # Only recorded: what was running goes on to its end.
        finished.append("phase")
        startup.check()
    assert (raised.value.signum, finished) == (signal.SIGTERM, ["phase"])
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_inside_native_code_of_the_startup_neither_breaks_it_nor_fails_the_exit(
    monkeypatch: pytest.MonkeyPatch, transport: str, signum: signal.Signals
) -> None:
    import agentfx.cli
    from agentfx.cli import main

    require = agentfx.cli._require  # pyright: ignore[reportPrivateUsage]
    required: list[str] = []

    def native(*modules: str, **options: str) -> None:
        # What native code does with an exception a callback of its raised (pydantic-core
        # building a schema as the SDK imports): an error of its own instead.
        try:
            signal.raise_signal(signum)
        except BaseException as exc:
            raise RuntimeError("the native call failed") from exc
        require(*modules, **options)
        required.extend(modules)

    monkeypatch.setattr(agentfx.cli, "_require", native)
    err = io.StringIO()
    code = main(["serve", "tests.mcp_app:app", *TRANSPORTS[transport]], out=io.StringIO(), err=err)
    assert (code, err.getvalue()) == (0, f"agentfx: {signum.name} received; stopping\n")
    assert required[0] == "agentfx.mcp"


WRAPPING_IMPORT = """\
import signal

try:
    signal.raise_signal(signal.{name})
except BaseException as exc:
    # As native code turns what its callback raised into its own error (type.__new__ calling __set_name__).
    raise RuntimeError("the model could not be built") from exc
"""


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_the_target_turns_into_its_own_error_on_import_still_abandons_the_startup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, transport: str, signum: signal.Signals
) -> None:
    from agentfx.cli import main

    (tmp_path / "wrapping_import.py").write_text(WRAPPING_IMPORT.format(name=signum.name))
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    err = io.StringIO()
    code = main(["serve", "wrapping_import:app", *TRANSPORTS[transport]], out=io.StringIO(), err=err)
    # Not exit 2 with the module's traceback.
    assert (code, err.getvalue()) == (0, f"agentfx: {signum.name} received; stopping\n")


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_just_before_the_event_loop_receives_signals_stops_it_before_it_serves(
    monkeypatch: pytest.MonkeyPatch, transport: str, signum: signal.Signals
) -> None:
    from agentfx.cli import main

    open_signal_receiver = anyio.open_signal_receiver

    def late(*signals: signal.Signals) -> Any:
        # The last moment the startup's handlers are there: past its every check.
        signal.raise_signal(signum)
        return open_signal_receiver(*signals)

    monkeypatch.setattr(anyio, "open_signal_receiver", late)
    err = io.StringIO()
    # A server that missed the signal would serve (over HTTP, until this stops it).
    timer = threading.Timer(5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        code = main(["serve", "tests.mcp_app:app", *TRANSPORTS[transport]], out=io.StringIO(), err=err)
    finally:
        timer.cancel()
    assert (code, err.getvalue()) == (0, f"agentfx: {signum.name} received; stopping\n")


def test_once_the_event_loop_receives_signals_they_stop_it_as_before() -> None:
    from agentfx.cli import _abandoned_by_signals, _stop_signals  # pyright: ignore[reportPrivateUsage]

    err = io.StringIO()

    async def serving() -> bool:
        async with _stop_signals(err) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            with anyio.fail_after(5):
                while not stop.serving.cancel_called:
                    await anyio.sleep(0.01)
            return True

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    with _abandoned_by_signals():
        assert anyio.run(serving, backend="asyncio")
    assert err.getvalue() == "agentfx: SIGTERM received; stopping\n"
    assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == before
