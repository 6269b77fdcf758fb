"""SqliteStore: the embedded default state store that persists (one SQLite file, WAL mode)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ._sql import returning
from ._sql_state import SqlStateStore
from ._sqlite import SqliteDatabase

SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS state (
    scope TEXT NOT NULL,
    key   TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID
"""


def _create_table(conn: sqlite3.Connection, fresh: bool) -> None:
    conn.execute(SQLITE_SCHEMA)


class SqliteStore(SqlStateStore):
    """A ``layer0.StateStore`` in one SQLite file; survives process restarts.

    All database work runs on one dedicated thread that owns the connection, so the event
    loop never blocks and operations of one store are serialized. The file is in WAL mode with
    a busy timeout, so several stores (or processes) on the same file can write concurrently.

    Use as ``async with SqliteStore(path) as store:`` or call ``aclose()``.

    Args:
        path: the database file (created private with its directory).
        busy_timeout_s: how long a write waits for another connection's lock.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 10.0) -> None:
        self._sqlite = SqliteDatabase(path, _create_table, busy_timeout_s=busy_timeout_s)
        super().__init__(self._sqlite)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._sqlite.path

    async def _open(self) -> None:
        await self._run(returning(None))  # opens the file (with the retry of a transient lock)

    async def aclose(self) -> None:
        """Close the file and stop its thread (idempotent)."""
        await super().aclose()
        await self._sqlite.aclose()
