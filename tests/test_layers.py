"""Imports inside agentfx point one way: no module imports, even lazily, one that imports it back."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import agentfx

PACKAGE = Path(agentfx.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every agentfx module ``name`` imports: at module level, under TYPE_CHECKING or inside a function."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from . import _wire`` imports the submodule; ``from .. import __version__`` the package.
                submodule = f"{source}.{alias.name}"
                targets.add(submodule if submodule in modules else source)
    return {t for t in targets if t in modules and t != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_import_graph_sees_the_known_edges() -> None:
    graph = _graph()
    assert "agentfx.contract" in graph["agentfx.pipeline"]
    assert "agentfx.runtime" in graph["agentfx.builder"]
    assert "agentfx.mcp._wire" in graph["agentfx.mcp._server"]
    # TYPE_CHECKING-only and function-level imports count too.
    assert "agentfx.pipeline" in graph["agentfx.docs"]
    assert "agentfx.mcp" in graph["agentfx.cli"]


def test_no_import_cycle_among_agentfx_modules() -> None:
    try:
        list(graphlib.TopologicalSorter(_graph()).static_order())
    except graphlib.CycleError as cycle:
        pytest.fail(f"import cycle: {' -> '.join(reversed(cycle.args[1]))}")


def test_the_contract_layer_knows_nothing_of_binding() -> None:
    graph = _graph()
    assert not {"agentfx.runtime", "agentfx.docs", "agentfx.pipeline", "agentfx.builder"} & graph["agentfx.contract"]
