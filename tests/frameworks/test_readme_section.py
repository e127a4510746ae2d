"""The README's "Using agentfx from an agent framework" section: its program prints what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent.parent / "README.md"
ENTRY_POINTS = (
    "agentfx.pydantic_ai.AgentfxToolset",
    "agentfx.openai_agents.function_tools",
    "agentfx.anthropic.tool_params",
    "agentfx.langchain.structured_tools",
)


def _section() -> str:
    return README.read_text().split("## Using agentfx from an agent framework", 1)[1].split("\n## ", 1)[0]


def test_the_framework_section_prints_what_it_says() -> None:
    section = _section()
    program = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    printed = re.search(r"prints\n\n```text\n(.*?)```", section, re.DOTALL)
    assert program is not None and printed is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program.group(1), str(README), "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed.group(1)


def test_the_framework_section_names_every_entry_point_that_exists() -> None:
    import importlib

    section = _section()
    for dotted in ENTRY_POINTS:
        module, _, name = dotted.rpartition(".")
        assert hasattr(importlib.import_module(module), name), dotted
        assert f"`{dotted}(runtime)`" in section, dotted
