"""The ``agentfx`` command: manifest (and its drift check), markdown, serve targets, usage errors."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import agentfx
from agentfx.cli import load, main, render_manifest
from tests.mcp_app import definition

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


def test_an_unreadable_committed_manifest(tmp_path: Path) -> None:
    broken = tmp_path / "agent.json"
    broken.write_text("{ not json")
    code, out, _ = run("manifest", "tests.mcp_app:definition", "--check", str(broken))
    assert code == 1 and "is not valid JSON" in out
    code, _, err = run("manifest", "tests.mcp_app:definition", "--check", str(tmp_path / "missing.json"))
    assert code == 2 and "Cannot read" in err


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
        (("markdown", "examples.todo.app:update"), "names neither a Definition nor an App"),
        (("serve", "tests.mcp_app:definition"), "cannot be served"),
        (("serve", "tests.mcp_app:Model"), "cannot be served"),
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
