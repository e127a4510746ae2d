"""The ``agentfx`` command: manifest (and its drift check), markdown, serve targets, usage errors."""

from __future__ import annotations

import gc
import importlib.metadata
import io
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import agentfx
import agentfx.mcp
import agentfx.mcp._stdio
from agentfx import cli
from agentfx.cli import ExitCode, load, main, render_manifest
from tests.mcp_app import definition
from tests.mcp_wire import INITIALIZE

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_MANIFEST = ROOT / "examples" / "todo" / "agent.json"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_manifest_prints_the_contracts_manifest() -> None:
    code, out, _ = run("manifest", "tests.mcp_app:definition")
    assert code == 0
    assert json.loads(out) == agentfx.to_manifest(definition)
    assert out == render_manifest(definition)
    assert out.endswith("}\n") and not out.endswith("\n\n")


def test_an_app_names_its_contract() -> None:
    assert run("manifest", "tests.mcp_app:app") == run("manifest", "tests.mcp_app:definition")
    assert run("markdown", "tests.mcp_app:app")[1] == agentfx.to_markdown(definition)


def test_the_committed_example_manifest_has_not_drifted() -> None:
    code, out, _ = run("manifest", "examples.todo.app:AppAgent", "--check", str(EXAMPLE_MANIFEST))
    assert (code, out) == (0, f"{EXAMPLE_MANIFEST} matches examples.todo.app:AppAgent\n")


def test_the_check_passes_as_python_dash_m_agentfx() -> None:
    command = [sys.executable, "-m", "agentfx", "manifest", "examples.todo.app:AppAgent"]
    check = ["--check", "examples/todo/agent.json"]
    done = subprocess.run([*command, *check], cwd=ROOT, capture_output=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_drifted_manifest_fails_with_a_diff(tmp_path: Path) -> None:
    committed = json.loads(render_manifest(definition))
    committed["capabilities"][0]["description"] = "An outdated description"
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(committed, indent=4))
    code, out, _ = run("manifest", "tests.mcp_app:definition", "--check", str(path))
    assert code == 1
    assert '-      "description": "An outdated description",' in out
    assert '+      "description": "Add an item",' in out
    assert "has drifted" in out and "agentfx manifest tests.mcp_app:definition >" in out


def test_formatting_alone_is_not_drift(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(agentfx.to_manifest(definition), indent=4, sort_keys=True))
    assert run("manifest", "tests.mcp_app:definition", "--check", str(path))[0] == 0


@pytest.mark.parametrize(("now", "committed"), [(False, 0), (True, 1), (True, 1.0)])
def test_a_value_of_another_json_type_is_drift_even_where_python_finds_them_equal(
    tmp_path: Path, now: bool, committed: float
) -> None:
    manifest = json.loads(render_manifest(definition))
    capability = next(c for c in manifest["capabilities"] if c["modelDependent"] is now)
    capability["modelDependent"] = committed
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(manifest, indent=2))
    code, out, _ = run("manifest", "tests.mcp_app:definition", "--check", str(path))
    assert code == 1
    assert f'-      "modelDependent": {json.dumps(committed)},' in out
    assert f'+      "modelDependent": {json.dumps(now)},' in out


def test_a_committed_manifest_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = run("manifest", "tests.mcp_app:definition", "--check", str(tmp_path))
    assert (code, out) == (2, "")
    assert err.startswith(f"agentfx: Cannot read {tmp_path}: ")


def test_markdown_prints_the_contracts_documentation() -> None:
    code, out, _ = run("markdown", "examples.todo.app:AppAgent")
    assert code == 0
    assert out == (ROOT / "examples" / "todo" / "AGENT.md").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("manifest", "examples.todo.app"), "is not MODULE:ATTR"),
        (("manifest", "no_such_module_here:x"), 'Cannot import "no_such_module_here": no such module'),
        (("manifest", "examples.todo.app:Nope"), '"examples.todo.app" has no attribute "Nope"'),
        (("markdown", "examples.todo.app:update"), "markdown accepts a Definition or an App"),
        (("serve", "tests.mcp_app:definition"), "serve accepts an App"),
        (("serve", "tests.mcp_app:Model"), "serve accepts an App"),
    ],
)
def test_usage_errors_exit_2_with_a_message(argv: tuple[str, ...], message: str) -> None:
    code, out, err = run(*argv)
    assert (code, out) == (2, "")
    assert err.startswith("agentfx: ") and message in err


def test_an_unknown_command_is_argparses_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["frobnicate"])
    assert exited.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_load_follows_dotted_attributes() -> None:
    assert load("tests.mcp_app:app.definition") is definition


# --- .ci/run: the README's test command, as a fresh clone runs it ---------------------


def ci_run(tmp_path: Path, readme: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / ".ci").mkdir()
    script = tmp_path / ".ci" / "run"
    script.write_text((ROOT / ".ci" / "run").read_text())
    (tmp_path / "README.md").write_text(readme)
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30, check=False)


def test_ci_runs_the_command_between_the_readme_markers(tmp_path: Path) -> None:
    readme = "# x\n\n<!-- test-command -->\n```bash\necho ran the readme command\n```\n<!-- /test-command -->\n"
    done = ci_run(tmp_path, readme)
    assert (done.returncode, done.stdout) == (0, "+ echo ran the readme command\nran the readme command\n")


def test_ci_says_so_when_the_readme_has_no_test_command(tmp_path: Path) -> None:
    done = ci_run(tmp_path, "# x\n\nNo markers here.\n")
    assert done.returncode == 1
    assert done.stderr == "README.md has no test command between its test-command markers\n"


# --- what a missing module is --------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("depless:x", 'Cannot import "depless": no such module'),
        ("depless.app:x", 'Cannot import "depless.app": no such module'),
        ("depful.app:x", 'Cannot import "depful.app": no such module'),
        ("dep_needing:x", 'Cannot import "dep_needing": it needs the module "dep", which is not installed'),
        ("depful.needing:x", 'Cannot import "depful.needing": it needs the module "dep", which is not installed'),
    ],
)
def test_a_missing_dependency_is_not_a_missing_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    # "dep_needing" starts with "dep", the name of what it fails to import.
    (tmp_path / "dep_needing.py").write_text("import dep\n")
    (tmp_path / "depful").mkdir()
    (tmp_path / "depful" / "__init__.py").write_text("")
    (tmp_path / "depful" / "needing.py").write_text("import dep\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    try:
        code, _, err = run("manifest", target)
    finally:
        sys.modules.pop("depful", None)
    assert (code, err) == (2, f"agentfx: {message}\n")


# --- without the MCP extra -------------------------------------------------------------


def without(modules: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``agentfx ARGV`` in a fresh interpreter where ``modules`` cannot be imported."""
    code = f"import sys; sys.modules.update(dict.fromkeys({modules!r})); from agentfx.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, *argv]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(
    ("modules", "argv", "message"),
    [
        (["mcp"], ["demo"], "agentfx.mcp needs the MCP SDK, an optional dependency."),
        (["mcp"], ["serve", "tests.mcp_app:app"], "agentfx.mcp needs the MCP SDK, an optional dependency."),
        (["uvicorn"], ["serve", "tests.mcp_app:app", "--transport", "http"], '"uvicorn" is not installed'),
    ],
)
def test_a_command_needing_the_mcp_extra_says_how_to_install_it(
    modules: list[str], argv: list[str], message: str
) -> None:
    done = without(modules, *argv)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"agentfx: {message}") and "Traceback" not in done.stderr
    assert done.stderr.rstrip().endswith("pip install 'agentfx[mcp]'")


# --- serve --transport http: where it listens ------------------------------------------


def test_serving_on_a_busy_port_says_so_and_exits_3() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, err = run("serve", "tests.mcp_app:app", "--transport", "http", "--port", str(port))
    assert (code, out) == (3, "")
    assert err == f"agentfx: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_serving_on_an_unknown_host_says_so_and_exits_3() -> None:
    code, _, err = run("serve", "tests.mcp_app:app", "--transport", "http", "--host", "no-such-host.invalid")
    assert code == 3
    assert err.startswith("agentfx: cannot listen on no-such-host.invalid:8000: ") and "Traceback" not in err


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("70000", "70000 is not a port: ports are 0 to 65535 (0 picks a free one)"),
        ("65536", "65536 is not a port: ports are 0 to 65535 (0 picks a free one)"),
        ("-1", "-1 is not a port: ports are 0 to 65535 (0 picks a free one)"),
        ("http", "'http' is not a port number"),
    ],
)
def test_a_port_out_of_range_is_a_usage_error(port: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    # An unknown host, so a port let through fails fast with exit 3 instead of serving.
    argv = ["serve", "tests.mcp_app:app", "--transport", "http", "--host", "no-such-host.invalid", "--port", port]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(f"agentfx serve: error: argument --port: {message}\n")


@pytest.mark.parametrize("port", ["0", "65535"])
def test_the_ports_at_either_end_of_the_range_are_accepted(port: str) -> None:
    argv = ["serve", "tests.mcp_app:app", "--transport", "http", "--host", "no-such-host.invalid", "--port", port]
    code, _, err = run(*argv)
    assert code == 3 and err.startswith(f"agentfx: cannot listen on no-such-host.invalid:{port}: ")


@pytest.mark.parametrize("allowed", ["https://agents.example", "", "*", "agents.example:abc", "agents.example:0", "a b", "agents.example/a2a", "[::1", "[nope]:80"])
def test_an_allowed_host_that_is_not_a_host_header_is_a_usage_error(allowed: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Matched against Host headers (a URL there refuses every request 421)
    # and named by the A2A agent card (which would read http://https://...).
    argv = ["serve", "tests.mcp_app:app", "--transport", "a2a", "--host", "no-such-host.invalid", "--allowed-host", allowed]
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"agentfx serve: error: argument --allowed-host: {allowed!r} is not a host: give a Host header's name "
        "(agents.example), name:port or name:* (any port), not a URL\n"
    )


@pytest.mark.parametrize("allowed", ["agents.example", "agents.example:*", "agents.example:8443", "10.0.0.5", "[::1]:*", "my_service", "agents.example."])
def test_an_allowed_host_header_is_accepted(allowed: str) -> None:
    code, _, err = run("serve", "tests.mcp_app:app", "--transport", "http", "--host", "no-such-host.invalid", "--allowed-host", allowed)
    assert code == 3 and err.startswith("agentfx: cannot listen on no-such-host.invalid:8000: "), err


# --- the installed ``agentfx`` command, in a subprocess ----------------------------------

AGENTFX = str(Path(sys.executable).with_name("agentfx"))
"""The console script the editable install wrote: the entry point a user runs."""

SERVABLE = (
    "serve accepts an App, or a zero-argument callable returning an async context manager that yields a bound runtime"
)


def agentfx_(*argv: str, cwd: Path = ROOT, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``agentfx ARGV`` run from ``cwd``; the repository root, where a checkout's modules import, by default."""
    # PYTHONPATH is dropped: only the current directory makes a checkout's modules importable.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [AGENTFX, *argv], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=30, check=False
    )


WRONG_SERVE_TARGETS = [
    (("serve", "examples.todo.app:update"), "is the function update(model, message)"),
    (
        ("serve", "examples.todo.app:update", "--transport", "http", "--port", "0"),
        "is the function update(model, message)",
    ),
    (("serve", "tests.mcp_app:Model"), "is the class Model"),
    (("serve", "tests.mcp_app:definition"), "is a Definition, a contract without a program to run"),
    (("serve", "tests.cli_targets:NUMBER"), "is an int"),
    (("serve", "tests.cli_targets:async_factory"), "is the async function async_factory()"),
    (("serve", "tests.cli_targets:undecorated"), "is the async generator function undecorated()"),
    (("serve", "tests.cli_targets:needs_a_name"), "is the function needs_a_name(name)"),
    (("serve", "tests.cli_targets:returns_a_number"), "returned an int"),
    (("serve", "tests.cli_targets:returns_a_coroutine"), "returned a coroutine"),
    (("serve", "tests.cli_targets:sync_context"), "returned a _GeneratorContextManager"),
    (
        ("serve", "tests.cli_targets:yields_a_definition"),
        "yielded a Definition, a contract without a program to run, not a runtime",
    ),
]


@pytest.mark.parametrize(("argv", "found"), WRONG_SERVE_TARGETS)
def test_a_target_serve_cannot_serve_is_one_line(argv: tuple[str, ...], found: str) -> None:
    assert run(*argv) == (2, "", f'agentfx: "{argv[1]}" {found}; {SERVABLE}\n')


@pytest.mark.parametrize(("argv", "found"), [WRONG_SERVE_TARGETS[i] for i in (0, 1, 9, 11)])
def test_a_target_serve_cannot_serve_is_one_line_and_exit_2_from_the_command(argv: tuple[str, ...], found: str) -> None:
    # The refusals decided before calling anything, and after calling the
    # factory (a coroutine it must close) or entering its context.
    done = agentfx_(*argv)
    # Exactly one line: no traceback, no "never awaited" warning, no "serving" announcement.
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f'agentfx: "{argv[1]}" {found}; {SERVABLE}\n')


WRONG_CONTRACT_TARGETS = [
    ("manifest", "examples.todo.app:update", "is the function update(model, message)"),
    ("markdown", "tests.mcp_app:Model", "is the class Model"),
    ("manifest", "tests.mcp_app:audited", "is the function audited()"),
    ("markdown", "examples.todo.app:INITIAL", "is a Model"),
]


@pytest.mark.parametrize(("command", "target", "found"), WRONG_CONTRACT_TARGETS)
def test_a_target_without_a_contract_is_one_line(command: str, target: str, found: str) -> None:
    assert run(command, target) == (2, "", f'agentfx: "{target}" {found}; {command} accepts a Definition or an App\n')


def test_a_target_without_a_contract_is_one_line_and_exit_2_from_the_command() -> None:
    command, target, found = WRONG_CONTRACT_TARGETS[0]
    done = agentfx_(command, target)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f'agentfx: "{target}" {found}; {command} accepts a Definition or an App\n'


def test_what_expose_made_without_define_is_one_line_for_every_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "undefined.py").write_text(
        "import msgspec, agentfx\n"
        "class Ping(msgspec.Struct, tag=True):\n"
        "    pass\n"
        "exposed = agentfx.expose(Ping, agentfx.variant(Ping, 'Ping'))\n"
    )
    found = '"undefined:exposed" is the result of expose(...), never passed to define(...)'
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    committed = tmp_path / "agent.json"
    committed.write_text(render_manifest(definition))
    for argv, accepts in [
        (("manifest", "undefined:exposed", "--check", str(committed)), "manifest accepts a Definition or an App"),
        (("markdown", "undefined:exposed"), "markdown accepts a Definition or an App"),
        (("serve", "undefined:exposed"), SERVABLE),
    ]:
        try:
            # Not 1, which would tell CI that the committed manifest drifted.
            assert run(*argv) == (2, "", f"agentfx: {found}; {accepts}\n")
        finally:
            sys.modules.pop("undefined", None)


def test_an_app_of_what_expose_made_is_refused_where_it_is_written(tmp_path: Path) -> None:
    (tmp_path / "undefined_app.py").write_text(
        "import msgspec, agentfx\n"
        "class Ping(msgspec.Struct, tag=True):\n"
        "    pass\n"
        "app = agentfx.App(agentfx.expose(Ping, agentfx.variant(Ping, 'Ping')), init=0, update=lambda m, msg: m)\n"
    )
    committed = tmp_path / "agent.json"
    committed.write_text(render_manifest(definition))
    for argv in (("manifest", "undefined_app:app", "--check", str(committed)), ("serve", "undefined_app:app")):
        done = agentfx_(*argv, cwd=tmp_path)
        assert (done.returncode, done.stdout) == (2, "")
        assert f'File "{tmp_path / "undefined_app.py"}", line 4, in <module>' in done.stderr
        assert "write define(expose(Message, variant(...), ...))" in done.stderr
        assert done.stderr.endswith('agentfx: Cannot import "undefined_app": it raised ContractError (traceback above)\n')


def test_help_lists_every_exit_code() -> None:
    done = agentfx_("--help")
    assert done.returncode == 0
    listed = done.stdout.split("exit status:\n", 1)[1]
    codes = [int(line.split()[0]) for line in listed.splitlines() if line[:3].strip().isdigit()]
    assert codes == [int(code) for code in ExitCode] == [0, 1, 2, 3, 4, 130]
    assert "  1  manifest --check:" in listed and "  3  serve: the server cannot start" in listed


def test_each_outcome_has_its_own_exit_code(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text("raise RuntimeError('not today')\n")
    drifted = tmp_path / "agent.json"
    drifted.write_text(json.dumps({"capabilities": [], "resources": []}))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        outcomes = {
            ExitCode.OK: agentfx_("manifest", "examples.todo.app:AppAgent", "--check", "examples/todo/agent.json"),
            ExitCode.DRIFTED: agentfx_("manifest", "examples.todo.app:AppAgent", "--check", str(drifted)),
            ExitCode.USAGE: agentfx_("manifest", "raises:x", cwd=tmp_path),
            ExitCode.CANNOT_START: agentfx_("serve", "tests.mcp_app:app", "--transport", "http", "--port", port),
        }
    # APP_FAILED: tests/integration/test_mcp_http.py breaks a served program.
    assert {expected: done.returncode for expected, done in outcomes.items()} == {code: int(code) for code in outcomes}
    assert len({int(code) for code in ExitCode}) == len(ExitCode)


def test_a_module_that_raises_on_import_shows_its_traceback_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text("import json\n\nraise RuntimeError('not today')\n")
    done = agentfx_("serve", "raises:app", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("Traceback (most recent call last):\n")
    assert f'File "{tmp_path / "raises.py"}", line 3, in <module>' in done.stderr
    # The traceback starts in the user's module: nothing of the import machinery or of the CLI.
    assert "importlib" not in done.stderr and "cli.py" not in done.stderr
    assert done.stderr.endswith(
        'RuntimeError: not today\nagentfx: Cannot import "raises": it raised RuntimeError (traceback above)\n'
    )


@pytest.mark.parametrize("status", ["0", "7", "'bye'"])
def test_a_module_that_exits_on_import_is_a_load_failure_not_its_exit_status(tmp_path: Path, status: str) -> None:
    # Its own status would read as success (0) or as another of the CLI's codes (1: drifted).
    (tmp_path / "exits.py").write_text(f"import sys\n\nsys.exit({status})\n")
    done = agentfx_("manifest", "exits:x", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert f'File "{tmp_path / "exits.py"}", line 3, in <module>' in done.stderr
    assert done.stderr.endswith('agentfx: Cannot import "exits": it raised SystemExit (traceback above)\n')


def test_a_module_with_a_syntax_error_points_at_it_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "typo.py").write_text("def f(:\n    pass\n")
    done = agentfx_("manifest", "typo:f", cwd=tmp_path)
    assert done.returncode == 2
    assert f'File "{tmp_path / "typo.py"}", line 1' in done.stderr and "SyntaxError" in done.stderr
    assert done.stderr.endswith('agentfx: Cannot import "typo": it raised SyntaxError (traceback above)\n')


def test_a_module_attribute_lookup_that_raises_shows_its_traceback_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Exit 1 would say "the manifest drifted": a broken lookup is the user's code, as on import.
    (tmp_path / "lazy_attrs.py").write_text("def __getattr__(name):\n    raise RuntimeError('lazy attr failed')\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    # Imported by the CLI, they leave with the test.
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    code, out, err = run("manifest", "lazy_attrs:x")
    assert (code, out) == (2, "")
    assert err.startswith("Traceback (most recent call last):\n")
    assert f'File "{tmp_path / "lazy_attrs.py"}", line 2, in __getattr__' in err and "cli.py" not in err
    assert err.endswith(
        'RuntimeError: lazy attr failed\nagentfx: Cannot load "lazy_attrs:x": looking it up raised RuntimeError (traceback above)\n'
    )
    # A dotted attribute whose property raises is the same mistake, and so is it over serve.
    (tmp_path / "lazy_props.py").write_text(
        "class Box:\n    @property\n    def app(self):\n        raise KeyError('gone')\nbox = Box()\n"
    )
    code, _, err = run("serve", "lazy_props:box.app")
    assert code == 2 and err.endswith('agentfx: Cannot load "lazy_props:box.app": looking it up raised KeyError (traceback above)\n')
    assert capsys.readouterr().err == ""


# --- manifest --check: what it suggests --------------------------------------------------


def test_a_file_that_is_not_a_manifest_is_never_suggested_for_overwriting(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# My project\n")
    package = tmp_path / "package.json"
    package.write_text('{"name": "my-project"}\n')
    for path, why in ((readme, "it is not JSON"), (package, 'it has no "capabilities" list')):
        done = agentfx_("manifest", "examples.todo.app:AppAgent", "--check", str(path))
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            f"agentfx: {path} is not an agentfx manifest ({why}); --check compares a file written by agentfx manifest\n"
        )
    assert readme.read_text() == "# My project\n"


@pytest.mark.parametrize(("state", "name"), [("absent", "my agent's manifest.json"), ("drifted", "agent.json")])
def test_the_suggested_command_regenerates_the_manifest(tmp_path: Path, state: str, name: str) -> None:
    path = tmp_path / name
    if state == "drifted":
        path.write_text(json.dumps({"capabilities": [{"name": "gone"}], "resources": []}))
    done = agentfx_("manifest", "examples.todo.app:AppAgent", "--check", str(path))
    assert done.returncode == ExitCode.DRIFTED
    said = done.stdout.splitlines()[-1]
    lead = (
        "does not exist; write it with: "
        if state == "absent"
        else "has drifted from examples.todo.app:AppAgent; regenerate it with: "
    )
    assert said.startswith(f"{path} {lead}agentfx manifest ")
    # The suggestion is a shell command that does what it says, even for a path with spaces and quotes.
    suggestion = said.split(": ", 1)[1]
    env = {**os.environ, "PATH": f"{Path(AGENTFX).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", suggestion], cwd=ROOT, env=env, check=True, timeout=30)
    assert path.read_text() == EXAMPLE_MANIFEST.read_text()
    assert agentfx_("manifest", "examples.todo.app:AppAgent", "--check", str(path)).returncode == ExitCode.OK


# --- serve: flags and what it says ----------------------------------------------------------


NETWORK_ONLY = "is only for a network transport (--transport http or --transport a2a)"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--port", "9999"), f"--port {NETWORK_ONLY}; stdio has no port"),
        (("--transport", "stdio", "--port", "0"), f"--port {NETWORK_ONLY}; stdio has no port"),
        (("--host", "0.0.0.0"), f"--host {NETWORK_ONLY}; stdio has no host"),
    ],
)
def test_network_flags_without_a_network_transport_are_a_usage_error(flags: tuple[str, ...], message: str) -> None:
    # A stdin with a request on it: a server that started anyway would answer it on stdout.
    done = agentfx_("serve", "tests.mcp_app:app", *flags, stdin=json.dumps(INITIALIZE) + "\n")
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"agentfx: {message}\n")


@pytest.mark.parametrize("target", ["tests.mcp_app:app", "tests.mcp_app:audited"])
def test_serving_over_stdio_says_so_on_stderr_only(target: str, tmp_path: Path) -> None:
    env = {**os.environ, "AGENTFX_TEST_AUDIT_FILE": str(tmp_path / "audit.jsonl")}
    done = subprocess.run(
        [AGENTFX, "serve", target],
        cwd=ROOT,
        env=env,
        input=json.dumps(INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, f'serving "{target}" over stdio; Ctrl-C to stop\n')
    # stdout carries the protocol and nothing else: one line, the initialize answer.
    [line] = done.stdout.splitlines()
    assert json.loads(line)["result"]["protocolVersion"] == INITIALIZE["params"]["protocolVersion"]


def test_version() -> None:
    done = agentfx_("--version")
    assert (done.returncode, done.stdout) == (0, f"agentfx {importlib.metadata.version('agentfx')}\n")
    assert importlib.metadata.version("agentfx") == agentfx.__version__


# --- MODULE is dotted ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "suggested"),
    [
        ("examples/todo/app.py:AppAgent", "examples.todo.app:AppAgent"),
        ("./examples/todo/app.py:AppAgent", "examples.todo.app:AppAgent"),
        ("examples/todo/app:AppAgent", "examples.todo.app:AppAgent"),
        ("examples\\todo\\app.py:AppAgent", "examples.todo.app:AppAgent"),
        ("tests/mcp_app.py:app.definition", "tests.mcp_app:app.definition"),
        (f"{ROOT}/examples/todo/app.py:AppAgent", "examples.todo.app:AppAgent"),
        ("examples/todo/__init__.py:app", "examples.todo:app"),
    ],
)
def test_a_file_path_gets_the_dotted_module_name(target: str, suggested: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    module = target.partition(":")[0]
    said = f'agentfx: "{module}" is a file path, but MODULE is a dotted module name: try {suggested}\n'
    assert run("manifest", target) == (2, "", said)
    # What it suggests is a target that loads.
    assert load(suggested) is not None


def test_a_file_path_gets_the_dotted_module_name_from_the_command() -> None:
    done = agentfx_("manifest", "examples/todo/app.py:AppAgent")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.endswith("try examples.todo.app:AppAgent\n") and done.stderr.count("\n") == 1
    assert agentfx_("manifest", "examples.todo.app:AppAgent").returncode == ExitCode.OK


@pytest.mark.parametrize("target", ["examples/todo/app.py", "./examples/todo/app.py", "examples/todo/app"])
def test_a_file_path_without_its_attribute_gets_the_dotted_module_and_where_the_attribute_goes(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    said = f'agentfx: "{target}" is a file path, but MODULE is a dotted module name: try examples.todo.app:ATTR\n'
    assert run("manifest", target) == (2, "", said)


@pytest.mark.parametrize("module", ["/elsewhere/app.py", "../app.py", "my-app/app.py"])
def test_a_file_path_with_no_dotted_form_here_says_where_modules_come_from(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    said = f'agentfx: "{module}" is a file path, but MODULE is a dotted module name'
    said += ", importable from the current directory\n"
    assert run("manifest", f"{module}:x") == (2, "", said)


@pytest.mark.parametrize("module", [".", ".app", "..examples.todo.app", ".examples.todo.app"])
@pytest.mark.parametrize("command", ["manifest", "markdown"])
def test_a_relative_module_name_is_one_line_and_never_imported(
    command: str, module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)

    def imported(name: str, package: str | None = None) -> object:
        raise AssertionError(f"imported {name!r}")

    monkeypatch.setattr(cli.importlib, "import_module", imported)
    said = f'agentfx: "{module}" is a relative module name, but MODULE is an absolute dotted module name'
    said += ", importable from the current directory\n"
    assert run(command, f"{module}:AppAgent") == (2, "", said)


def test_a_relative_module_name_is_one_line_from_the_command() -> None:
    done = agentfx_("markdown", ".:x")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith('agentfx: "." is a relative module name') and done.stderr.count("\n") == 1


# --- packaging: only agentfx is installed ----------------------------------------------------


def test_the_install_makes_only_agentfx_importable(tmp_path: Path) -> None:
    # From outside the checkout, with no PYTHONPATH: what a user's environment sees.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    code = (
        "import importlib.util, sys, agentfx; "
        "print(agentfx.__file__); "
        "print([name for name in ('examples', 'tests', 'benchmarks') if importlib.util.find_spec(name)]); "
        f"print({str(ROOT)!r} in sys.path)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.splitlines() == [str(ROOT / "agentfx" / "__init__.py"), "[]", "False"]
    # So the example is reachable only from a checkout.
    elsewhere = agentfx_("manifest", "examples.todo.app:AppAgent", cwd=tmp_path)
    assert elsewhere.returncode == 2
    assert elsewhere.stderr == 'agentfx: Cannot import "examples.todo.app": no such module\n'


def test_the_readme_lists_the_exit_codes_the_command_has() -> None:
    section = (ROOT / "README.md").read_text().split("## The command line\n", 1)[1].split("\n## ", 1)[0]
    listed = [int(row.split("|")[1]) for row in section.splitlines() if row.startswith("| ") and row[2].isdigit()]
    assert listed == [int(code) for code in ExitCode]


def test_serving_keeps_what_startup_built_out_of_the_collectors_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    async def serve_descriptors(runtime: object, read_fd: int, write_fd: int) -> None:
        # What the serving loop runs beside: the startup heap is frozen.
        seen.append(gc.get_freeze_count())

    monkeypatch.setattr(agentfx.mcp._stdio, "serve_descriptors", serve_descriptors)
    assert gc.get_freeze_count() == 0
    anyio.run(cli._serve_stdio, cli._served("tests.mcp_app:app"), "tests.mcp_app:app", io.StringIO(), (0, 1))  # pyright: ignore[reportPrivateUsage]
    assert len(seen) == 1 and seen[0] > 0
    # Thawed once serving ends, for whatever the process does next.
    assert gc.get_freeze_count() == 0


def test_a_heap_the_application_froze_stays_frozen_after_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    async def serve_descriptors(runtime: object, read_fd: int, write_fd: int) -> None:
        return None

    monkeypatch.setattr(agentfx.mcp._stdio, "serve_descriptors", serve_descriptors)
    gc.freeze()  # the application's own, before serving (for a forking server, say)
    try:
        anyio.run(cli._serve_stdio, cli._served("tests.mcp_app:app"), "tests.mcp_app:app", io.StringIO(), (0, 1))  # pyright: ignore[reportPrivateUsage]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_serving_over_http_keeps_the_startup_heap_frozen_while_it_serves() -> None:
    seen: list[int] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(gc.get_freeze_count())
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    @asynccontextmanager
    async def running() -> AsyncGenerator[Any]:
        yield app

    async def main() -> None:
        listening = anyio.Event()
        where: list[Any] = []

        def announce(bound: Any) -> None:
            where.append(bound)
            listening.set()

        async def ask_then_stop() -> None:
            await listening.wait()
            async with httpx.AsyncClient() as client:
                answered = await client.get(f"http://127.0.0.1:{where[0][1]}/")
            assert answered.status_code == 204
            os.kill(os.getpid(), signal.SIGTERM)

        sock = cli._listen("127.0.0.1", 0)  # pyright: ignore[reportPrivateUsage]
        with sock, anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(ask_then_stop)
                await cli._uvicorn(running, sock, io.StringIO(), announce)  # pyright: ignore[reportPrivateUsage]

    assert gc.get_freeze_count() == 0
    anyio.run(main, backend="asyncio")
    assert len(seen) == 1 and seen[0] > 0
    assert gc.get_freeze_count() == 0
