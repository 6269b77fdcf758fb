"""A PostgreSQL database's airlock tables copied into one backup file (:mod:`._backup_file`).

One ``REPEATABLE READ READ ONLY`` transaction sees every table at the same instant (a job
and its events together) while controllers go on writing; rows stream through server-side
cursors in batches, never the whole database in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._backup_file import BackupWriter, quoted
from ._postgres import DatabaseError, first_line, redacted
from ._tables import TableSet

if TYPE_CHECKING:
    from psycopg import AsyncConnection

#: Rows fetched and written at a time.
BATCH = 500


async def backup_postgres(dsn: str, target: Path, components: Sequence[TableSet]) -> Path:
    """Copy ``components``' tables of the database ``dsn`` to a new file ``target`` (0600,
    never overwritten); ``target``.

    Raises:
        DatabaseError: the database cannot be read.
        OSError: ``target`` exists or cannot be written.
    """
    import psycopg
    from psycopg import IsolationLevel

    writer = await asyncio.to_thread(BackupWriter, target)
    try:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            await conn.set_isolation_level(IsolationLevel.REPEATABLE_READ)
            await conn.set_read_only(True)
            async with conn.transaction():
                await dump(conn, writer, components, redacted(dsn))
        return await asyncio.to_thread(writer.finish)
    except psycopg.Error as e:
        await asyncio.to_thread(writer.abandon)
        raise DatabaseError(f"PostgreSQL {redacted(dsn)}: {type(e).__name__}: {first_line(e)}") from e
    except BaseException:
        await asyncio.to_thread(writer.abandon)
        raise


async def schema_versions(conn: AsyncConnection[Any]) -> dict[str, int]:
    """Each component's version in ``airlock_schema`` (none: the table is missing)."""
    cursor = await conn.execute("SELECT to_regclass('airlock_schema') IS NOT NULL")
    found = await cursor.fetchone()
    if not found or not found[0]:
        return {}
    cursor = await conn.execute("SELECT component, version FROM airlock_schema")
    return {str(c): int(v) for c, v in await cursor.fetchall()}


async def dump(
    conn: AsyncConnection[Any], writer: BackupWriter, components: Sequence[TableSet], where: str
) -> None:
    """Copy the tables of ``components`` that exist, in ``conn``'s transaction, to ``writer``."""
    cursor = await conn.execute("SELECT extract(epoch FROM now())::float8")
    taken = await cursor.fetchone()
    taken_at = float(taken[0]) if taken else 0.0
    versions: Mapping[str, int] = await schema_versions(conn)
    for tables in components:
        if tables.component not in versions:
            continue  # never created in this database
        await asyncio.to_thread(writer.create, tables, versions[tables.component], where, taken_at)
        for table in tables.tables:
            await _copy_table(conn, writer, table)


async def _copy_table(conn: AsyncConnection[Any], writer: BackupWriter, table: str) -> None:
    exists = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (quoted(table),))).fetchone()
    if not exists or not exists[0]:
        return
    async with conn.cursor(name=f"airlock_backup_{table}") as rows:
        await rows.execute(f"SELECT * FROM {quoted(table)}")
        names = [column.name for column in rows.description or ()]
        await asyncio.to_thread(writer.columns, table, names)
        while batch := await rows.fetchmany(BATCH):
            await asyncio.to_thread(writer.write, table, names, batch)
