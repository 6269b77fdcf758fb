"""PostgresStateStore: the state store in a PostgreSQL database that several controllers share."""

from __future__ import annotations

from layer0 import StateError

from ._postgres import DatabaseError, PostgresDatabase
from ._sql_state import SqlStateStore
from ._state_sqlite import SQLITE_SCHEMA
from ._tables import TableSet

#: The state table's name in ``airlock_schema``.
COMPONENT = "state"
#: Version → DDL. Keys sort by code point (``COLLATE "C"``), as SQLite's BINARY collation does.
MIGRATIONS = {
    1: """
CREATE TABLE IF NOT EXISTS state (
    scope TEXT NOT NULL,
    key   TEXT COLLATE "C" NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, key)
)
""",
}
#: The state table, as a backup copies it.
STATE_TABLES = TableSet(COMPONENT, ("state",), MIGRATIONS, SQLITE_SCHEMA)


def newer_table_message(where: str, version: int) -> str:
    """Why a state table newer than this code is refused."""
    return (
        f"the state table in PostgreSQL {where} has schema version {version}, newer than this "
        f"airlock's ({max(MIGRATIONS)}): a newer airlock upgraded it. Run that airlock again (roll forward)"
    )


class PostgresStateStore(SqlStateStore):
    """The state store in ``db`` (its table created or upgraded on entry; ``db`` stays open).

    Args:
        db: the database, opened by the caller (which closes it).
    """

    def __init__(self, db: PostgresDatabase) -> None:
        super().__init__(db)
        self._pg = db

    async def _open(self) -> None:
        try:
            await self._pg.migrate(
                COMPONENT, MIGRATIONS, newer=lambda found: newer_table_message(self._pg.where, found)
            )
        except DatabaseError as e:
            raise StateError.other(f"state store: {e}") from e
