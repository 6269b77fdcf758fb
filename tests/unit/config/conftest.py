"""Helpers for configuration tests: write YAML files and collect the issues they raise."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.config import ConfigIssue, InvalidConfigError, load_config

Write = Callable[..., Path]


@pytest.fixture
def write(tmp_path: Path) -> Write:
    """``write(text, name="airlock.yaml")``: a dedented YAML file under tmp_path."""

    def _write(text: str, name: str = "airlock.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return _write


@pytest.fixture
def issues() -> Callable[[Path], list[ConfigIssue]]:
    """``issues(path)``: every issue loading ``path`` reports (fails if it loads)."""

    def _issues(path: Path) -> list[ConfigIssue]:
        with pytest.raises(InvalidConfigError) as info:
            load_config(path)
        return list(info.value.issues)

    return _issues


@pytest.fixture
def one_issue(issues: Callable[[Path], list[ConfigIssue]]) -> Callable[[Path], str]:
    """``one_issue(path)``: the single issue loading ``path`` reports, as text."""

    def _one(path: Path) -> str:
        found = issues(path)
        assert len(found) == 1, "\n".join(map(str, found))
        return str(found[0])

    return _one
