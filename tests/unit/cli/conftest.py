"""Fixtures for the CLI tests: a CliRunner, temporary configurations, no ambient state."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The controller's data dir, also the clients' default (so they read its token file)."""
    path = tmp_path / "data"
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(path))
    monkeypatch.delenv("AIRLOCK_TOKEN", raising=False)
    return path


@pytest.fixture
def write_config(tmp_path: Path):  # type: ignore[no-untyped-def]
    """``write_config(yaml_text, **files)``: airlock.yaml (dedented) plus extra files in tmp_path."""

    def _write(text: str, **files: str) -> Path:
        for name, content in files.items():
            (tmp_path / name.replace("__", ".")).write_text(content, encoding="utf-8")
        path = tmp_path / "airlock.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ambient configuration, and a private model cache (nothing is ever downloaded)."""
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
