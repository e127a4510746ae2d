"""The README's first screen is a program that runs and prints what the README says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def _first_screen() -> tuple[str, str]:
    text = README.read_text()
    section = text.split("## In one screen", 1)[1].split("\n## ", 1)[0]
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


def test_the_test_command_is_what_ci_runs() -> None:
    text = README.read_text()
    block = text.split("<!-- test-command -->", 1)[1].split("<!-- /test-command -->", 1)[0]
    command = block.strip().removeprefix("```bash").removesuffix("```").strip()
    assert "pyright" in command and "pytest" in command
    ci = (README.parent / ".ci" / "run").read_text()
    assert "test-command" in ci
