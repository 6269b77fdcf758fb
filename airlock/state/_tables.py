"""TableSet: one component's tables (jobs, state, keys), as a backup copies and restores them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TableSet:
    """A component's tables in both engines: its PostgreSQL migrations (version → DDL, as
    ``PostgresDatabase.migrate`` applies them), its SQLite DDL at the newest version (the same
    columns: a backup of either engine is one SQLite file), and what drops it in PostgreSQL.

    Args:
        component: its name in ``airlock_schema``.
        tables: its tables, in the order a backup copies them.
        migrations: PostgreSQL version → DDL.
        sqlite_schema: SQLite DDL (``CREATE … IF NOT EXISTS``) of every table.
        drop_extra: PostgreSQL DDL dropping what the migrations create besides the tables
            (functions; ``DROP … IF EXISTS``).
        transient: tables whose rows are no records (replicas' heartbeats): they do not make
            a database non-empty.
    """

    component: str
    tables: tuple[str, ...]
    migrations: Mapping[int, str]
    sqlite_schema: str
    drop_extra: str = ""
    transient: tuple[str, ...] = ()

    @property
    def version(self) -> int:
        """The newest version this code knows."""
        return max(self.migrations)

    def drop(self) -> str:
        """PostgreSQL DDL dropping every table (and ``drop_extra``), present or not."""
        tables = "".join(f'DROP TABLE IF EXISTS "{t}" CASCADE;\n' for t in self.tables)
        return tables + self.drop_extra
