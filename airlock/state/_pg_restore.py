"""A backup file (:mod:`._backup_file`) loaded into a PostgreSQL database, in one transaction.

The transaction takes the migrations' lock and locks the tables, refuses a backup newer than
this code and (unless told to replace them) a database that holds records; the replaced rows
are first copied to a new backup file, so a wrong choice loses nothing. Then each component's
tables are dropped, created afresh at this code's version, and loaded (identity columns as
recorded, their sequences moved past them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._backup_file import BackupReader, BackupWriter, quoted
from ._pg_backup import BATCH, dump
from ._postgres import SCHEMA_TABLE, DatabaseError, drive, first_line, redacted
from ._sql import Op
from ._tables import TableSet

if TYPE_CHECKING:
    from psycopg import AsyncConnection


def check_versions(backup: BackupReader, components: Sequence[TableSet]) -> None:
    """Refuse a backup holding tables newer than this code (or that it does not know).

    Raises:
        ValueError: naming each.
    """
    known = {t.component: t.version for t in components}
    newer = [
        f"{name} v{version} (this airlock: {'none' if name not in known else f'v{known[name]}'})"
        for name, version in sorted(backup.versions.items())
        if version > known.get(name, -1)
    ]
    if newer:
        raise ValueError(
            f"{backup.path} was taken by a newer airlock: {', '.join(newer)}; restore it with that airlock"
        )


async def restore_postgres(
    dsn: str,
    source: Path,
    components: Sequence[TableSet],
    *,
    replace: Path | None,
    guard: Callable[[], Op[None]] | None = None,
) -> Path | None:
    """Load the backup ``source`` into ``dsn``'s database (``components``' tables). ``guard``
    runs first in the transaction (it raises to refuse). A database holding records is refused
    unless ``replace`` names a new file to copy them to first; that file (None: nothing replaced).

    Raises:
        ValueError: ``source`` is no backup, or is newer than ``components``.
        DatabaseError: the database holds records and ``replace`` is None, or refused.
    """
    import psycopg

    backup = await asyncio.to_thread(BackupReader, source)
    try:
        check_versions(backup, components)
        async with await psycopg.AsyncConnection.connect(dsn) as conn, conn.transaction():
            return await _restore(conn, backup, components, replace, guard, redacted(dsn))
    except psycopg.Error as e:
        raise DatabaseError(f"PostgreSQL {redacted(dsn)}: {type(e).__name__}: {first_line(e)}") from e
    finally:
        await asyncio.to_thread(backup.close)


async def _restore(
    conn: AsyncConnection[Any],
    backup: BackupReader,
    components: Sequence[TableSet],
    replace: Path | None,
    guard: Callable[[], Op[None]] | None,
    where: str,
) -> Path | None:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('airlock_schema', 0))")
    if guard is not None:
        await drive(conn, guard())
    present = await _lock_tables(conn, components)
    held = await _holding_records(conn, components, present)
    kept = None
    if held:
        if replace is None:
            raise DatabaseError(
                f"PostgreSQL {where} holds records ({', '.join(held)}): restore into an empty "
                "database, or replace them (they are copied to a backup file first)"
            )
        kept = await _copy_aside(conn, replace, components, where)
    await _recreate(conn, components)
    for tables in components:
        if tables.component in backup.versions:
            for table in tables.tables:
                await _load(conn, backup, table)
    return kept


async def _lock_tables(conn: AsyncConnection[Any], components: Sequence[TableSet]) -> list[str]:
    """Lock the tables that exist (no writer gets in until commit); their names."""
    present = []
    for table in (t for tables in components for t in tables.tables):
        found = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (quoted(table),))).fetchone()
        if found and found[0]:
            present.append(table)
    if present:
        await conn.execute(f"LOCK TABLE {', '.join(quoted(t) for t in present)} IN ACCESS EXCLUSIVE MODE")
    return present


async def _holding_records(
    conn: AsyncConnection[Any], components: Sequence[TableSet], present: Sequence[str]
) -> list[str]:
    transient = {t for tables in components for t in tables.transient}
    held = []
    for table in present:
        if table not in transient:
            cursor = await conn.execute(f"SELECT EXISTS (SELECT 1 FROM {quoted(table)})")
            found = await cursor.fetchone()
            if found and found[0]:
                held.append(table)
    return held


async def _copy_aside(
    conn: AsyncConnection[Any], target: Path, components: Sequence[TableSet], where: str
) -> Path:
    writer = await asyncio.to_thread(BackupWriter, target)
    try:
        await dump(conn, writer, components, where)
        return await asyncio.to_thread(writer.finish)
    except BaseException:
        await asyncio.to_thread(writer.abandon)
        raise


async def _recreate(conn: AsyncConnection[Any], components: Sequence[TableSet]) -> None:
    """Drop every component's tables and create them at this code's version."""
    await conn.execute(SCHEMA_TABLE)
    for tables in components:
        await conn.execute(tables.drop())
        for version in sorted(tables.migrations):
            await conn.execute(tables.migrations[version])
        await conn.execute(
            "INSERT INTO airlock_schema (component, version) VALUES (%s, %s) ON CONFLICT (component) "
            "DO UPDATE SET version = excluded.version",
            (tables.component, tables.version),
        )


async def _load(conn: AsyncConnection[Any], backup: BackupReader, table: str) -> None:
    """Insert the backup's rows of ``table`` (identity values as recorded), then move the
    identity sequences past them."""
    described = await conn.execute(f"SELECT * FROM {quoted(table)} LIMIT 0")
    stored = await asyncio.to_thread(backup.columns, table)
    names = [c.name for c in described.description or () if c.name in stored]
    if not names:
        return
    sql = (
        f"INSERT INTO {quoted(table)} ({', '.join(quoted(n) for n in names)}) OVERRIDING SYSTEM VALUE "
        f"VALUES ({', '.join('%s' for _ in names)})"
    )
    batches = backup.batches(table, names, BATCH)
    async with conn.cursor() as cursor:
        while batch := await asyncio.to_thread(next, batches, None):
            await cursor.executemany(sql, batch)
    identities = await conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = %s AND is_identity = 'YES'",
        (table,),
    )
    for (column,) in await identities.fetchall():
        await conn.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, %s), coalesce(max({quoted(column)}), 0) + 1, false) "
            f"FROM {quoted(table)}",
            (quoted(table), column),
        )
