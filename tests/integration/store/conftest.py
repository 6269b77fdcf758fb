"""TEMPORARY: replaced by tests/conftest.py's postgres_dsn at merge (a dev PostgreSQL on this machine)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import psycopg
import pytest

_SERVER = "postgresql://test@127.0.0.1:55432/postgres"


@pytest.fixture
async def postgres_dsn() -> AsyncIterator[str]:
    name = f"t_{secrets.token_hex(6)}"
    async with await psycopg.AsyncConnection.connect(_SERVER, autocommit=True) as conn:
        await conn.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://test@127.0.0.1:55432/{name}"
    async with await psycopg.AsyncConnection.connect(_SERVER, autocommit=True) as conn:
        await conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
