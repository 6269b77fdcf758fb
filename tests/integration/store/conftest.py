"""Fixtures of the store conformance suites."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

#: The PostgreSQL dev server of this machine (trust auth): only the temporary fixture uses it.
_DEV_SERVER = "postgresql://test@127.0.0.1:55432/postgres"


# TEMPORARY: replaced by tests/conftest.py's postgres_dsn at merge (delete this fixture then:
# being closer to the tests, it would shadow the real one).
@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """The DSN of a fresh, empty database on the dev server, dropped after the test."""
    import psycopg

    name = f"airlock_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(_DEV_SERVER, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _DEV_SERVER.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(_DEV_SERVER, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
