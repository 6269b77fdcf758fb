"""The controller package's shape (issue 36): its classes compose instead of mixing in, no
function of it is over 60 lines, and no modules of it import each other in a circle (imports
inside functions and under ``TYPE_CHECKING`` count)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "airlock" / "controller"
MAX_LINES = 60


def _modules() -> dict[str, ast.Module]:
    return {
        p.stem: ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        for p in sorted(PACKAGE.glob("*.py"))
    }


def _imports(tree: ast.Module, known: set[str]) -> set[str]:
    """The package's modules ``tree`` imports, wherever the import is written."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
        elif node.module is not None and node.module.startswith("airlock.controller."):
            names = [node.module.split(".")[2]]
        elif node.module == "airlock.controller":
            names = [a.name for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known}
    return found


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that reach each other (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_modules_of_the_controller_import_each_other_in_a_circle() -> None:
    modules = _modules()
    graph = {name: _imports(tree, set(modules)) - {name} for name, tree in modules.items()}
    assert _circles(graph) == []


def test_no_function_of_the_controller_is_over_60_lines() -> None:
    long = [
        f"{name}.py:{node.lineno} {node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_LINES
    ]
    assert long == []


def test_no_class_of_the_controller_takes_methods_from_another_module_of_it() -> None:
    """A class's bases come from outside the package (protocols, exceptions, library bases)
    or define no methods: no mixins of the controller's own."""
    modules = _modules()
    with_methods = {
        node.name
        for tree in modules.values()
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef) for m in node.body)
    }
    mixed = [
        f"{name}.py {node.name}({ast.unparse(base)})"
        for name, tree in modules.items()
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        for base in node.bases
        if isinstance(base, ast.Name) and base.id in with_methods
    ]
    assert mixed == []
