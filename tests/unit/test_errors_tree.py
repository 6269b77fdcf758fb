"""airlock/errors.py's docstring tree lists every AirlockError subclass under its real parent."""

from __future__ import annotations

import importlib
import pkgutil
import re

import airlock
from airlock import errors
from airlock.errors import AirlockError

_BRANCH = "── "


def _import_every_module() -> None:
    for module in pkgutil.walk_packages(airlock.__path__, "airlock."):
        if module.name.rsplit(".", 1)[-1] != "__main__":  # importing those would run them
            importlib.import_module(module.name)


def _all_subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    subclasses: list[type] = cls.__subclasses__()
    for sub in subclasses:
        found |= {sub, *_all_subclasses(sub)}
    return found


def _tree() -> dict[str, str | None]:
    """Each class name in the docstring tree → its parent's name (None for the root)."""
    doc = errors.__doc__ or ""
    lines = doc.split("::", 1)[1].strip("\n").splitlines()
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in lines:
        text = line[4:]  # the literal block's indentation
        if not text.strip():
            continue
        if not path:
            path.append(text.split()[0])
            parents[path[0]] = None
            continue
        at = text.find(_BRANCH)
        if at < 0:
            continue  # a description's continuation line
        depth = (at - 1) // 4 + 1
        name = re.match(r"\w+", text[at + len(_BRANCH) :])
        assert name is not None, line
        del path[depth:]
        parents[name.group()] = path[-1]
        path.append(name.group())
    return parents


def test_the_tree_parser_reads_parents() -> None:
    tree = _tree()
    assert tree["AirlockError"] is None
    assert tree["ConfigError"] == "AirlockError"
    assert tree["ModelFileError"] == "LocalModelError"


def test_every_airlock_error_is_in_the_tree_under_its_parent() -> None:
    _import_every_module()
    tree = _tree()
    subclasses = _all_subclasses(AirlockError)
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in subclasses if c.__name__ not in tree)
    assert not missing, f"add these to the tree in airlock/errors.py: {missing}"
    wrong = sorted(
        f"{c.__module__}.{c.__qualname__}: tree says under {tree[c.__name__]}"
        for c in subclasses
        if tree[c.__name__] not in {base.__name__ for base in c.__bases__}
    )
    assert not wrong, f"fix these parents in the tree of airlock/errors.py: {wrong}"
    stale = sorted(set(tree) - {c.__name__ for c in subclasses} - {"AirlockError"})
    assert not stale, f"the tree of airlock/errors.py lists classes that do not exist: {stale}"
