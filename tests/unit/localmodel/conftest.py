"""Fixtures for the local model tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.localmodel import CachePaths

from .localmodel_fakes import FakeModel, make_fake_model


@pytest.fixture
def cache(tmp_path: Path) -> CachePaths:
    return CachePaths(root=tmp_path / "cache")


@pytest.fixture
def fake_model(tmp_path: Path) -> FakeModel:
    return make_fake_model(tmp_path)
