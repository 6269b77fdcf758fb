"""Where the controller keeps its records: SQLite files in its data directory (one controller),
or one PostgreSQL database that several controller replicas share."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from airlock.errors import ConfigError
from airlock.state import PostgresDatabase, PostgresStateStore, SqliteStore, is_postgres_dsn, redacted
from layer0 import StateStore

from ._store import JobStore
from ._store_backup import JOB_STORE
from ._store_postgres import PostgresJobStore
from ._store_sqlite import SqliteJobStore

#: The state store's file in a data dir (memory, session histories, turn records).
STATE_STORE = "state.db"


@dataclass(frozen=True)
class Stores:
    """The job store and the state store, and the PostgreSQL database under both (None: SQLite)."""

    jobs: JobStore
    state: StateStore
    db: PostgresDatabase | None = None

    @property
    def where(self) -> str:
        """Where the records are, as messages name it (never a password)."""
        return self.db.where if self.db is not None else str(Path(self.jobs.where).parent)


async def open_stores(stack: contextlib.AsyncExitStack, data_dir: Path, dsn: str | None) -> Stores:
    """The stores (opened on ``stack``): in ``data_dir``'s SQLite files, or in the PostgreSQL
    database ``dsn`` (``postgresql://…``; its tables created or upgraded).

    Raises:
        ConfigError: ``dsn`` is not a PostgreSQL URI.
    """
    if dsn is None:
        return Stores(
            await stack.enter_async_context(SqliteJobStore(data_dir / JOB_STORE)),
            await stack.enter_async_context(SqliteStore(data_dir / STATE_STORE)),
        )
    if not is_postgres_dsn(dsn):
        raise ConfigError(
            f"store {redacted(dsn)!r} is not a PostgreSQL URI (postgresql://user:password@host:port/db); "
            "without one, the controller keeps SQLite files in its data directory"
        )
    db = await stack.enter_async_context(PostgresDatabase(dsn))
    jobs = await stack.enter_async_context(PostgresJobStore(db))
    state = await stack.enter_async_context(PostgresStateStore(db))
    return Stores(jobs, state, db)
