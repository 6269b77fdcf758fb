"""State stores implementing ``layer0.StateStore`` (used by the runner and the controller).

- ``InMemoryStore``: a dict; tests and ephemeral runs.
- ``SqliteStore``: the embedded default that persists (one SQLite file, WAL mode), on
  ``SqliteThread``, the base of every airlock SQLite file (also the controller's job store).
- ``PostgresStateStore``: the same table in a PostgreSQL database several controllers share;
  both are ``SqlStateStore``, whose operations are written once.
- ``SqliteDatabase`` / ``PostgresDatabase``: where airlock's tables live (one SQLite file;
  a PostgreSQL database several controllers share), both running the same operations
  (generators of SQL statements, :mod:`._sql`): each store's logic is written once.
- ``backup_postgres`` / ``restore_postgres``: a PostgreSQL database's airlock tables (each
  component's ``TableSet``) copied to one SQLite file, and loaded back.
- ``GuardedState``: a SqlStateStore's writes behind a guard run in their transaction (the
  controller fences a job's writes to the replica holding it).
- ``FsStore``: scopes as directories, one JSON file per key, atomic writes.

All three hold JSON values only (anything else raises ``StateError.serialization``),
list keys sorted, isolate scopes fully and share one basic text search: a
case-insensitive term match over each value's JSON text, scored by the fraction of
query terms found.
"""

from ._backup_file import BackupReader
from ._fs import FsStore
from ._guarded_state import Guard, GuardedState
from ._memory import InMemoryStore
from ._pg_backup import backup_postgres
from ._pg_restore import restore_postgres
from ._postgres import DatabaseError, PgRow, PostgresDatabase, is_postgres_dsn, redacted
from ._sql import (
    Database,
    Lock,
    Op,
    Row,
    Statement,
    execute,
    execute_many,
    fetch_all,
    fetch_one,
    fetch_one_shared,
    lock,
    returning,
    run_sqlite,
)
from ._sql_state import SqlStateStore
from ._sqlite import SqliteDatabase, SqliteThread
from ._state_postgres import STATE_TABLES, PostgresStateStore
from ._state_sqlite import SqliteStore
from ._tables import TableSet

__all__ = [
    "STATE_TABLES",
    "BackupReader",
    "Database",
    "DatabaseError",
    "FsStore",
    "Guard",
    "GuardedState",
    "InMemoryStore",
    "Lock",
    "Op",
    "PgRow",
    "PostgresDatabase",
    "PostgresStateStore",
    "Row",
    "SqlStateStore",
    "SqliteDatabase",
    "SqliteStore",
    "SqliteThread",
    "Statement",
    "TableSet",
    "backup_postgres",
    "execute",
    "execute_many",
    "fetch_all",
    "fetch_one",
    "fetch_one_shared",
    "is_postgres_dsn",
    "lock",
    "redacted",
    "restore_postgres",
    "returning",
    "run_sqlite",
]
