"""The test package of agent extensions (tests/support/ext_package), made visible in this
process as if installed: importable, its entry points found by importlib.metadata."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

#: The package's project directory (pyproject.toml and src/).
PACKAGE = Path(__file__).resolve().parent / "ext_package"


def install_ext_package(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Write a dist-info for the package into ``root`` (its entry points: the pyproject's) and
    put ``root`` and the package's sources on ``sys.path`` for this test."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    dist = root / "airlock_test_ext-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: airlock-test-ext\nVersion: 0.1.0\n")
    lines = []
    for group, points in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {value}" for name, value in points.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.syspath_prepend(str(PACKAGE / "src"))
    monkeypatch.syspath_prepend(str(root))
