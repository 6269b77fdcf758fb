"""PostgresJobStore: the job store in a PostgreSQL database that several controllers share."""

from __future__ import annotations

from airlock.state import DatabaseError, PostgresDatabase, TableSet

from . import _migrate
from ._store import JobStore
from ._store_rows import JobStoreError
from ._store_schema import POSTGRES_DROP, POSTGRES_MIGRATIONS, SQLITE_SCHEMA, TABLES

#: The job tables' name in ``airlock_schema``.
COMPONENT = "jobs"
#: The job tables, as a backup copies them (replicas' heartbeats and relayed controls are no records).
JOB_TABLES = TableSet(
    COMPONENT,
    TABLES,
    POSTGRES_MIGRATIONS,
    SQLITE_SCHEMA,
    drop_extra=POSTGRES_DROP,
    transient=("replicas", "controls"),
)


def newer_tables_message(where: str, version: int) -> str:
    """Why job tables newer than this code are refused, and the two ways out."""
    return (
        f"the job tables in PostgreSQL {where} have schema version {version}, newer than this airlock's "
        f"({_migrate.SCHEMA_VERSION}): a newer airlock upgraded them. Run that airlock again (roll forward), "
        "or roll the store back: with every controller stopped, "
        "`airlock store restore --store DSN --replace FILE` with a copy made by "
        "`airlock store backup --store DSN FILE` before the upgrade (jobs recorded since are lost; "
        "the replaced tables are copied beside FILE first)"
    )


class PostgresJobStore(JobStore):
    """The job store in ``db`` (its tables created or upgraded on entry; ``db`` stays open).

    Args:
        db: the database, opened by the caller (which closes it).
    """

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(db)
        self._pg = db

    async def _open(self) -> None:
        try:
            await self._pg.migrate(
                COMPONENT,
                POSTGRES_MIGRATIONS,
                newer=lambda found: newer_tables_message(self._pg.where, found),
            )
        except DatabaseError as e:
            raise JobStoreError(str(e)) from e
