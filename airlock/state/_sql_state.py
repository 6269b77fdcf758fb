"""SqlStateStore: a ``layer0.StateStore`` in one table of a :class:`~._sql.Database`.

Each method is one operation (a generator of SQL statements), so the store is written once for
SQLite (``SqliteStore``) and PostgreSQL (``PostgresStateStore``). Keys compare by code point on
both: SQLite's BINARY collation compares UTF-8 bytes, and PostgreSQL's key column is declared
``COLLATE "C"`` (bytes too, in a UTF-8 database).
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from layer0 import Scope, SearchResult, StateError

from ._codec import check_key, check_prefix, decode_value, encode_value, scope_text
from ._guarded_state import Guard, GuardedState
from ._postgres import DatabaseError
from ._search import rank
from ._sql import Database, Op, execute, fetch_all, fetch_one

T = TypeVar("T")

# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]

#: The largest code point: a key's successor after it is no longer a prefix range's bound.
_MAX_CHAR = 0x10FFFF


def prefix_end(prefix: str) -> str | None:
    """The least string above every string that starts with ``prefix`` (code-point order);
    None when there is none (``prefix`` is empty or all U+10FFFF)."""
    stem = prefix.rstrip(chr(_MAX_CHAR))
    if not stem:
        return None
    last = ord(stem[-1]) + 1
    if 0xD800 <= last <= 0xDFFF:  # surrogates are no characters of a key: skip to U+E000
        last = 0xE000
    return stem[:-1] + chr(last)


def _read(scope: str, key: str) -> Op[Any | None]:
    row = yield from fetch_one("SELECT value FROM state WHERE scope = ? AND key = ?", scope, key)
    return None if row is None else decode_value(row[0])


def _keys(scope: str, prefix: str) -> Op[_Keys]:
    end = prefix_end(prefix)
    if end is None:
        rows = yield from fetch_all(
            "SELECT key FROM state WHERE scope = ? AND key >= ? ORDER BY key", scope, prefix
        )
    else:
        rows = yield from fetch_all(
            "SELECT key FROM state WHERE scope = ? AND key >= ? AND key < ? ORDER BY key", scope, prefix, end
        )
    return [str(row[0]) for row in rows if str(row[0]).startswith(prefix)]


def _search(scope: str, query: str, limit: int) -> Op[_Results]:
    rows = yield from fetch_all("SELECT key, value FROM state WHERE scope = ?", scope)
    return rank(((str(row[0]), str(row[1])) for row in rows), query, limit)


class SqlStateStore:
    """A ``layer0.StateStore`` in ``db``'s ``state`` table (scope, key, JSON value).

    Every write is its own committed transaction. Use as an async context manager (entering
    creates the table where a subclass does), or call :meth:`aclose`.

    Args:
        db: where the table lives (``SqliteStore`` and ``PostgresStateStore`` give one).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._closed = False

    @property
    def where(self) -> str:
        """The database, as messages name it (never a password)."""
        return self._db.where

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _open(self) -> None:
        """Create the table (a subclass does)."""

    async def aclose(self) -> None:
        """Refuse further calls (idempotent)."""
        self._closed = True

    async def _run(self, op: Op[T], *, writing: bool = False) -> T:
        if self._closed:
            op.close()
            raise StateError.other(f"state store {self.where} is closed")
        try:
            return await self._db.transact(op)
        except DatabaseError as e:
            # A file that cannot be opened is no failed write (as before the port).
            failed = writing and not isinstance(e.__cause__, OSError)
            where = f"state store: {e}"
            raise (StateError.write_failed(where) if failed else StateError.other(where)) from e

    async def read(self, scope: Scope, key: str) -> Any | None:
        """The value under ``key``, or None."""
        return await self._run(_read(scope_text(scope), check_key(key)))

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        """Create or overwrite ``key``. Raises ``StateError.serialization`` for non-JSON."""
        await self.run_write(self.write_op(scope, key, value))

    async def delete(self, scope: Scope, key: str) -> None:
        """Delete ``key``; a missing key is a no-op."""
        await self.run_write(self.delete_op(scope, key))

    # -- writes as operations, for a caller that runs them with its own statements -------------

    @property
    def database(self) -> Database:
        """Where the table lives (a write can share a transaction with another store's on it)."""
        return self._db

    def guarded(self, guard: Guard) -> GuardedState:
        """This store with ``guard()`` (an operation on :attr:`database` that raises to refuse)
        run before each write and delete, in its transaction."""
        return GuardedState(self, guard)

    def write_op(self, scope: Scope, key: str, value: Any) -> Op[None]:
        """:meth:`write` as an operation (its arguments checked now)."""
        s, k, text = scope_text(scope), check_key(key), encode_value(value)
        return execute(
            "INSERT INTO state (scope, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value",
            s,
            k,
            text,
        )

    def delete_op(self, scope: Scope, key: str) -> Op[None]:
        """:meth:`delete` as an operation (its arguments checked now)."""
        return execute("DELETE FROM state WHERE scope = ? AND key = ?", scope_text(scope), check_key(key))

    async def run_write(self, op: Op[None]) -> None:
        """Run a write operation in one transaction (its failure is ``StateError.write_failed``)."""
        await self._run(op, writing=True)

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """Keys starting with ``prefix`` (all keys for ``""``), in code-point order."""
        return await self._run(_keys(scope_text(scope), check_prefix(prefix)))

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """Keys whose JSON text contains the query's terms (case-insensitive), best first."""
        return await self._run(_search(scope_text(scope), query, limit))
