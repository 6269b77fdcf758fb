"""The job store on either engine, for the tests that run unchanged against both."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from airlock.controller import JobStore, PostgresJobStore, SqliteJobStore
from airlock.state import Op, PostgresDatabase, PostgresStateStore, SqliteStore, fetch_one
from layer0 import StateStore

ENGINES = ("sqlite", "postgresql")


@dataclass(frozen=True)
class StoreSite:
    """Where a test's job store lives: a SQLite file, or a PostgreSQL database (its DSN)."""

    engine: str
    where: str

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[JobStore]:
        """The job store there (several may be open at once: replicas of one store)."""
        if self.engine == "sqlite":
            async with SqliteJobStore(Path(self.where)) as store:
                yield store
            return
        async with PostgresDatabase(self.where) as db, PostgresJobStore(db) as store:
            yield store

    @contextlib.asynccontextmanager
    async def open_with_state(self) -> AsyncIterator[tuple[JobStore, StateStore]]:
        """The job store and the state store as a controller opens them there: the SQLite
        state file beside the job file, or the same PostgreSQL database."""
        if self.engine == "sqlite":
            path = Path(self.where)
            async with SqliteJobStore(path) as jobs, SqliteStore(path.with_name("state.db")) as state:
                yield jobs, state
            return
        async with (
            PostgresDatabase(self.where) as db,
            PostgresJobStore(db) as jobs,
            PostgresStateStore(db) as state,
        ):
            yield jobs, state

    async def set_schema_version(self, version: int) -> None:
        """Pretend a newer airlock upgraded the store (its schema version, as recorded)."""
        if self.engine == "sqlite":
            with contextlib.closing(sqlite3.connect(self.where)) as conn:
                conn.execute(f"PRAGMA user_version = {version}")
            return
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.where, autocommit=True) as conn:
            await conn.execute("UPDATE airlock_schema SET version = %s WHERE component = 'jobs'", (version,))


async def count_rows(store: JobStore, table: str) -> int:
    """How many rows ``store``'s ``table`` holds."""

    def op() -> Op[int]:
        row = yield from fetch_one(f"SELECT COUNT(*) FROM {table}")
        assert row is not None
        return int(row[0])

    return await store.run(op())
