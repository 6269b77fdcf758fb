"""The store suites' site: each test runs once on SQLite and once on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.job_stores import ENGINES, StoreSite


@pytest.fixture(params=ENGINES)
def site(request: pytest.FixtureRequest, tmp_path: Path) -> StoreSite:
    """A job store's site: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return StoreSite("sqlite", str(tmp_path / "jobs.db"))
    return StoreSite("postgresql", request.getfixturevalue("postgres_dsn"))
