"""PostgresDatabase: the store of several controller replicas (psycopg 3, an async pool).

It runs the same operations as SQLite (:mod:`._sql`), each in one transaction on a pooled
connection; ``?`` placeholders become ``%s`` and a :class:`~._sql.Lock` becomes a
transaction-level advisory lock. Each part of airlock that keeps tables here (jobs, state,
keys) migrates them with :meth:`PostgresDatabase.migrate`, versioned in ``airlock_schema``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

from airlock.errors import AirlockError

from ._sql import Lock, Op, Row, Statement, execute, fetch_all

if TYPE_CHECKING:
    from psycopg import AsyncConnection, AsyncCursor
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

_log = logging.getLogger("airlock.state")

#: How long opening the pool waits for its first connection.
CONNECT_TIMEOUT_S = 30.0

SCHEMA_TABLE = """
CREATE TABLE IF NOT EXISTS airlock_schema (
    component TEXT PRIMARY KEY,
    version INTEGER NOT NULL
)
"""


class DatabaseError(AirlockError):
    """A database cannot be reached, read or written (the message names it, never its password)."""


def is_postgres_dsn(text: str) -> bool:
    """Does ``text`` name a PostgreSQL database (``postgresql://`` or ``postgres://``)?"""
    return text.startswith(("postgresql://", "postgres://"))


def redacted(dsn: str) -> str:
    """``dsn`` without its password (safe for messages and logs)."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@functools.lru_cache(maxsize=1024)
def placeholders(sql: str) -> str:
    """``sql`` with psycopg's placeholders (``?`` → ``%s``; a literal ``%`` doubled). A
    statement without parameters is sent as written."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgRow:
    """A row by position or by column name (as ``sqlite3.Row``)."""

    __slots__ = ("_names", "_values")

    def __init__(self, values: Sequence[Any], names: Mapping[str, int]) -> None:
        self._values = values
        self._names = names

    def __getitem__(self, key: int | str) -> Any:
        return self._values[key if isinstance(key, int) else self._names[key]]

    def __len__(self) -> int:
        return len(self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def keys(self) -> list[str]:
        """The column names, in order."""
        return list(self._names)


def _row_factory(cursor: AsyncCursor[Any]) -> Callable[[Sequence[Any]], PgRow]:
    names = {column.name: i for i, column in enumerate(cursor.description or ())}
    return lambda values: PgRow(values, names)


class PostgresDatabase:
    """A pool of connections to one PostgreSQL database. Use as an async context manager.

    Args:
        dsn: ``postgresql://user:password@host:port/database?options`` (libpq's URI form).
        min_size: connections kept open.
        max_size: connections at most (a replica's concurrent transactions).
    """

    dialect = "postgresql"

    def __init__(self, dsn: str, *, min_size: int = 2, max_size: int = 10) -> None:
        self.dsn = dsn
        self._where = redacted(dsn)
        self._min_size = min_size
        self._max_size = max_size
        self._pool: AsyncConnectionPool[Any] | None = None

    @property
    def where(self) -> str:
        """The database as messages name it (no password)."""
        return self._where

    async def __aenter__(self) -> Self:
        from psycopg_pool import AsyncConnectionPool, PoolTimeout

        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self.dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            kwargs={"autocommit": True},
            name="airlock",
        )
        try:
            await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as e:
            await pool.close()
            raise DatabaseError(
                f"PostgreSQL {self.where}: no connection within {CONNECT_TIMEOUT_S:.0f} s ({e})"
            ) from None
        self._pool = pool
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection (idempotent)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def transact(self, op: Op[T]) -> T:
        """Run ``op`` in one transaction (committed when it returns, rolled back when it raises).

        Raises:
            DatabaseError: the database refused or could not be reached.
        """
        import psycopg

        if self._pool is None:
            op.close()
            raise DatabaseError(f"PostgreSQL {self.where} is closed")
        try:
            async with self._pool.connection() as conn, conn.transaction():
                return await drive(conn, op)
        except psycopg.Error as e:
            raise DatabaseError(f"PostgreSQL {self.where}: {type(e).__name__}: {first_line(e)}") from e

    async def listen(
        self, channels: Sequence[str], on: Callable[[str, str], None], *, retry_s: float = 1.0
    ) -> None:
        """Deliver each notification on ``channels`` as ``on(channel, payload)`` until cancelled.

        A lost connection is opened again (every ``retry_s``); after each (re)connection ``on``
        receives ``(channel, "")`` for every channel: anything may have happened meanwhile.
        """
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                    for channel in channels:
                        await conn.execute(f'LISTEN "{channel}"')
                    for channel in channels:
                        on(channel, "")
                    async for note in conn.notifies():
                        on(note.channel, note.payload)
            except psycopg.Error as e:
                _log.warning(
                    "PostgreSQL %s: listening failed (%s); again in %.0f s",
                    self.where,
                    first_line(e),
                    retry_s,
                )
            await asyncio.sleep(retry_s)

    async def migrate(
        self, component: str, migrations: Mapping[int, str], *, newer: Callable[[int], str]
    ) -> int:
        """Bring ``component``'s tables to the newest of ``migrations`` (version → DDL), in one
        transaction that no other replica's migration interleaves; the version found.

        Raises:
            DatabaseError: the tables are newer than ``migrations`` (the message is ``newer(version)``).
        """
        target = max(migrations)

        def op() -> Op[int]:
            yield Lock("airlock_schema")
            yield from execute(SCHEMA_TABLE)
            rows = yield from fetch_all("SELECT version FROM airlock_schema WHERE component = ?", component)
            found = int(rows[0][0]) if rows else 0
            if found > target:
                raise DatabaseError(newer(found))
            for version in sorted(v for v in migrations if v > found):
                yield from execute(migrations[version])
            if found < target:
                yield from execute(
                    "INSERT INTO airlock_schema (component, version) VALUES (?, ?) ON CONFLICT (component) "
                    "DO UPDATE SET version = excluded.version",
                    component,
                    target,
                )
                _log.info(
                    "PostgreSQL %s: %s tables at schema version %d (were %d)",
                    self.where,
                    component,
                    target,
                    found,
                )
            return found

        return await self.transact(op())


def _row_locks(step: Statement) -> str:
    if step.skip_locked:
        return " FOR UPDATE SKIP LOCKED"
    return " FOR SHARE" if step.for_share else ""


async def drive(conn: AsyncConnection[Any], op: Op[T]) -> T:
    cursor = conn.cursor(row_factory=_row_factory)
    try:
        step = next(op)
        while True:
            rows: list[Row] = []
            if isinstance(step, Lock):
                await cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (step.key,))
            elif step.many:
                await cursor.executemany(placeholders(step.sql), step.args)
            elif step.args:
                sql = placeholders(step.sql) + _row_locks(step)
                await cursor.execute(sql, step.args)
                rows = list(await cursor.fetchall()) if cursor.description is not None else []
            else:  # no parameters: sent as written (a migration may hold several statements)
                await cursor.execute(step.sql)
                rows = list(await cursor.fetchall()) if cursor.description is not None else []
            step = op.send(rows)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    finally:
        op.close()


def first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
