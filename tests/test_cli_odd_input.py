"""Odd arguments, files and modules the ``agentfx`` command meets: each is one line and its exit code, never a traceback."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentfx import cli
from agentfx.cli import ExitCode, main
from tests.test_cli_http import SERVING, serve_while

ROOT = Path(__file__).resolve().parents[1]
AGENTFX = str(Path(sys.executable).with_name("agentfx"))
TARGET = "examples.todo.app:AppAgent"
SERVED = "examples.todo.app:app"
MANIFEST = ROOT / "examples" / "todo" / "agent.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# --- --port and --host -------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["1_0000", "\u0668\u0660\u0660\u0661", " 8002 ", "+8003", "0x50"])
def test_a_port_that_is_not_ascii_digits_is_a_usage_error(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    # int() reads all but the last of these: "1_0000" served on port 10000, Arabic-Indic digits on 8001.
    with pytest.raises(SystemExit) as exited:
        main(["serve", SERVED, "--transport", "http", "--port", port], out=io.StringIO(), err=io.StringIO())
    assert exited.value.code == ExitCode.USAGE
    assert f"argument --port: {port!r} is not a port number" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["a..b", "a" * 64 + ".example"], ids=["empty-label", "long-label"])
@pytest.mark.parametrize("transport", ["http", "a2a"])
def test_a_host_name_that_cannot_be_encoded_cannot_be_listened_on(host: str, transport: str) -> None:
    # The name's IDNA encoding raised UnicodeError, reported as the application's failure with a traceback (exit 4).
    code, _, said = run("serve", SERVED, "--transport", transport, "--port", "0", "--host", host)
    assert (code, said) == (ExitCode.CANNOT_START, f"agentfx: cannot listen on {host}:0: it is not a valid host name\n")


def test_an_ipv6_host_in_url_brackets_is_served_on_that_address() -> None:
    # Before, "[::1]" was looked up as a name: "cannot listen on [[::1]]:0".
    code, said, failures = serve_while(lambda url: None, SERVED, "--host", "[::1]")
    assert failures == [] and code == ExitCode.OK
    found = SERVING.search(said)
    assert found is not None and found.group(1).startswith("http://[::1]:")


def test_a_stop_signal_still_exits_0_when_the_reader_of_stderr_has_gone() -> None:
    # `agentfx serve ... 2>&1 | head -1`: saying "SIGTERM received" failed, which ended
    # the signal's watcher and the command with exit 1.
    class Gone(io.StringIO):
        def write(self, text: str, /) -> int:
            if self.getvalue():
                raise BrokenPipeError(32, "Broken pipe")
            return super().write(text)

    err = Gone()

    def stop() -> None:
        deadline = time.monotonic() + 10
        while SERVING.search(err.getvalue()) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=stop)
    thread.start()
    try:
        code = main(["serve", SERVED, "--transport", "http", "--port", "0"], out=io.StringIO(), err=err)
    finally:
        thread.join(20)
    assert SERVING.search(err.getvalue()) is not None
    assert code == ExitCode.OK


# --- manifest --check FILE ---------------------------------------------------------------------


def agentfx_(*argv: str | bytes) -> subprocess.CompletedProcess[bytes]:
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([AGENTFX, *argv], cwd=ROOT, env=environ, capture_output=True, timeout=30, check=False)


def test_a_check_file_whose_name_is_not_utf_8_is_checked_and_named_as_it_is(tmp_path: Path) -> None:
    # Its name, decoded with surrogateescape, failed to encode as UTF-8: a traceback and exit 1 ("drifted").
    matching = os.path.join(os.fsencode(tmp_path), b"caf\xe9.json")
    Path(os.fsdecode(matching)).write_bytes(MANIFEST.read_bytes())
    done = agentfx_("manifest", TARGET, "--check", matching)
    assert (done.returncode, done.stdout, done.stderr) == (0, matching + b" matches " + TARGET.encode() + b"\n", b"")
    missing = os.path.join(os.fsencode(tmp_path), b"missing\xe9.json")
    done = agentfx_("manifest", TARGET, "--check", missing)
    assert done.returncode == ExitCode.DRIFTED and done.stdout.startswith(missing + b" does not exist; write it with:")


def test_a_check_file_holding_a_lone_surrogate_is_shown_in_its_diff(tmp_path: Path) -> None:
    committed = tmp_path / "agent.json"
    committed.write_text('{"capabilities": [], "resources": [], "x": "\\ud800"}', encoding="utf-8")
    done = agentfx_("manifest", TARGET, "--check", str(committed))
    assert done.returncode == ExitCode.DRIFTED and done.stderr == b""
    assert b'-  "x": "\\ud800"' in done.stdout


def test_a_check_file_saved_with_a_byte_order_mark_is_still_the_manifest(tmp_path: Path) -> None:
    committed = tmp_path / "agent.json"
    committed.write_bytes(b"\xef\xbb\xbf" + MANIFEST.read_bytes())
    assert run("manifest", TARGET, "--check", str(committed)) == (0, f"{committed} matches {TARGET}\n", "")


def test_a_check_file_nested_too_deeply_to_read_is_not_a_manifest(tmp_path: Path) -> None:
    # A RecursionError escaped, with exit 1: "drifted".
    committed = tmp_path / "agent.json"
    committed.write_text('{"capabilities": [], "x": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    said = f"agentfx: {committed} is not an agentfx manifest (it is not JSON); --check compares a file written by agentfx manifest\n"
    assert run("manifest", TARGET, "--check", str(committed)) == (ExitCode.USAGE, "", said)


def test_a_check_file_read_but_nested_too_deeply_to_compare_is_not_a_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The reader and the comparison recurse differently, so a file at the edge can be read and not compared:
    # stood in for here, as that edge moves with the stack the command is called from.
    committed = tmp_path / "agent.json"
    committed.write_text('{"capabilities": [], "x": [[[]]]}', encoding="utf-8")

    def too_deep(value: object) -> str:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cli, "_canonical", too_deep)
    said = f"agentfx: {committed} is not an agentfx manifest (it is nested too deeply); --check compares a file written by agentfx manifest\n"
    assert run("manifest", TARGET, "--check", str(committed)) == (ExitCode.USAGE, "", said)


# --- what a target's module does -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "raised"),
    [
        ("import asyncio\nraise asyncio.CancelledError('import-time work was cancelled')\n", "CancelledError"),
        ("raise GeneratorExit\n", "GeneratorExit"),
    ],
    ids=["cancelled", "generator-exit"],
)
def test_a_module_raising_a_base_exception_on_import_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, raised: str
) -> None:
    # Not an Exception: it passed the CLI's own handling, a raw traceback and exit 1.
    name = f"odd_import_{raised.lower()}_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    code, out, said = run("manifest", f"{name}:x")
    assert (code, out) == (ExitCode.USAGE, "")
    assert said.endswith(f'agentfx: Cannot import "{name}": it raised {raised} (traceback above)\n')
    assert said.count("Traceback") == 1


def test_a_function_whose_signature_attribute_is_not_one_is_described_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"odd_signature_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text("def f():\n    pass\nf.__signature__ = 'not a signature'\n", encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    said = f'agentfx: "{name}:f" is the function f(...); manifest accepts a Definition or an App\n'
    assert run("manifest", f"{name}:f") == (ExitCode.USAGE, "", said)


def test_the_help_of_host_says_which_addresses_warn(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert re.search(r"an\s+address\s+that\s+is\s+not\s+loopback\s+warns", capsys.readouterr().out)
