"""SqliteJobStore: the job store in one SQLite file (WAL; the embedded default of one controller).

A file written by an earlier version is upgraded when it is opened (``_migrate``), after a
consistent copy is kept beside it (``_store_backup``); a file newer than this code is refused
with the way back.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from airlock.state import DatabaseError, SqliteDatabase, returning

from . import _migrate
from ._store import JobStore
from ._store_backup import backup_before_upgrade, backups
from ._store_rows import JobStoreError
from ._store_schema import SQLITE_SCHEMA

_log = logging.getLogger("airlock.controller")


def newer_store_message(path: Path, version: int) -> str:
    """Why a store newer than this code is refused, and the two ways out."""
    own = _migrate.SCHEMA_VERSION
    usable = [b for b in backups(path) if b.version <= own]
    text = (
        f"job store {path} has schema version {version}, newer than this airlock's ({own}): a newer "
        "airlock upgraded it. Run that airlock again (roll forward), or roll the store back"
    )
    if not usable:
        return text + f" from a copy made before the upgrade (none found beside {path.name})"
    newest = usable[0]
    when = newest.made_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"{text}: with the controller stopped, `airlock store restore --data-dir {path.parent} "
        f"{newest.path.name}` (the copy made before the upgrade, {when}; jobs recorded since are lost)"
    )


class _Schema:
    """Creates or upgrades a job store file when it opens (on the database's thread)."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def __call__(self, conn: sqlite3.Connection, fresh: bool) -> None:
        if fresh:  # pruned rows' pages can be given back (``reclaim``); set before any table
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("VACUUM")
        conn.executescript(SQLITE_SCHEMA)
        version = _migrate.schema_version(conn)
        if version == _migrate.SCHEMA_VERSION:
            return
        holds_jobs = conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchone() is not None
        if version < _migrate.SCHEMA_VERSION and not fresh and holds_jobs:
            # Before the write transaction: SQLite's backup reads through its own lock.
            kept = backup_before_upgrade(conn, self._path)
            _log.warning(
                "job store %s: schema version %d -> %d; the store before the upgrade is kept "
                "at %s (airlock store restore, to roll back)",
                self._path, version, _migrate.SCHEMA_VERSION, kept,
            )  # fmt: skip
        SqliteDatabase.in_transaction(conn, self._upgrade_now)

    def _upgrade_now(self, conn: sqlite3.Connection) -> None:
        version = _migrate.schema_version(conn)  # another process may have upgraded it
        if version > _migrate.SCHEMA_VERSION:
            raise JobStoreError(newer_store_message(self._path, version))
        if version < _migrate.SCHEMA_VERSION:
            _migrate.upgrade(conn)


class SqliteJobStore(JobStore):
    """The job store in one SQLite file (WAL, synchronous=NORMAL), on its own thread.

    Args:
        path: the database file (created with its directory, mode 0600).
        busy_timeout_s: how long a write waits for another connection's lock.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 10.0) -> None:
        self._sqlite = SqliteDatabase(path, _Schema(Path(path)), busy_timeout_s=busy_timeout_s)
        super().__init__(self._sqlite)

    @property
    def path(self) -> Path:
        """The database file."""
        return self._sqlite.path

    async def reclaim(self) -> int:
        """Give the pages of removed rows back to the file system (a file made before this
        version keeps them for reuse: switching it needs a full ``VACUUM``); how many."""
        try:
            return await self._sqlite.reclaim()
        except DatabaseError as e:
            raise JobStoreError(f"job store: {e}") from e

    async def _open(self) -> None:
        await self._run(returning(None))  # opens (creates or upgrades) the file

    async def aclose(self) -> None:
        """Close the file and stop its thread (idempotent)."""
        await super().aclose()
        await self._sqlite.aclose()
