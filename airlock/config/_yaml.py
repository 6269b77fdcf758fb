"""YAML loading that remembers where every key and list item was written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ._errors import ConfigIssue, InvalidConfigError

#: A key path into a loaded document: mapping keys and list indexes.
KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Position:
    """A 1-based line and column."""

    line: int
    column: int


@dataclass
class LocatedDocument:
    """A parsed YAML document plus the position of each key and list item in it."""

    file: Path
    data: Any
    positions: dict[KeyPath, Position] = field(default_factory=dict)

    def locate(self, path: KeyPath) -> tuple[KeyPath, Position]:
        """The longest prefix-walk of ``path`` through this document and its position.

        Elements of ``path`` that name no node (pydantic's union tags such as ``str`` or
        ``container``, or a missing key) are skipped; the deepest node reached wins.
        """
        current: KeyPath = ()
        for element in path:
            candidate = (*current, element)
            if candidate in self.positions:
                current = candidate
        return current, self.positions.get(current, Position(1, 1))

    def issue(self, path: KeyPath, message: str, *, missing: str | None = None) -> ConfigIssue:
        """A ConfigIssue at the node ``path`` names (``missing``: a key absent below it)."""
        found, pos = self.locate(path)
        shown = format_path((*found, missing) if missing is not None else found)
        return ConfigIssue(self.file, pos.line, pos.column, shown, message)


def format_path(path: KeyPath) -> str:
    """``("agents", "coder", "allow", 0, "port")`` as ``agents.coder.allow[0].port``."""
    out = ""
    for element in path:
        if isinstance(element, int):
            out += f"[{element}]"
        else:
            out += f".{element}" if out else element
    return out


def _pos(mark: yaml.Mark | None) -> Position:
    return Position(mark.line + 1, mark.column + 1) if mark is not None else Position(1, 1)


#: The deepest a configuration may nest mappings and lists (real ones use about ten levels).
MAX_DEPTH = 100
#: The most values a document may expand to, counting each use of an alias anew (a
#: "billion laughs" of nested aliases would otherwise take hours and all memory).
MAX_NODES = 200_000


_EXPANDS = f"the document expands to more than {MAX_NODES} values (aliases nested in aliases?)"


def _children(node: yaml.Node) -> list[tuple[yaml.Node, str | int]]:
    """A collection's children, each with its step in a key path (a mapping's keys too)."""
    if isinstance(node, yaml.SequenceNode):
        return [(item, index) for index, item in enumerate(node.value)]
    pairs: list[tuple[yaml.Node, str | int]] = []
    for key, value in node.value:
        step = str(key.value) if isinstance(key, yaml.ScalarNode) else "<key>"
        pairs += [(key, "<key>"), (value, step)]
    return pairs


class _TooBig(Exception):
    """The document nests too deeply or expands to too many values (a ConfigIssue inside)."""

    def __init__(self, issue: ConfigIssue) -> None:
        super().__init__(str(issue))
        self.issue = issue


class _Builder:
    """Turns a composed node tree into Python data, recording positions and duplicate keys."""

    def __init__(self, loader: yaml.CSafeLoader, doc: LocatedDocument) -> None:
        self.loader = loader
        self.doc = doc
        self.issues: list[ConfigIssue] = []
        self.built = 0
        #: The collection nodes being built (or measured) now (an alias to one is a cycle).
        self.open: set[int] = set()
        #: What each node measured expands to (by ``id``).
        self.sizes: dict[int, int] = {}

    def _refuse(self, node: yaml.Node, path: KeyPath, message: str) -> _TooBig:
        pos = _pos(node.start_mark)
        return _TooBig(ConfigIssue(self.doc.file, pos.line, pos.column, format_path(path), message))

    def measure(self, node: yaml.Node, path: KeyPath = ()) -> int:
        """How many values ``node`` expands to (an alias counted at each use), each shared
        node measured once: a "billion laughs" is refused in milliseconds, before anything is
        built. A cycle is left to :meth:`build`, which names it."""
        known = self.sizes.get(id(node))
        if known is not None:
            return known
        if len(path) > MAX_DEPTH:
            raise self._refuse(node, path, f"nested deeper than {MAX_DEPTH} levels")
        if id(node) in self.open:
            return 1  # a cycle
        size = 1
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self.open.add(id(node))
            try:
                for child, step in _children(node):
                    size += self.measure(child, (*path, step))
                    if size > MAX_NODES:
                        raise self._refuse(node, path, _EXPANDS)
            finally:
                self.open.discard(id(node))
        self.sizes[id(node)] = size
        return size

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.built += 1
        if self.built > MAX_NODES:
            raise self._refuse(node, path, _EXPANDS)
        if len(path) > MAX_DEPTH:
            raise self._refuse(node, path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            if id(node) in self.open:
                raise self._refuse(node, path, "an alias refers to a value that contains it (a cycle)")
            self.open.add(id(node))
            try:
                return self._build_collection(node, path)
            finally:
                self.open.discard(id(node))
        try:
            return self.loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as e:  # e.g. an integer of 5000 digits, 2024-13-45
            pos = _pos(node.start_mark)
            self.issues.append(
                ConfigIssue(self.doc.file, pos.line, pos.column, format_path(path), f"unreadable value: {e}")
            )
            return None

    def _build_collection(self, node: yaml.Node, path: KeyPath) -> Any:
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)  # resolve `<<` merge keys as PyYAML does
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = (
                    self.build(key_node, (*path, "<key>")) if isinstance(key_node, yaml.ScalarNode) else None
                )
                pos = _pos(key_node.start_mark)
                if not isinstance(key, str | int | bool | float) or key is None:
                    self.issues.append(
                        ConfigIssue(
                            self.doc.file,
                            pos.line,
                            pos.column,
                            format_path(path),
                            "mapping keys must be plain strings",
                        )
                    )
                    continue
                key = str(key) if not isinstance(key, str) else key
                child = (*path, key)
                if key in out:
                    first = self.doc.positions[child]
                    self.issues.append(
                        ConfigIssue(
                            self.doc.file,
                            pos.line,
                            pos.column,
                            format_path(child),
                            f"duplicate key (first defined at line {first.line})",
                        )
                    )
                    continue
                self.doc.positions[child] = pos
                out[key] = self.build(value_node, child)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                child = (*path, index)
                self.doc.positions[child] = _pos(item.start_mark)
                items.append(self.build(item, child))
            return items
        return self.loader.construct_object(node, deep=True)


def load_yaml(file: Path) -> LocatedDocument:
    """Parse one YAML file (a single document) with positions.

    Raises:
        InvalidConfigError: the file cannot be read, is not valid YAML, holds several
            documents, or repeats a key in one mapping.
    """
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidConfigError([ConfigIssue(file, 0, 0, "", f"cannot read file: {e}")]) from e
    doc = LocatedDocument(file=file, data=None)
    try:
        # libyaml's parser: PyYAML's own scanner takes seconds on a few hundred nested flow
        # collections (quadratic); libyaml refuses past 1000 levels at once. Both refuse NUL
        # and other control characters.
        loader = yaml.CSafeLoader(text)
    except yaml.YAMLError as e:
        raise InvalidConfigError([ConfigIssue(file, 0, 0, "", f"invalid YAML: {e}")]) from e
    try:
        node = loader.get_single_node()
        if node is not None:
            doc.positions[()] = _pos(node.start_mark)
            builder = _Builder(loader, doc)
            builder.measure(node)
            doc.data = builder.build(node, ())
            if builder.issues:
                raise InvalidConfigError(builder.issues)
    except yaml.MarkedYAMLError as e:
        pos = _pos(e.problem_mark or e.context_mark)
        problem = " ".join(p for p in (e.context, e.problem) if p) or "invalid YAML"
        if "maximum nesting depth" in problem:  # libyaml's own bound, past ours
            problem = f"nested too deeply (more than {MAX_DEPTH} levels)"
        raise InvalidConfigError([ConfigIssue(file, pos.line, pos.column, "", problem)]) from e
    except yaml.YAMLError as e:
        raise InvalidConfigError([ConfigIssue(file, 0, 0, "", f"invalid YAML: {e}")]) from e
    except _TooBig as e:
        raise InvalidConfigError([e.issue]) from None
    except RecursionError:  # the parser itself recurses once per level of nesting
        message = f"nested too deeply (more than {MAX_DEPTH} levels)"
        raise InvalidConfigError([ConfigIssue(file, 0, 0, "", message)]) from None
    finally:
        loader.dispose()
    return doc
