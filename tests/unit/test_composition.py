"""Compose, don't mix: no class takes its methods from more than one other module by
inheritance (mixins spread over files), and no function in the core rooms is over 60 lines."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import airlock
import layer0

ROOT = Path(__file__).resolve().parents[2]
#: The rooms held to the 60-line rule: the core (the loop, the job service, the sandbox and its
#: proxies, policy, the weave, the protocol).
CORE = (
    "airlock/controller",
    "airlock/turn",
    "airlock/sandbox",
    "airlock/proxy",
    "airlock/weave",
    "airlock/policy",
    "layer0",
)
MAX_LINES = 60


def _modules() -> Iterator[object]:
    for package in (airlock, layer0):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if "._proto" in info.name or info.name.endswith("__main__"):
                continue
            yield importlib.import_module(info.name)


def _gives_methods(cls: type) -> bool:
    """Whether ``cls`` defines a method of its own (abstract ones and protocols excepted)."""
    if cls.__dict__.get("_is_protocol"):
        return False
    return any(
        inspect.isfunction(value)
        and not getattr(value, "__isabstractmethod__", False)
        and not (name.startswith("__") and name.endswith("__"))
        for name, value in cls.__dict__.items()
    )


def mixed_classes() -> list[str]:
    """Classes inheriting methods from more than one module besides their own."""
    found = []
    for module in _modules():
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:  # type: ignore[attr-defined]
                continue
            donors = {
                base.__module__
                for base in cls.__mro__[1:]
                if base.__module__.split(".")[0] in ("airlock", "layer0")
                and base.__module__ != cls.__module__
                and _gives_methods(base)
            }
            if len(donors) > 1:
                found.append(f"{cls.__module__}.{cls.__qualname__} takes methods from {sorted(donors)}")
    return sorted(set(found))


def test_no_class_mixes_methods_from_several_modules() -> None:
    mixed = mixed_classes()
    assert not mixed, "\n".join(mixed)


def long_functions(folder: Path) -> list[str]:
    """``path:line name (N lines)`` for each function over :data:`MAX_LINES` under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_in_the_core_is_over_60_lines() -> None:
    long = [f for room in CORE for f in long_functions(ROOT / room)]
    assert not long, "\n".join(long)
