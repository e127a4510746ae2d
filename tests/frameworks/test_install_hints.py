"""Each framework adapter without its framework: an ImportError naming the extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

# module -> (the packages hidden to simulate a missing install, the hint's extra)
ADAPTERS = {
    "agentfx.anthropic": (("anthropic",), "anthropic"),
    "agentfx.langchain": (("langchain_core",), "langchain"),
    "agentfx.openai_agents": (("agents",), "openai-agents"),
    "agentfx.pydantic_ai": (("pydantic_ai",), "pydantic-ai"),
}


def _import_without(module: str, hidden: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    code = f"""
        import sys
        for name in {hidden!r}:
            sys.modules[name] = None  # what an absent package looks like to import
        try:
            import {module}
        except ImportError as error:
            print(type(error).__name__, error, sep=": ")
        else:
            print("imported")
        """
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=50, check=False
    )


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_the_adapter_names_the_extra_when_its_framework_is_missing(module: str) -> None:
    hidden, extra = ADAPTERS[module]
    completed = _import_without(module, hidden)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == (
        f"ImportError: {module} needs {_framework(extra)}, an optional dependency. "
        f"Install it with: pip install 'agentfx[{extra}]'"
    )


@pytest.mark.parametrize("module", sorted(ADAPTERS))
def test_the_adapter_imports_when_its_framework_is_installed(module: str) -> None:
    completed = _import_without(module, ())
    assert completed.stdout.strip() == "imported", completed.stderr


def _framework(extra: str) -> str:
    return {
        "pydantic-ai": "pydantic-ai",
        "openai-agents": "the OpenAI Agents SDK",
        "anthropic": "the Anthropic SDK",
        "langchain": "langchain-core",
    }[extra]


@pytest.mark.parametrize(
    "error",
    [
        # The framework is there but one of its own dependencies is not.
        ModuleNotFoundError("No module named 'jiter'", name="jiter"),
        # The framework is there but broken (a name it should export is gone).
        ImportError("cannot import name 'ToolError' from 'anthropic.lib.tools'", name="anthropic.lib.tools"),
    ],
)
def test_an_installed_but_broken_framework_keeps_its_own_error(error: ImportError) -> None:
    from agentfx._toolcall import missing_framework

    with pytest.raises(ImportError) as raised:
        missing_framework(
            error, adapter="agentfx.anthropic", needs="the Anthropic SDK", extra="anthropic", packages=frozenset({"anthropic"})
        )
    assert raised.value is error
