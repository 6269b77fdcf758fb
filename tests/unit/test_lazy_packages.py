"""Packages that load part of their modules at first use expose exactly what eager imports would.

``airlock.turn``, ``airlock.tools`` and ``layer0`` import some of their modules only when one
of those modules' names is first used (a module ``__getattr__``, so that a runner serves health
without them). Each name their ``__init__`` imports, at run time or for type checking, must
resolve to the very object its module defines, and the rest of the package's surface
(``__all__``, ``dir()``, ``import *``, unknown names) must behave as before. Checked in fresh
interpreters, before anything else has loaded the lazy modules.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAZY_PACKAGES = (
    "airlock.turn",
    "airlock.tools",
    "layer0",
    "airlock.wire",
    "airlock.runner",
    "airlock.jobs",
    "airlock.identity",
)

#: In a fresh interpreter: import the package (argv 1), list which of its modules (argv 3…)
#: are not loaded yet, then check every name (argv 2: name → module) and the package's surface.
SCRIPT = """
import importlib, json, sys
package = importlib.import_module(sys.argv[1])
deferred = sorted(m for m in sys.argv[3:] if m not in sys.modules)
names = json.loads(sys.argv[2])
differ = [n for n, m in names.items() if getattr(package, n) is not getattr(importlib.import_module(m), n)]
try:
    package.no_such_name
    unknown = "no error"
except AttributeError as e:
    unknown = str(e)
namespace = {}
exec(f"from {sys.argv[1]} import *", namespace)
print(json.dumps({
    "deferred": deferred,
    "differ": differ,
    "not_in_dir": sorted(set(package.__all__) - set(dir(package))),
    "not_starred": sorted(set(package.__all__) - set(namespace)),
    "unknown": unknown,
}))
"""


def declared_names(package: str) -> dict[str, str]:
    """Every name the package's ``__init__`` imports from its own modules → that module."""
    tree = ast.parse((ROOT / package.replace(".", "/") / "__init__.py").read_text(encoding="utf-8"))
    return {
        alias.asname or alias.name: f"{package}.{node.module}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names
    }


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_name_resolves_to_its_modules_object(package: str) -> None:
    names = declared_names(package)
    modules = sorted(set(names.values()))
    argv = [sys.executable, "-c", SCRIPT, package, json.dumps(names), *modules]
    result = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert result["deferred"], f"{package} loads all its modules at import: nothing is lazy any more"
    assert result["differ"] == []
    assert result["not_in_dir"] == [] and result["not_starred"] == []
    assert "no_such_name" in result["unknown"]
