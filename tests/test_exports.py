"""The package's public surface: ``agentfx.__all__`` and what importing agentfx pulls in."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import types
import typing
from pathlib import Path

import msgspec
import pytest

import agentfx
import agentfx.docs

ROOT = Path(agentfx.__file__).resolve().parent.parent

# The agent framework adapters: one module each, never re-exported from agentfx, each
# with its own exact ``__all__``; the value is the framework's top-level package.
FRAMEWORKS = {
    "agentfx.anthropic": "anthropic",
    "agentfx.langchain": "langchain_core",
    "agentfx.openai_agents": "agents",
    "agentfx.pydantic_ai": "pydantic_ai",
}

# Adapters and the command line may import optional extras; the core may not.
ADAPTERS = ("agentfx.mcp", "agentfx.a2a", "agentfx.redis", "agentfx.cli", "agentfx.__main__", *FRAMEWORKS)


def _exported() -> list[tuple[str, object]]:
    return [(name, getattr(agentfx, name)) for name in agentfx.__all__]


def _run(code: str) -> str:
    """Run ``code`` in a fresh interpreter, so no other test's imports leak in."""
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def test_all_is_a_sorted_tuple_without_duplicates() -> None:
    names = agentfx.__all__
    assert isinstance(names, tuple)
    assert list(names) == sorted(names)
    assert len(set(names)) == len(names)


def test_every_name_in_all_exists() -> None:
    missing = [name for name in agentfx.__all__ if not hasattr(agentfx, name)]
    assert missing == []


def test_every_public_attribute_is_in_all() -> None:
    public = {
        name
        for name, value in vars(agentfx).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public - set(agentfx.__all__) == set()


def test_exported_classes_report_the_public_path() -> None:
    for name, value in _exported():
        if isinstance(value, type):
            assert value.__module__ == "agentfx", name
            # A repr or traceback that says ``agentfx.X`` must name something importable.
            assert getattr(agentfx, value.__qualname__) is value, name


@pytest.mark.parametrize("name", [n for n in agentfx.__all__ if isinstance(getattr(agentfx, n), type)])
def test_exported_classes_still_resolve_their_annotations(name: str) -> None:
    # typing and msgspec resolve string annotations in the module ``__module__`` names,
    # so giving a class its public path must not cost it its field types.
    cls: type = getattr(agentfx, name)
    typing.get_type_hints(cls)
    if issubclass(cls, msgspec.Struct):
        msgspec.json.Decoder(cls)


def test_every_failure_of_the_dispatch_error_union_is_exported() -> None:
    for failure in typing.get_args(agentfx.DispatchError):
        assert isinstance(failure, type)
        assert getattr(agentfx, failure.__name__) is failure


def test_schema_is_the_function_even_after_importing_the_submodule() -> None:
    submodule = importlib.import_module("agentfx.schema")
    assert isinstance(submodule, types.ModuleType)
    assert agentfx.schema is agentfx.docs.schema
    assert "schema" in agentfx.__all__


def test_schema_is_the_function_when_the_submodule_is_imported_first() -> None:
    out = _run(
        """
        import agentfx.schema
        import agentfx
        import agentfx.docs
        print(agentfx.schema is agentfx.docs.schema)
        """
    )
    assert out == "True"


def test_importing_agentfx_never_imports_an_adapter() -> None:
    out = _run(
        """
        import sys
        import agentfx
        print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "agentfx.mcp"))))
        """
    )
    assert out == "[]"


def _core_modules() -> list[str]:
    # Read from the file system: walking packages would import the adapters themselves.
    package = ROOT / "agentfx"
    names: list[str] = []
    for path in package.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not name.startswith(ADAPTERS):
            names.append(name)
    return sorted(names)


def test_the_core_module_list_is_not_empty() -> None:
    # Guards the next test against a walk that silently finds nothing.
    assert {"agentfx.contract", "agentfx.pipeline", "agentfx.runtime"} <= set(_core_modules())


def test_no_core_module_imports_an_adapter() -> None:
    out = _run(
        f"""
        import importlib, sys
        for name in {_core_modules()!r}:
            importlib.import_module(name)
        print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "agentfx.mcp"))))
        """
    )
    assert out == "[]"


def test_the_tool_view_and_reply_are_exported_from_the_core() -> None:
    import agentfx.tools

    assert sorted(agentfx.tools.__all__) == ["ToolReply", "ToolView", "defect_reply", "reply", "tool_views"]
    for name in [*agentfx.tools.__all__, "Hints"]:
        assert name in agentfx.__all__
    assert agentfx.ToolView is agentfx.tools.ToolView
    assert agentfx.reply is agentfx.tools.reply
    assert "agentfx.tools" in _core_modules()


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_a_framework_adapter_exports_exactly_its_all(module: str) -> None:
    adapter = importlib.import_module(module)
    names: object = getattr(adapter, "__all__")
    assert isinstance(names, tuple)
    exported = typing.cast(tuple[str, ...], names)
    assert list(exported) == sorted(exported) and len(set(exported)) == len(exported)
    assert [name for name in exported if not hasattr(adapter, name)] == []
    public = {
        name
        for name, value in vars(adapter).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", module) == module
        and name not in {"annotations", "logging"}
    }
    assert public - set(exported) == set()


@pytest.mark.parametrize("module", sorted(FRAMEWORKS))
def test_a_framework_adapter_is_a_submodule_never_re_exported(module: str) -> None:
    adapter = importlib.import_module(module)
    exported = {getattr(agentfx, name) for name in agentfx.__all__}
    assert not any(getattr(adapter, name) in exported for name in getattr(adapter, "__all__"))


def test_importing_agentfx_and_its_core_never_imports_a_framework() -> None:
    out = _run(
        f"""
        import importlib, sys
        import agentfx
        for name in {_core_modules()!r}:
            importlib.import_module(name)
        frameworks = {sorted(FRAMEWORKS.values())!r}
        print(sorted(m for m in sys.modules if m.partition(".")[0] in frameworks or m in {sorted(FRAMEWORKS)!r}))
        """
    )
    assert out == "[]"


# Names the README, the design or a public docstring presents as public, by the module
# they are documented under: each is importable from it and in its ``__all__``.
DOCUMENTED = {
    "agentfx": ["ProgramFactory"],
    "agentfx.a2a": ["AUTHENTICATE_TIMEOUT", "PARKED_TASK_TIMEOUT", "PRINCIPALS_AT_CAPACITY"],
    "agentfx.mcp": ["AUTHENTICATE_TIMEOUT", "PROGRESS_INTERVAL", "SESSION_IDLE_TIMEOUT"],
    "agentfx.testing": ["LawViolation"],
}


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_documented_names_are_exported_from_their_public_module(module: str) -> None:
    public = importlib.import_module(module)
    exported = typing.cast(tuple[str, ...], getattr(public, "__all__"))
    assert list(exported) == sorted(exported) and len(set(exported)) == len(exported)
    assert [name for name in exported if not hasattr(public, name)] == []
    assert [name for name in DOCUMENTED[module] if name not in exported] == []


def test_the_documented_names_are_the_implementations_own() -> None:
    import agentfx.a2a._app as a2a_app
    import agentfx.app
    import agentfx.mcp._http as mcp_http
    import agentfx.mcp._server as mcp_server
    import agentfx.testing.laws
    from agentfx import ProgramFactory
    from agentfx.a2a import AUTHENTICATE_TIMEOUT, PARKED_TASK_TIMEOUT, PRINCIPALS_AT_CAPACITY
    from agentfx.mcp import AUTHENTICATE_TIMEOUT as MCP_AUTHENTICATE_TIMEOUT
    from agentfx.mcp import PROGRESS_INTERVAL, SESSION_IDLE_TIMEOUT
    from agentfx.testing import LawViolation

    assert ProgramFactory is agentfx.app.ProgramFactory
    assert (AUTHENTICATE_TIMEOUT, PARKED_TASK_TIMEOUT, PRINCIPALS_AT_CAPACITY) == (
        a2a_app.AUTHENTICATE_TIMEOUT,
        a2a_app.PARKED_TASK_TIMEOUT,
        a2a_app.PRINCIPALS_AT_CAPACITY,
    )
    assert (MCP_AUTHENTICATE_TIMEOUT, PROGRESS_INTERVAL, SESSION_IDLE_TIMEOUT) == (
        mcp_http.AUTHENTICATE_TIMEOUT,
        mcp_server.PROGRESS_INTERVAL,
        mcp_http.SESSION_IDLE_TIMEOUT,
    )
    assert LawViolation is agentfx.testing.laws.LawViolation and issubclass(LawViolation, AssertionError)
