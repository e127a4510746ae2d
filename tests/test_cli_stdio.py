"""``agentfx serve --transport stdio`` in a subprocess: stdout carries the protocol alone, from import to exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp_wire import INITIALIZE

AGENTFX = str(Path(sys.executable).with_name("agentfx"))

PRINTING = '''\
print("printed on import")

import contextlib

import msgspec

import agentfx


class Model(msgspec.Struct, frozen=True):
    n: int = 0


class Ping(msgspec.Struct, frozen=True, tag=True):
    pass


app = agentfx.App(
    agentfx.define(agentfx.expose(Ping, agentfx.variant(Ping, "Ping", name="ping"))),
    init=Model(),
    update=lambda model, _message: model,
)


@contextlib.asynccontextmanager
async def _served():
    print("printed on entry")
    async with app.run() as runtime:
        yield runtime
    print("printed on exit")


def served():
    return _served()
'''


def serve(cwd: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [AGENTFX, "serve", *argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=30, check=False
    )


@pytest.mark.parametrize(
    ("target", "printed"),
    [
        ("printing:app", ["printed on import"]),
        ("printing:served", ["printed on import", "printed on entry", "printed on exit"]),
    ],
)
def test_what_the_target_prints_while_it_imports_starts_or_stops_goes_to_stderr(
    tmp_path: Path, target: str, printed: list[str]
) -> None:
    (tmp_path / "printing.py").write_text(PRINTING)
    done = serve(tmp_path, target, stdin=json.dumps(INITIALIZE) + "\n")
    assert done.returncode == 0, done.stderr
    # The initialize answer, and nothing else.
    [line] = done.stdout.splitlines()
    assert json.loads(line)["id"] == INITIALIZE["id"]
    assert [said for said in done.stderr.splitlines() if said.startswith("printed")] == printed


def test_a_module_that_prints_then_fails_to_import_prints_to_stderr(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("print('printed on import')\nraise RuntimeError('not today')\n")
    done = serve(tmp_path, "broken:app")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("printed on import\n")
    assert done.stderr.endswith('agentfx: Cannot import "broken": it raised RuntimeError (traceback above)\n')


@pytest.mark.parametrize(("redirect", "name"), [("<&-", "stdin"), (">&-", "stdout")])
def test_a_closed_stdin_or_stdout_is_refused_before_serving(redirect: str, name: str) -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["bash", "-c", f'exec "$0" serve tests.mcp_app:app {redirect}', AGENTFX],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL if name == "stdin" else None,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        2,
        f"agentfx: --transport stdio serves over stdin and stdout, and {name} is closed\n",
    )


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        # serve says what it serves, why it stopped and why it cannot start on
        # stderr, and over stdio the target's prints go there: refused, as a
        # closed stdin or stdout is, with nowhere to say why.
        ("serve tests.mcp_app:app", 2),
        ("serve tests.mcp_app:app --transport http --port 0", 2),
        ("serve no_such_module:app", 2),
        ("manifest no_such_module:app", 2),
        ("serve --no-such-flag", 2),
        # The other commands need no stderr to do their work.
        ("manifest tests.mcp_app:app --check no-such-manifest.json", 1),
    ],
)
def test_with_stderr_closed_the_exit_code_keeps_its_meaning(argv: str, code: int) -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["bash", "-c", f'exec "$0" {argv} 2>&-', AGENTFX],
        cwd=root,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == code
    # Nothing meant for stderr reaches stdout instead (argparse's usage would).
    drifted = "no-such-manifest.json does not exist; write it with: agentfx manifest tests.mcp_app:app > no-such-manifest.json\n"
    assert done.stdout == ("" if code == 2 else drifted)


def test_with_stderr_closed_a_claimed_stdout_writes_to_the_null_device() -> None:
    # Not to a null device opened read-only in fd 2's place, which fails every write.
    code = (
        "import os\n"
        "os.close(2)\n"
        "from agentfx._fds import claim_stdio\n"
        "with claim_stdio():\n"
        "    os.write(1, b'printed while claimed')\n"
        "os.write(1, b'given back')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False
    )
    assert (done.returncode, done.stdout) == (0, "given back")
