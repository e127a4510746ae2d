"""The README's code runs, prints what the README says, and passes pyright strict."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

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


# Where each section's Python block is run, and checked to print what the README says.
# Every block is also type-checked above; a block no test runs would be checked but never run.
RUN_BY = {
    "## In one screen": "tests/test_readme.py",
    "## Asking a person first": "tests/test_readme.py",
    "## Serving over MCP": "tests/integration/test_mcp_http_oauth.py",
    "## Using agentfx from an agent framework": "tests/frameworks/test_readme_section.py",
    "## Serving over A2A": "tests/test_a2a.py",
    "## One Model, many processes (Redis)": "tests/test_redis_program.py",
    "## Testing your contract": "tests/test_laws.py",
}


def _sections() -> dict[str, str]:
    parts = re.split(r"(?m)^(?=## )", README.read_text())[1:]
    return {part.splitlines()[0]: part for part in parts}


def test_every_python_block_is_run_by_a_test() -> None:
    with_code = {heading: body for heading, body in _sections().items() if "```python\n" in body}
    assert set(with_code) == set(RUN_BY)
    for heading, body in with_code.items():
        # The runners take a section's one block (the OAuth example by its markers).
        assert body.count("```python\n") == 1, heading
        runner = (ROOT / RUN_BY[heading]).read_text()
        block = body.split("```python\n", 1)[1].split("```", 1)[0]
        found_by = "<!-- oauth-example -->" if "<!-- oauth-example -->" in body else heading.removeprefix("## ")
        assert found_by in runner and "exec(compile(" in runner, heading
        if found_by == "<!-- oauth-example -->":
            assert block in body.split("<!-- oauth-example -->", 1)[1].split("<!-- /oauth-example -->", 1)[0]


def _slug(heading: str) -> str:
    # GitHub's anchors: lower case, punctuation other than "-" dropped, each space a "-".
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_in_the_readme_reaches_a_heading_or_a_file() -> None:
    text = README.read_text()
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    anchors = {_slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", prose)}
    links = re.findall(r"\]\(([^)\s]+)\)", prose)
    assert any(link.startswith("#") for link in links)
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        target, _, anchor = link.partition("#")
        if not target:
            assert anchor in anchors, link
            continue
        path = ROOT / target
        assert path.exists(), link
        if anchor:
            headings = re.findall(r"(?m)^#{1,6} (.+)$", path.read_text())
            assert anchor in {_slug(h) for h in headings}, link


def test_the_slug_is_githubs() -> None:
    assert _slug("Running `agentfx serve --transport http` behind a proxy") == (
        "running-agentfx-serve---transport-http-behind-a-proxy"
    )
    assert _slug("One Model, many processes (Redis)") == "one-model-many-processes-redis"
