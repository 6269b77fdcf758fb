"""The state store conformance suite on the SQL stores, unchanged against SQLite and
PostgreSQL, and what only they promise (persistence, closing, errors, collation).

``SqliteStore`` (one file) and ``PostgresStateStore`` (a database several controllers share)
run the same operations; every test here runs on both through the ``place`` fixture, and the
stores a test makes share one database (two of them are two replicas).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from airlock.state import PostgresDatabase, PostgresStateStore, SqliteStore, SqlStateStore
from layer0 import Scope, StateError
from tests.support.state_store_suite import *  # noqa: F403 - the conformance suite runs here
from tests.support.state_store_suite import S1

Factory = Callable[[], Awaitable[SqlStateStore]]


class Place:
    """Where a test's stores live: one SQLite file or one PostgreSQL database."""

    def __init__(self, engine: str, location: str) -> None:
        self.engine = engine
        self.location = location

    async def open(self, stack: AsyncExitStack) -> SqlStateStore:
        """A new store on this database, entered on ``stack``."""
        if self.engine == "sqlite":
            return await stack.enter_async_context(SqliteStore(self.location))
        db = await stack.enter_async_context(PostgresDatabase(self.location, min_size=1, max_size=4))
        return await stack.enter_async_context(PostgresStateStore(db))

    def sql(self, statement: str, *args: Any) -> None:
        """Run ``statement`` behind the stores' backs."""
        if self.engine == "sqlite":
            with sqlite3.connect(self.location) as conn:
                conn.execute(statement, args)
            return
        import psycopg

        with psycopg.connect(self.location, autocommit=True) as conn:
            conn.execute(statement.replace("?", "%s"), args)


@pytest.fixture(params=["sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "sqlite":
        return Place("sqlite", str(tmp_path / "state.db"))
    return Place("postgresql", request.getfixturevalue("postgres_dsn"))


@pytest.fixture
async def make_store(place: Place) -> AsyncIterator[Factory]:
    """A factory of stores that share the test's database (each with its own connections)."""
    async with AsyncExitStack() as stack:

        async def make() -> SqlStateStore:
            return await place.open(stack)

        make.shares = True  # type: ignore[attr-defined]
        yield make


@pytest.fixture
async def store(make_store: Factory) -> SqlStateStore:
    return await make_store()


async def test_persists_across_instances(place: Place) -> None:
    async with AsyncExitStack() as stack:
        first = await place.open(stack)
        await first.write(S1, "k", {"persisted": True})
        await first.write(Scope.global_(), "g", 1)
    async with AsyncExitStack() as stack:
        second = await place.open(stack)
        assert await second.read(S1, "k") == {"persisted": True}
        assert await second.list(Scope.global_(), "") == ["g"]


async def test_a_closed_store_raises(place: Place) -> None:
    async with AsyncExitStack() as stack:
        store = await place.open(stack)
    await store.aclose()  # again: idempotent
    for op in (store.read(S1, "k"), store.write(S1, "k", 1), store.list(S1, "")):
        with pytest.raises(StateError) as info:
            await op
        assert info.value.kind == "other" and "closed" in str(info.value)


async def test_a_failed_write_names_the_database(place: Place) -> None:
    async with AsyncExitStack() as stack:
        store = await place.open(stack)
        await store.write(S1, "k", 1)
        place.sql("DROP TABLE state")
        with pytest.raises(StateError) as info:
            await store.write(S1, "k", 2)
        assert info.value.kind == "write_failed"
        assert store.where in str(info.value)
        with pytest.raises(StateError) as info:
            await store.read(S1, "k")
        assert info.value.kind == "other" and store.where in str(info.value)


async def test_survives_a_process_restart(place: Place) -> None:
    script = (
        "import asyncio, sys\n"
        "from contextlib import AsyncExitStack\n"
        "from layer0 import Scope\n"
        "from tests.integration.store.test_state_store_conformance import Place\n"
        "async def main():\n"
        "    async with AsyncExitStack() as stack:\n"
        "        s = await Place(sys.argv[1], sys.argv[2]).open(stack)\n"
        "        await s.write(Scope.session('s1'), 'from-child', {'pid': 1})\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, place.engine, place.location)
    assert await proc.wait() == 0
    async with AsyncExitStack() as stack:
        store = await place.open(stack)
        assert await store.read(S1, "from-child") == {"pid": 1}


# -- PostgreSQL only -----------------------------------------------------------------------


def with_password(dsn: str) -> tuple[str, str]:
    """``dsn`` with a password (its own, or one the dev server's trust auth ignores), and it."""
    parts = urlsplit(dsn)
    if parts.password is not None:
        return dsn, parts.password
    secret = "pw-never-shown"
    netloc = f"{parts.username}:{secret}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), secret


async def test_postgres_errors_never_show_the_password(postgres_dsn: str) -> None:
    dsn, secret = with_password(postgres_dsn)
    async with PostgresDatabase(dsn, min_size=1, max_size=2) as db, PostgresStateStore(db) as store:
        await store.write(S1, "k", 1)
        Place("postgresql", postgres_dsn).sql("DROP TABLE state")
        with pytest.raises(StateError) as info:
            await store.write(S1, "k", 2)
    assert info.value.kind == "write_failed"
    assert f":{secret}@" not in str(info.value) and ":***@" in str(info.value)
    with pytest.raises(StateError) as info:
        await store.read(S1, "k")  # its database closed
    assert f":{secret}@" not in str(info.value)


async def test_postgres_a_newer_state_table_is_refused(postgres_dsn: str) -> None:
    async with PostgresDatabase(postgres_dsn, min_size=1, max_size=2) as db:
        async with PostgresStateStore(db):
            pass
        Place("postgresql", postgres_dsn).sql(
            "UPDATE airlock_schema SET version = 9 WHERE component = 'state'"
        )
        with pytest.raises(StateError) as info:
            async with PostgresStateStore(db):
                pass
    message = str(info.value)
    assert (
        "state table" in message
        and "schema version 9" in message
        and "newer than this airlock's (1)" in message
    )


async def test_postgres_keys_are_stored_in_the_c_collation(postgres_dsn: str) -> None:
    import psycopg

    async with PostgresDatabase(postgres_dsn, min_size=1, max_size=2) as db, PostgresStateStore(db):
        pass
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT collation_name FROM information_schema.columns "
            "WHERE table_name = 'state' AND column_name = 'key'"
        ).fetchone()
        version = conn.execute("SELECT version FROM airlock_schema WHERE component = 'state'").fetchone()
    assert row == ("C",) and version == (1,)
