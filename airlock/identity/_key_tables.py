"""Where the API keys live: the ``api_keys`` table in one SQLite file or a PostgreSQL database.

Both open the same table (the key store's operations are written once, ``airlock.state``);
each refuses tables newer than this code. In PostgreSQL ``rowid`` is an identity column, so
listing in insertion order reads the same on both.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Protocol

from airlock.state import Database, DatabaseError, PostgresDatabase, SqliteDatabase, TableSet, returning

from ._errors import KeyStoreError

#: The schema's version (SQLite: ``PRAGMA user_version``; PostgreSQL: ``airlock_schema``).
SCHEMA_VERSION = 1
#: The key tables' name in ``airlock_schema``.
COMPONENT = "keys"

SQLITE_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS api_keys (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        tenant TEXT NOT NULL,
        roles TEXT NOT NULL,
        salt BLOB NOT NULL,
        hash BLOB NOT NULL,
        created_at REAL NOT NULL,
        created_by TEXT NOT NULL,
        expires_at REAL,
        revoked_at REAL,
        revoked_by TEXT,
        last_used REAL
    )""",
    "CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant, created_at)",
)

#: Version → DDL (times are epoch seconds in double precision, as SQLite's REAL).
POSTGRES_MIGRATIONS = {
    1: """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    tenant TEXT NOT NULL,
    roles TEXT NOT NULL,
    salt BYTEA NOT NULL,
    hash BYTEA NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL,
    expires_at DOUBLE PRECISION,
    revoked_at DOUBLE PRECISION,
    revoked_by TEXT,
    last_used DOUBLE PRECISION,
    rowid BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys (tenant, created_at);
""",
}

#: The key table, as a backup copies it.
KEY_TABLES = TableSet(COMPONENT, ("api_keys",), POSTGRES_MIGRATIONS, ";\n".join(SQLITE_SCHEMA))


def newer_message(where: str, version: int) -> str:
    """Why key tables newer than this code are refused."""
    return (
        f"key store {where} has schema version {version}; this airlock reads "
        f"up to {SCHEMA_VERSION} (written by a newer airlock)"
    )


class KeyTables(Protocol):
    """The database of a key store, and how its tables open and close."""

    @property
    def db(self) -> Database:
        """Where the tables live."""
        ...

    async def open(self) -> None:
        """Create the tables, or refuse newer ones (raises ``KeyStoreError``)."""
        ...

    async def close(self) -> None:
        """Let the database go where the store owns it."""
        ...


class SqliteKeyTables:
    """The key store's own SQLite file (0600; ``user_version`` = schema version)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self.db = SqliteDatabase(path, self._prepare)

    def _prepare(self, conn: sqlite3.Connection, fresh: bool) -> None:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise KeyStoreError(newer_message(str(self._path), version))
        if version < SCHEMA_VERSION:  # a new file (an upgrade adds its steps here)
            SqliteDatabase.in_transaction(conn, _create_schema)

    async def open(self) -> None:
        """Open the file (creating its table)."""
        try:
            await self.db.transact(returning(None))
        except DatabaseError as e:
            raise KeyStoreError(f"key store {self._path}: {e}") from e

    async def close(self) -> None:
        """Close the file and stop its thread."""
        await self.db.aclose()


def _create_schema(conn: sqlite3.Connection) -> None:
    for statement in SQLITE_SCHEMA:
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


class PostgresKeyTables:
    """The ``api_keys`` table in a PostgreSQL database the caller opened (and closes)."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    async def open(self) -> None:
        """Create or upgrade the table (component ``keys`` in ``airlock_schema``)."""
        db = self.db
        try:
            await db.migrate(
                COMPONENT, POSTGRES_MIGRATIONS, newer=lambda found: newer_message(db.where, found)
            )
        except DatabaseError as e:
            raise KeyStoreError(str(e)) from e

    async def close(self) -> None:
        """Nothing: the database is the caller's."""
