"""The README's code runs, prints what the README says, and passes pyright strict."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def _first_screen(heading: str = "## In one screen") -> tuple[str, str]:
    text = README.read_text()
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    program = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    printed = re.search(r"prints\n\n```text\n(.*?)```", section, re.DOTALL)
    assert program is not None and printed is not None
    return program.group(1), printed.group(1)


def test_the_first_screen_prints_what_the_readme_says() -> None:
    program, printed = _first_screen()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, str(README), "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed


def test_the_contract_testing_example_passes() -> None:
    [block] = [b for b in _python_blocks() if "check_contract(" in b]
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(block, str(README), "exec"), namespace)
    tests = [cast(Callable[[], None], f) for name, f in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()


def test_the_readme_code_passes_pyright_strict(tmp_path: Path) -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        (tmp_path / f"readme_{i}.py").write_text(block)
    # A copy of the first screen with one typo inside ``expose(...)``, so the check is seen to bite.
    first, _ = _first_screen()
    assert "ctx.model.selected or" in first
    (tmp_path / "typo.py").write_text(first.replace("ctx.model.selected or", "ctx.model.selectd or"))
    # The project's own settings (strict), reading agentfx and examples from this checkout.
    settings: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pyright"]
    config = {k: v for k, v in settings.items() if k not in ("include", "venvPath", "venv")}
    (tmp_path / "pyrightconfig.json").write_text(json.dumps({**config, "extraPaths": [str(ROOT)]}))
    completed = subprocess.run(
        [sys.executable, "-m", "pyright", "--outputjson", "--pythonpath", sys.executable, "-p", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    report = json.loads(completed.stdout)
    assert report["summary"]["filesAnalyzed"] == len(blocks) + 1
    errors = [
        (Path(d["file"]).name, d["range"]["start"]["line"] + 1, d.get("rule"), d["message"])
        for d in report["generalDiagnostics"]
        if d["severity"] == "error"
    ]
    assert [e for e in errors if e[0] != "typo.py"] == []
    assert {e[2] for e in errors if e[0] == "typo.py"} >= {"reportAttributeAccessIssue"}
    assert all("selectd" in e[3] for e in errors if e[2] == "reportAttributeAccessIssue")


def test_the_confirmation_section_prints_what_the_readme_says() -> None:
    program, printed = _first_screen("## Asking a person first")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, str(README), "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed


def test_the_test_command_is_what_ci_runs() -> None:
    text = README.read_text()
    block = text.split("<!-- test-command -->", 1)[1].split("<!-- /test-command -->", 1)[0]
    command = block.strip().removeprefix("```bash").removesuffix("```").strip()
    assert "pyright" in command and "pytest" in command
    ci = (README.parent / ".ci" / "run").read_text()
    assert "test-command" in ci
