"""What ``agentfx`` writes to stdout: UTF-8 whatever the locale, and one line when it cannot write or is interrupted."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentfx import cli
from agentfx.cli import ExitCode, main

ROOT = Path(__file__).resolve().parents[1]
AGENTFX = str(Path(sys.executable).with_name("agentfx"))
TARGET = "examples.todo.app:AppAgent"


def agentfx_(*argv: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[bytes]:
    environ = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [AGENTFX, *argv], cwd=cwd, env={**environ, **env}, capture_output=True, timeout=30, check=False
    )


# --- Ctrl-C ------------------------------------------------------------------------------------


COMMANDS = [("manifest", TARGET), ("manifest", TARGET, "--check", "examples/todo/agent.json"), ("markdown", TARGET)]


@pytest.mark.parametrize("argv", [*COMMANDS, ("demo",)], ids=["manifest", "check", "markdown", "demo"])
def test_ctrl_c_is_exit_130_and_one_line_never_success(monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...]) -> None:
    def interrupted(*_args: object) -> object:
        raise KeyboardInterrupt

    async def demo_interrupted(_out: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load", interrupted)
    monkeypatch.setattr(cli, "_demo", demo_interrupted)
    out, err = io.StringIO(), io.StringIO()
    assert (main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()) == (130, "", "agentfx: interrupted\n")


@pytest.mark.parametrize("argv", COMMANDS, ids=["manifest", "check", "markdown"])
def test_sigint_while_a_contract_loads_leaves_nothing_that_looks_written(tmp_path: Path, argv: tuple[str, ...]) -> None:
    (tmp_path / "slow.py").write_text("import sys, time\nprint('importing', file=sys.stderr, flush=True)\ntime.sleep(30)\n")
    command = [AGENTFX, argv[0], "slow:app", *argv[2:]]
    if "--check" in argv:
        command[-1] = str(ROOT / "examples" / "todo" / "agent.json")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stderr is not None
        assert process.stderr.readline() == "importing\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=10)
    assert (process.returncode, out, err) == (130, "", "agentfx: interrupted\n")


# --- UTF-8 whatever the locale ------------------------------------------------------------------

UNICODE = """\
import msgspec

import agentfx


class Deleted(msgspec.Struct, frozen=True, tag=True):
    title: str


definition = agentfx.define(
    agentfx.expose(Deleted, agentfx.variant(Deleted, "Löscht ein Todo — für immer", name="delete"))
)
"""


@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_manifest_and_markdown_are_utf_8_whatever_the_locale(tmp_path: Path, encoding: str) -> None:
    (tmp_path / "unicode.py").write_text(UNICODE, encoding="utf-8")
    for command in ("manifest", "markdown"):
        expected = agentfx_(command, "unicode:definition", cwd=tmp_path, PYTHONIOENCODING="utf-8")
        assert expected.returncode == 0 and "für immer".encode() in expected.stdout
        done = agentfx_(command, "unicode:definition", cwd=tmp_path, PYTHONIOENCODING=encoding)
        assert (done.returncode, done.stdout, done.stderr) == (0, expected.stdout, b"")
        if command == "manifest":
            (tmp_path / "agent.json").write_bytes(done.stdout)
    # What was written is what --check accepts, in the same locale.
    checked = agentfx_("manifest", "unicode:definition", "--check", "agent.json", cwd=tmp_path, PYTHONIOENCODING=encoding)
    assert (checked.returncode, checked.stdout) == (0, b"agent.json matches unicode:definition\n")


# --- a stdout that cannot be written --------------------------------------------------------------


def test_a_stdout_whose_reader_left_is_one_line_not_a_traceback() -> None:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    with subprocess.Popen([AGENTFX, "demo"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # as `agentfx demo | head -0` would
        err = process.stderr.read()
        process.wait(30)
    assert (process.returncode, err) == (ExitCode.USAGE, b"agentfx: cannot write to stdout: Broken pipe\n")


@pytest.mark.parametrize(
    ("redirect", "said"),
    [(">&-", "it is closed"), (">/dev/full", "No space left on device")],
    ids=["closed", "full"],
)
def test_a_closed_or_full_stdout_is_one_line_and_exit_2(redirect: str, said: str) -> None:
    done = subprocess.run(
        ["bash", "-c", f'exec "$0" manifest {TARGET} {redirect}', AGENTFX],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stderr) == (2, f"agentfx: cannot write to stdout: {said}\n")
