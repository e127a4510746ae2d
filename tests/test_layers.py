"""Imports inside agentfx point one way: no module imports, even lazily, one that imports it back."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import agentfx

PACKAGE = Path(agentfx.__file__).resolve().parent

# Edges that may close a cycle because they exist for annotations only (under TYPE_CHECKING),
# for types that name each other across two modules. With human confirmation (DESIGN.md §10),
# ``Invocation.confirm`` takes a ``ConfirmationRequest``, which names its ``Invocation``.
TYPE_ONLY_BACK_EDGES = {("agentfx.invocation", "agentfx.confirm")}

Graph = dict[str, dict[str, bool]]
"""module -> imported module -> whether every import of it is under ``if TYPE_CHECKING:``."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path, modules: dict[str, Path]) -> dict[str, bool]:
    """Every agentfx module ``name`` imports: at module level, under TYPE_CHECKING or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, bool] = {}

    def add(target: str, type_only: bool) -> None:
        if target in modules and target != name:
            found[target] = found.get(target, True) and type_only

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, type_only)
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
                add(submodule if submodule in modules else source, type_only)
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(ast.parse(path.read_text(), str(path)), False)
    return found


def _graph() -> Graph:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> str | None:
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as cycle:
        return " -> ".join(reversed(cycle.args[1]))
    return None


def test_the_import_graph_sees_the_known_edges() -> None:
    graph = _graph()
    assert graph["agentfx.pipeline"]["agentfx.contract"] is False
    assert graph["agentfx.builder"]["agentfx.runtime"] is False
    assert graph["agentfx.mcp._server"]["agentfx.mcp._wire"] is False
    # TYPE_CHECKING-only and function-level imports count too.
    assert graph["agentfx.docs"]["agentfx.pipeline"] is True
    assert graph["agentfx.cli"]["agentfx.mcp"] is False


def test_no_import_cycle_among_agentfx_modules() -> None:
    graph = _graph()
    edges = {name: {t for t in targets if (name, t) not in TYPE_ONLY_BACK_EDGES} for name, targets in graph.items()}
    assert _cycle(edges) is None


def test_the_allowed_back_edges_are_for_annotations_only() -> None:
    graph = _graph()
    for source, target in TYPE_ONLY_BACK_EDGES:
        # Where the edge exists, it must stay under TYPE_CHECKING: an import that runs never closes a cycle.
        assert graph[source].get(target, True) is True, (source, target)


def test_the_contract_layer_knows_nothing_of_binding() -> None:
    graph = _graph()
    assert not {"agentfx.runtime", "agentfx.docs", "agentfx.pipeline", "agentfx.builder"} & set(graph["agentfx.contract"])


def test_the_old_circle_through_bind_would_be_found() -> None:
    # ``contract`` once imported ``runtime`` (for the builder's ``bind``), which imports ``pipeline``.
    edges = {name: {t for t in targets if (name, t) not in TYPE_ONLY_BACK_EDGES} for name, targets in _graph().items()}
    edges["agentfx.contract"].add("agentfx.runtime")
    cycle = _cycle(edges)
    assert cycle is not None and "agentfx.contract" in cycle and "agentfx.runtime" in cycle
