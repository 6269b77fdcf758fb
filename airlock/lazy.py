"""Names a package loads at their first use (PEP 562), so importing it costs nothing.

The runner serves its health check before it loads what only a turn needs; packages on that
path (``airlock.runner``, ``airlock.wire``) map each public name to the module defining it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: dict[str, Any], where: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__``: ``where`` maps each name to its module
    (absolute, or relative to ``package``); a loaded name is kept in ``namespace``."""

    def getattr_(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name], package), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(namespace.keys() | where.keys())

    return getattr_, dir_
