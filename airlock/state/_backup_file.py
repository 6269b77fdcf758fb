"""The backup file: airlock's tables of either engine in one SQLite file (synchronous: the
callers run each call on a worker thread).

Each component's tables have its SQLite DDL (the same columns as in PostgreSQL); table
``airlock_backup`` records the components copied, their schema versions, where the copy was
taken (never a password) and when. ``sqlite3`` can read it as it is.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ._tables import TableSet

#: The table naming what the file holds.
META = "airlock_backup"
_META_DDL = f"""
CREATE TABLE {META} (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    source TEXT NOT NULL,
    taken_at REAL NOT NULL
)
"""


def quoted(name: str) -> str:
    """``name`` as an SQL identifier (both engines)."""
    return '"' + name.replace('"', '""') + '"'


class BackupWriter:
    """A new backup file at ``path`` (0600, never overwriting one; removed by ``abandon``)."""

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        self.path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("BEGIN")
        self._conn.execute(_META_DDL)

    def create(self, tables: TableSet, version: int, source: str, taken_at: float) -> None:
        """Create ``tables`` (its SQLite DDL) and record it."""
        for statement in tables.sqlite_schema.split(";"):  # no ``executescript``: it would commit
            if statement.strip():
                self._conn.execute(statement)
        self._conn.execute(
            f"INSERT INTO {META} (component, version, source, taken_at) VALUES (?, ?, ?, ?)",
            (tables.component, version, source, taken_at),
        )

    def columns(self, table: str, names: Sequence[str]) -> None:
        """Add the columns of ``names`` the table lacks (tables newer than this code: nothing is lost)."""
        have = {row[1] for row in self._conn.execute(f"PRAGMA table_info({quoted(table)})")} | {"rowid"}
        for name in names:
            if name not in have:
                self._conn.execute(f"ALTER TABLE {quoted(table)} ADD COLUMN {quoted(name)}")

    def write(self, table: str, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Insert ``rows`` (values of ``names``)."""
        marks = ", ".join("?" for _ in names)
        into = ", ".join(quoted(n) for n in names)
        self._conn.executemany(f"INSERT INTO {quoted(table)} ({into}) VALUES ({marks})", rows)

    def finish(self) -> Path:
        """Commit and close: the file is complete."""
        self._conn.execute("COMMIT")
        self._conn.close()
        return self.path

    def abandon(self) -> None:
        """Close and remove the unfinished file."""
        with contextlib.suppress(sqlite3.Error):
            self._conn.close()
        self.path.unlink(missing_ok=True)


class BackupReader:
    """An existing backup file, read only.

    Raises:
        ValueError: ``path`` is not a backup file.
    """

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise ValueError(f"no backup at {path}")
        self.path = path
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        try:
            rows = self._conn.execute(f"SELECT component, version, source, taken_at FROM {META}").fetchall()
        except sqlite3.Error as e:
            self._conn.close()
            raise ValueError(f"{path} is not an airlock store backup: {e}") from None
        self.versions: Mapping[str, int] = {str(r[0]): int(r[1]) for r in rows}
        self.source = str(rows[0][2]) if rows else ""

    def columns(self, table: str) -> set[str]:
        """The table's columns (``rowid`` too: a rowid table has it)."""
        rows = self._conn.execute(f"PRAGMA table_info({quoted(table)})").fetchall()
        return {str(r[1]) for r in rows} | {"rowid"} if rows else set()

    def batches(self, table: str, names: Sequence[str], size: int) -> Iterator[list[Any]]:
        """The rows' ``names`` values, ``size`` at a time (call ``next`` on a worker thread)."""
        cursor = self._conn.execute(f"SELECT {', '.join(quoted(n) for n in names)} FROM {quoted(table)}")
        while batch := cursor.fetchmany(size):
            yield batch

    def close(self) -> None:
        """Close the file."""
        self._conn.close()
