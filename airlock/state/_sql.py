"""Store operations written once for SQLite and PostgreSQL: transactions as generators.

An operation is a generator that yields the statements of one transaction and receives each
one's rows; it holds no connection and does no I/O. A driver runs it: SQLite's on its own
thread, synchronously, in one ``BEGIN IMMEDIATE`` transaction (:func:`run_sqlite`);
PostgreSQL's asynchronously on a pooled connection (``airlock.state.PostgresDatabase``).
So every store's logic (jobs, events, state, keys) is written once and is the same on both.

Statements use ``?`` placeholders (the PostgreSQL driver turns them into ``%s``) and the SQL
both engines share. :class:`Lock` serializes the transactions that name the same key:
PostgreSQL takes a transaction-level advisory lock; SQLite's write transaction already holds
the whole file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class Row(Protocol):
    """One result row: columns by position or by name (``sqlite3.Row`` is one)."""

    def __getitem__(self, key: int | str, /) -> Any: ...


@dataclass(frozen=True)
class Statement:
    """One SQL statement and its arguments (``many``: once per argument row). A ``skip_locked``
    query locks the rows it returns and skips those another transaction holds (PostgreSQL's
    ``FOR UPDATE SKIP LOCKED``); a ``for_share`` query keeps the rows it returns from being
    changed by another transaction until this one ends, waiting for one changing them now
    (``FOR SHARE``). SQLite's write transaction already excludes every other."""

    sql: str
    args: Sequence[Any] = ()
    many: bool = False
    skip_locked: bool = False
    for_share: bool = False


@dataclass(frozen=True)
class Lock:
    """Serialize with every other transaction that takes the same ``key`` until commit."""

    key: str


Step = Statement | Lock
#: A transaction: yields its steps, receives each statement's rows, returns its result.
Op = Generator[Step, list[Row], T]


class Database(Protocol):
    """Where a store's tables live: runs its operations, each in one transaction."""

    #: ``sqlite`` or ``postgresql``.
    dialect: str

    @property
    def where(self) -> str:
        """The database as messages name it (a path; a DSN without its password)."""
        ...

    async def transact(self, op: Op[T]) -> T:
        """Run ``op`` in one transaction (raises ``DatabaseError``)."""
        ...

    async def aclose(self) -> None:
        """Let the database go (idempotent)."""
        ...


def fetch_all(sql: str, *args: Any) -> Op[list[Row]]:
    """The statement's rows."""
    return (yield Statement(sql, args))


def fetch_one(sql: str, *args: Any) -> Op[Row | None]:
    """The statement's first row (None: no row)."""
    rows = yield Statement(sql, args)
    return rows[0] if rows else None


def fetch_one_shared(sql: str, *args: Any) -> Op[Row | None]:
    """The statement's first row (None: no row), unchanged by others until the transaction
    ends (see :class:`Statement`'s ``for_share``)."""
    rows = yield Statement(sql, args, for_share=True)
    return rows[0] if rows else None


def execute(sql: str, *args: Any) -> Op[None]:
    """Run the statement."""
    yield Statement(sql, args)


def execute_many(sql: str, rows: Iterable[Sequence[Any]]) -> Op[None]:
    """Run the statement once per argument row."""
    batch = list(rows)
    if batch:
        yield Statement(sql, batch, many=True)


def lock(key: str) -> Op[None]:
    """Hold ``key`` until the transaction ends (see :class:`Lock`)."""
    yield Lock(key)


def returning(value: T) -> Op[T]:
    """An operation that runs no statement and returns ``value``."""
    return value
    yield  # pragma: no cover - makes this a generator


def run_sqlite(conn: sqlite3.Connection, op: Op[T]) -> T:
    """Drive ``op`` on ``conn`` (the caller holds the transaction)."""
    try:
        step = next(op)
        while True:
            rows: list[Row] = []
            if isinstance(step, Statement):
                if step.many:
                    conn.executemany(step.sql, step.args)
                else:
                    cursor = conn.execute(step.sql, step.args)
                    rows = cursor.fetchall() if cursor.description is not None else []
            step = op.send(rows)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
