"""SqliteThread and SqliteDatabase: one SQLite file on its own thread (stdlib sqlite3, WAL mode)."""

from __future__ import annotations

import asyncio
import inspect
import os
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Self, TypeVar

from ._postgres import DatabaseError
from ._sql import Op, run_sqlite

T = TypeVar("T")


class SqliteThread(ABC):
    """One SQLite connection owned by one dedicated thread, as an async context manager.

    The base of airlock's SQLite files (this store, the controller's job store): the
    event loop never blocks on the disk, and a file's operations are serialized. A
    subclass opens the connection in ``_connect`` (called on the thread).
    """

    _thread_name = "airlock-sqlite"

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 10.0) -> None:
        self._path = Path(path)
        self._busy_timeout_s = busy_timeout_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._thread_name)
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._connect)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close_conn)
        self._executor.shutdown(wait=False)

    def _close_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @abstractmethod
    def _connect(self) -> sqlite3.Connection:
        """Open (once) and return the connection; runs on the thread."""

    def _open_once(self, prepare: Callable[[sqlite3.Connection, bool], None]) -> sqlite3.Connection:
        """The connection, opened at the first call (on the thread): the file created private
        (:meth:`_create_private`), rows by name, WAL, ``synchronous=NORMAL``, then
        ``prepare(conn, fresh)`` (its schema; ``fresh``: the file was created now). A failure
        closes it again, so the next call tries afresh."""
        if self._conn is None:
            fresh = self._create_private()
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout_s, isolation_level=None)
            try:
                conn.row_factory = sqlite3.Row
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                prepare(conn, fresh)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    @staticmethod
    def in_transaction(conn: sqlite3.Connection, op: Callable[[sqlite3.Connection], T]) -> T:
        """``op(conn)`` in one write transaction (``BEGIN IMMEDIATE``): committed when it
        returns, rolled back when it raises."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = op(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def _on_thread(self, work: Callable[[], T]) -> T:
        """``work()`` on the store's thread, retried while SQLite reports a transient lock."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: self._retrying(work))

    def _create_private(self) -> bool:
        """Create the file for its owner only (0600; a new directory 0700) before SQLite opens
        it: SQLite gives the ``-wal``, ``-shm`` and journal files it makes the main file's mode.
        An existing file keeps its mode. Whether the file was created now."""
        if str(self._path) == ":memory:":
            return False
        self._path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.close(os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            return False
        return True

    def _retrying(self, op: Callable[[], T]) -> T:
        """``op()`` (on the thread), retried while SQLite reports a transient lock.

        SQLite answers "database is locked" at once, without its busy handler, in a few
        cases (two connections switching to WAL or creating the schema together, WAL
        recovery): retry those with backoff within the busy timeout.
        """
        deadline = time.monotonic() + self._busy_timeout_s
        delay = 0.005
        while True:
            try:
                return op()
            except sqlite3.OperationalError as e:
                transient = "locked" in str(e) or "busy" in str(e)
                if not transient or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)


class SqliteDatabase(SqliteThread):
    """One SQLite file on its own thread, running :mod:`._sql` operations, each in one write
    transaction (``BEGIN IMMEDIATE``).

    Args:
        path: the database file (created private with its directory).
        prepare: ``prepare(conn, fresh)`` creates or upgrades its tables when it opens.
        busy_timeout_s: how long a write waits for another connection's lock.
    """

    dialect = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        prepare: Callable[[sqlite3.Connection, bool], None],
        *,
        busy_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(path, busy_timeout_s=busy_timeout_s)
        self._prepare = prepare

    @property
    def where(self) -> str:
        """The database as messages name it."""
        return str(self._path)

    def _connect(self) -> sqlite3.Connection:
        return self._open_once(self._prepare)

    async def reclaim(self) -> int:
        """Give the file's free pages back to the file system (``PRAGMA incremental_vacuum``, a
        no-op unless the file was made with ``auto_vacuum = INCREMENTAL``); how many it gave.

        Raises:
            DatabaseError: the file cannot be opened or written.
        """

        def work() -> int:
            conn = self._connect()
            free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
            conn.executescript("PRAGMA incremental_vacuum;")  # a script steps it to the end
            return free - int(conn.execute("PRAGMA freelist_count").fetchone()[0])

        if self._closed:
            raise DatabaseError(f"SQLite {self._path} is closed")
        try:
            return await self._on_thread(work)
        except (sqlite3.Error, OSError) as e:
            raise DatabaseError(f"SQLite {self._path}: {type(e).__name__}: {e}") from e

    async def transact(self, op: Op[T]) -> T:
        """Run ``op`` in one write transaction on the thread.

        Raises:
            DatabaseError: the file cannot be opened, read or written.
        """
        if self._closed:
            op.close()
            raise DatabaseError(f"SQLite {self._path} is closed")

        def work() -> T:
            if inspect.getgeneratorstate(op) != inspect.GEN_CREATED:
                raise DatabaseError(f"SQLite {self._path}: a transaction was interrupted by a lock")
            return self.in_transaction(self._connect(), lambda conn: run_sqlite(conn, op))

        try:
            return await self._on_thread(work)
        except (sqlite3.Error, OSError) as e:
            raise DatabaseError(f"SQLite {self._path}: {type(e).__name__}: {e}") from e
        finally:
            op.close()
