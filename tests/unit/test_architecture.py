"""Import rules for airlock/ and layer0/: no package-level cycle, no private module across packages.

Every ``import`` and ``from ... import`` counts wherever it is written (module level, inside a
function, under ``if TYPE_CHECKING:``); relative imports are resolved. ``importlib.import_module``
or ``__import__`` with a literal airlock/layer0 name is refused: write the import (lazy if need be).

Packages: ``airlock.X`` for each ``X`` directly under ``airlock/`` (``airlock/spec.py`` and
``airlock/build.py`` are packages of their own, top-level modules such as ``airlock.errors``
are leaves), the ``airlock`` root itself, and ``layer0`` as one package.

Private: a module with a dotted-path component starting with ``_`` (``__init__`` and
``__main__`` excepted), e.g. ``airlock.proxy._http`` or ``airlock._grpcauth``, may be imported
only from its own package. The generated gRPC code ``airlock._proto`` is private to the
packages that own the wire format: :data:`PROTO_OWNERS` (``airlock.wire`` converts between
the protobuf messages and layer0/airlock values; ``airlock.runner`` and ``airlock.controller``
serve and call the gRPC services).

The checker is plain functions over a source root, so it is tested on synthetic trees too
(test_architecture_checker.py).
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The top-level packages checked, and the generated code left out of the scan.
TOP_LEVEL = ("airlock", "layer0")
GENERATED = ("airlock._proto",)
#: Packages allowed to import the private ``airlock._proto``.
PROTO_OWNERS = frozenset({"airlock.wire", "airlock.runner", "airlock.jobs", "airlock.controller"})
_HIDDEN_IMPORTERS = frozenset({"import_module", "__import__"})


@dataclass(frozen=True)
class Import:
    """One module imported by another, and where."""

    importer: str
    target: str
    path: Path
    line: int
    text: str

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}: `{self.text}`"


def module_names(root: Path, top_level: Sequence[str] = TOP_LEVEL) -> dict[str, Path]:
    """Every module under ``root``'s top-level packages: dotted name → file."""
    modules: dict[str, Path] = {}
    for top in top_level:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def package_of(module: str) -> str:
    """``airlock.X`` for anything under ``airlock.X``; ``airlock``; ``layer0`` for all of layer0."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "airlock" else parts[0]


def is_private(module: str) -> bool:
    """Whether a component of ``module``'s dotted path is private (``_x``, not ``__init__``)."""
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in module.split("."))


def _resolve_from(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _source(node: ast.stmt | ast.expr, lines: Sequence[str]) -> str:
    """The node's source text, whitespace collapsed (AST column offsets count UTF-8 bytes)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    chunk = [line.encode() for line in lines[first : last + 1]]
    chunk[-1] = chunk[-1][: node.end_col_offset]
    chunk[0] = chunk[0][node.col_offset :]
    return " ".join(b" ".join(chunk).decode(errors="replace").split())


def imports_of(
    module: str, path: Path, known: Mapping[str, Path], top_level: Sequence[str] = TOP_LEVEL
) -> Iterator[Import | tuple[int, str]]:
    """The imports ``module`` makes of modules under ``top_level``, at any depth of its code;
    a hidden import (``import_module``/``__import__`` of a literal name there) as ``(line, text)``."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    is_package = path.name == "__init__.py"

    def ours(name: str) -> bool:
        return name.split(".")[0] in top_level

    for node in ast.walk(ast.parse(text, filename=str(path))):
        if isinstance(node, ast.Import):
            for target in sorted({alias.name for alias in node.names if ours(alias.name)}):
                yield Import(module, target, path, node.lineno, _source(node, lines))
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(module, is_package, node)
            if not ours(base):
                continue
            targets = {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
            for target in sorted(targets):
                yield Import(module, target, path, node.lineno, _source(node, lines))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0] if node.args else None
            if (
                name in _HIDDEN_IMPORTERS
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and ours(first.value)
            ):
                yield node.lineno, _source(node, lines)


@dataclass
class ImportGraph:
    """Every import between the checked modules."""

    root: Path
    imports: list[Import]
    hidden: list[str]

    @classmethod
    def scan(
        cls, root: Path, top_level: Sequence[str] = TOP_LEVEL, excluded: Sequence[str] = GENERATED
    ) -> ImportGraph:
        known = module_names(root, top_level)
        imports: list[Import] = []
        hidden: list[str] = []
        for module, path in known.items():
            if any(module == e or module.startswith(e + ".") for e in excluded):
                continue
            for found in imports_of(module, path, known, top_level):
                if isinstance(found, Import):
                    imports.append(found)
                else:
                    line, text = found
                    hidden.append(
                        f"{path.relative_to(root)}:{line}: `{text}` hides an import: write it as an import"
                    )
        return cls(root, imports, hidden)

    def edges(self) -> dict[tuple[str, str], list[Import]]:
        """Package → package edges, each with the imports that make it."""
        edges: dict[tuple[str, str], list[Import]] = {}
        for imp in self.imports:
            a, b = package_of(imp.importer), package_of(imp.target)
            if a != b:
                edges.setdefault((a, b), []).append(imp)
        return edges

    def cycles(self) -> list[str]:
        """One message per package cycle: the cycle's path and the imports along it."""
        edges = self.edges()
        messages = []
        for component, path in _circles(edges):
            hops = list(itertools.pairwise(path))
            lines = [f"package import cycle: {' -> '.join(path)}"]
            for a, b in hops:
                lines.append(f"  {a} -> {b}:")
                lines += [f"    {imp.where(self.root)}" for imp in edges[(a, b)]]
            inner = sorted((a, b) for a, b in edges if a in component and b in component)
            if len(inner) > len(hops):
                lines.append(
                    f"  every import between {', '.join(sorted(component))} (they all reach each other):"
                )
                lines += [f"    {a} -> {b} ({len(edges[(a, b)])} imports)" for a, b in inner]
            messages.append("\n".join(lines))
        return messages

    def module_cycles(self, packages: Iterable[str]) -> list[str]:
        """One message per circle of modules inside one package (type-only imports included;
        a package's ``__init__`` is its face, not a room: imports of it are not counted)."""
        inits = set(packages)
        edges: dict[tuple[str, str], list[Import]] = {}
        for imp in self.imports:
            a, b = imp.importer, imp.target
            if a != b and package_of(a) == package_of(b) and a not in inits and b not in inits:
                edges.setdefault((a, b), []).append(imp)
        messages = []
        for _, path in _circles(edges):
            lines = [f"module circle in {package_of(path[0])}: {' -> '.join(path)}"]
            for a, b in itertools.pairwise(path):
                lines += [f"    {imp.where(self.root)}" for imp in edges[(a, b)]]
            messages.append("\n".join(lines))
        return messages

    def private_imports(self, proto_owners: Iterable[str] = PROTO_OWNERS) -> list[str]:
        """One message per private module imported from another package."""
        owners = set(proto_owners)
        messages = []
        for imp in self.imports:
            here, there = package_of(imp.importer), package_of(imp.target)
            if here == there or not is_private(imp.target):
                continue
            if there == "airlock._proto" and here in owners:
                continue
            messages.append(
                f"{imp.where(self.root)}: {here} imports the private module {imp.target} of {there}"
            )
        return messages


def _circles(edges: Iterable[tuple[str, str]]) -> Iterator[tuple[set[str], list[str]]]:
    """Each set of nodes that reach each other along ``edges``, with a shortest cycle in it."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    for component in _strongly_connected(graph):
        if len(component) > 1:
            yield component, _a_cycle(graph, component)


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    components.append(component)
    return components


def _a_cycle(graph: Mapping[str, set[str]], component: set[str]) -> list[str]:
    """A shortest cycle through the component's first package: ``[a, ..., a]``."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & component):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if succ not in previous:
                    previous[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {component}")


# --- the rules, applied to this repository ------------------------------------------------


@functools.cache
def _graph() -> ImportGraph:
    return ImportGraph.scan(ROOT)


def test_no_import_cycle_between_packages() -> None:
    cycles = _graph().cycles()
    assert not cycles, "\n\n".join(cycles)


def test_no_circle_of_modules_inside_a_package() -> None:
    packages = {m for m, path in module_names(ROOT).items() if path.name == "__init__.py"}
    circles = _graph().module_cycles(packages)
    assert not circles, "\n\n".join(circles)


def test_no_private_module_is_imported_from_another_package() -> None:
    violations = _graph().private_imports()
    assert not violations, "\n".join(violations)


def test_no_hidden_import_of_an_airlock_module() -> None:
    hidden = _graph().hidden
    assert not hidden, "\n".join(hidden)


# --- the README's Layout section is the order ------------------------------------------------

#: Packages the README's layout need not list: the root's face, the entry point, generated code.
_UNLISTED = frozenset({"airlock", "airlock.__main__", "airlock._proto"})


def readme_layout(text: str) -> list[str]:
    """The packages the README's Layout section lists, in its order (``airlock/turn/`` →
    ``airlock.turn``, ``airlock/spec.py`` → ``airlock.spec``, ``layer0/`` → ``layer0``)."""
    section = text.split("## Layout", 1)[1].split("```", 2)[1]
    found = []
    for line in section.splitlines():
        first = line.split(" ", 1)[0]
        if first.startswith(("airlock/", "layer0/")):
            found.append(first.removesuffix("/").removesuffix(".py").replace("/", "."))
    return found


def layout_violations(order: Sequence[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Each import from a package to one listed below it (or not listed at all)."""
    where = {name: i for i, name in enumerate(order)}
    problems = []
    for importer, target in sorted(set(edges)):
        if importer in _UNLISTED or target in _UNLISTED:
            continue
        missing = [p for p in (importer, target) if p not in where]
        if missing:
            problems.append(f"{', '.join(missing)} is not in the README's Layout list")
        elif where[target] > where[importer]:
            problems.append(f"{importer} imports {target}, which the README's Layout lists below it")
    return sorted(set(problems))


def test_the_readme_layout_lists_every_package_in_import_order() -> None:
    order = readme_layout((ROOT / "README.md").read_text())
    assert len(order) == len(set(order)), f"a package is listed twice: {order}"
    problems = layout_violations(order, _graph().edges())
    assert not problems, "\n".join(problems)


def test_the_layout_check_catches_an_import_up_the_list_and_an_unlisted_package() -> None:
    order = ["layer0", "airlock.turn", "airlock.cli"]
    assert layout_violations(order, [("airlock.cli", "airlock.turn"), ("airlock.turn", "layer0")]) == []
    assert layout_violations(order, [("airlock.turn", "airlock.cli")]) == [
        "airlock.turn imports airlock.cli, which the README's Layout lists below it"
    ]
    assert layout_violations(order, [("airlock.cli", "airlock.probe")]) == [
        "airlock.probe is not in the README's Layout list"
    ]
