"""One conformance suite for the SQL state stores, unchanged against SQLite and PostgreSQL.

``SqliteStore`` (one file) and ``PostgresStateStore`` (a database several controllers share)
run the same operations; every test here runs on both through the ``engine`` fixture, and the
stores a test makes share one database (two of them are two replicas).
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from airlock.state import PostgresDatabase, PostgresStateStore, SqliteStore, SqlStateStore
from layer0 import Scope, SearchResult, StateError, StateReader, StateStore, read_only

S1 = Scope.session("s1")
S2 = Scope.session("s2")
ALL_SCOPES = [
    Scope.session("s1"),
    Scope.workflow("s1"),
    Scope.agent("s1", "s1"),
    Scope.global_(),
    Scope.custom("s1"),
    Scope.custom(""),
    Scope.custom("../.."),
    Scope.session("a/b"),
    Scope.custom("日本 ☃"),
]

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

        yield make


@pytest.fixture
async def store(make_store: Factory) -> SqlStateStore:
    return await make_store()


async def test_is_a_state_store_and_reader(store: SqlStateStore) -> None:
    assert isinstance(store, StateStore)
    assert isinstance(store, StateReader)


async def test_missing_key_reads_none(store: SqlStateStore) -> None:
    assert await store.read(S1, "nope") is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2**70,
        1.5,
        "",
        'héllo \u2603 \n"q"',
        "日本語 \U0001f600 \u00e9\u0301 \ufeff \U0010ffff",
        "nul \x00 inside a value, escaped in its JSON",
        "100% _like_ \\ 'quoted' ? %s",
        [],
        [1, "a", None],
        {},
        {"b": {"a": [1.25]}, "ключ": "значение"},
    ],
)
async def test_write_then_read_round_trips_json(store: SqlStateStore, value: Any) -> None:
    await store.write(S1, "k", value)
    assert await store.read(S1, "k") == value


async def test_overwrite_replaces_value(store: SqlStateStore) -> None:
    await store.write(S1, "k", {"v": 1})
    await store.write(S1, "k", {"v": 2})
    assert await store.read(S1, "k") == {"v": 2}
    assert await store.list(S1, "") == ["k"]


async def test_read_returns_a_copy(store: SqlStateStore) -> None:
    await store.write(S1, "k", {"items": [1]})
    got = await store.read(S1, "k")
    got["items"].append(2)
    assert await store.read(S1, "k") == {"items": [1]}


async def test_delete(store: SqlStateStore) -> None:
    await store.write(S1, "k", 1)
    await store.delete(S1, "k")
    assert await store.read(S1, "k") is None
    assert await store.list(S1, "") == []


async def test_delete_missing_is_a_noop(store: SqlStateStore) -> None:
    await store.delete(S1, "never-written")
    await store.delete(Scope.custom("never-used"), "x")
    assert await store.list(S1, "") == []


async def test_list_by_prefix_sorted(store: SqlStateStore) -> None:
    keys = ["notes/b", "notes/a", "note", "todo", "notes/sub/c", "Notes"]
    for k in keys:
        await store.write(S1, k, k)
    assert await store.list(S1, "notes/") == ["notes/a", "notes/b", "notes/sub/c"]
    assert await store.list(S1, "note") == ["note", "notes/a", "notes/b", "notes/sub/c"]
    assert await store.list(S1, "zzz") == []
    assert await store.list(S1, "") == sorted(keys)


async def test_empty_prefix_lists_all_and_unicode_sorts_by_code_point(store: SqlStateStore) -> None:
    keys = [
        "é",
        "z",
        "a",
        "日本",
        "Z",
        "a b",
        "a%2Fb",
        "a.json",
        "a.d",
        "B",
        "_",
        "-",
        "a_b",
        "ab",
        "\U0001f600",
    ]
    for k in keys:
        await store.write(S1, k, 1)
    assert await store.list(S1, "") == sorted(keys)  # Python sorts str by code point
    for k in keys:
        assert await store.read(S1, k) == 1


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("a%", ["a%", "a%b"]),
        ("a_", ["a_", "a_b"]),
        ("\ud7ff", ["\ud7ff", "\ud7ffx"]),
        ("\U0010ffff", ["\U0010ffff", "\U0010ffffa", "\U0010ffff\U0010ffff"]),
        ("日", ["日", "日本"]),
    ],
    ids=["percent", "underscore", "before-surrogates", "last-code-point", "cjk"],
)
async def test_a_prefix_lists_exactly_its_keys(
    store: SqlStateStore, prefix: str, expected: list[str]
) -> None:
    keys = ["a", "a%", "a%b", "a_", "a_b", "ab", "\ud7ff", "\ud7ffx", "\ue000", "日", "日本", "旦"]
    keys += ["\U0010ffff", "\U0010ffff\U0010ffff", "\U0010ffffa", "\U0010fffe"]
    for k in keys:
        await store.write(S1, k, 1)
    assert await store.list(S1, prefix) == expected


async def test_list_of_unused_scope_is_empty(store: SqlStateStore) -> None:
    assert await store.list(Scope.workflow("w-unused"), "") == []


async def test_scopes_are_isolated(store: SqlStateStore) -> None:
    for i, scope in enumerate(ALL_SCOPES):
        await store.write(scope, "k", i)
    for i, scope in enumerate(ALL_SCOPES):
        assert await store.read(scope, "k") == i
        assert await store.list(scope, "") == ["k"]
    await store.delete(ALL_SCOPES[0], "k")
    assert await store.read(ALL_SCOPES[0], "k") is None
    assert [await store.read(s, "k") for s in ALL_SCOPES[1:]] == list(range(1, len(ALL_SCOPES)))


async def test_64_concurrent_writes_all_land(store: SqlStateStore) -> None:
    await asyncio.gather(*(store.write(S1, f"k{i:02d}", {"i": i}) for i in range(64)))
    assert await store.list(S1, "k") == [f"k{i:02d}" for i in range(64)]
    values = await asyncio.gather(*(store.read(S1, f"k{i:02d}") for i in range(64)))
    assert values == [{"i": i} for i in range(64)]


async def test_concurrent_writes_to_one_key_leave_one_whole_value(store: SqlStateStore) -> None:
    await asyncio.gather(*(store.write(S1, "same", {"i": i, "pad": "x" * 1000}) for i in range(32)))
    value = await store.read(S1, "same")
    assert value["pad"] == "x" * 1000 and 0 <= value["i"] < 32


async def test_two_stores_on_one_database_see_each_others_writes(make_store: Factory) -> None:
    a, b = await make_store(), await make_store()
    await a.write(S1, "from-a", {"by": "a"})
    assert await b.read(S1, "from-a") == {"by": "a"}
    await b.write(S1, "from-a", {"by": "b"})
    assert await a.read(S1, "from-a") == {"by": "b"}
    await b.delete(S1, "from-a")
    assert await a.read(S1, "from-a") is None
    await a.write(S2, "needle", "a haystack")
    assert [r.key for r in await b.search(S2, "HAYSTACK", 5)] == ["needle"]


async def test_concurrent_writes_from_two_instances(make_store: Factory) -> None:
    a, b = await make_store(), await make_store()
    await asyncio.gather(
        *(a.write(S1, f"a{i}", i) for i in range(32)), *(b.write(S1, f"b{i}", i) for i in range(32))
    )
    assert len(await a.list(S1, "")) == 64
    assert len(await b.list(S1, "")) == 64


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        (1, 2),
        b"bytes",
        object(),
        math.nan,
        math.inf,
        {"ok": [1, {"bad": -math.inf}]},
        {1: "int key"},
        {"nested": {None: 1}},
    ],
    ids=["set", "tuple", "bytes", "object", "nan", "inf", "nested-inf", "int-key", "none-key"],
)
async def test_non_json_values_rejected(store: SqlStateStore, value: Any) -> None:
    with pytest.raises(StateError) as info:
        await store.write(S1, "k", value)
    assert info.value.kind == "serialization"
    assert await store.read(S1, "k") is None


@pytest.mark.parametrize("key", ["", "nul\x00byte", "\ud800"], ids=["empty", "nul", "lone-surrogate"])
async def test_invalid_keys_rejected_everywhere(store: SqlStateStore, key: str) -> None:
    ops = [store.write(S1, key, 1), store.read(S1, key), store.delete(S1, key)]
    for op in [*ops, store.list(S1, key)] if key else ops:  # "" is the prefix of every key
        with pytest.raises(StateError) as info:
            await op
        assert info.value.kind == "serialization"


async def test_search_finds_ranks_and_limits(store: SqlStateStore) -> None:
    await store.write(S1, "both", {"text": "The quick brown FOX jumps"})
    await store.write(S1, "fox-twice", "fox and another fox")
    await store.write(S1, "one", "a quick note")
    await store.write(S1, "none", "nothing relevant here")
    await store.write(S2, "other-scope", "quick fox")
    results = await store.search(S1, "quick fox", 10)
    assert all(isinstance(r, SearchResult) for r in results)
    assert [r.key for r in results] == ["both", "fox-twice", "one"]
    assert [r.score for r in results] == [1.0, 0.5, 0.5]
    assert results[0].snippet is not None and "quick" in results[0].snippet
    assert [r.key for r in await store.search(S1, "quick fox", 1)] == ["both"]
    assert await store.search(S1, "quick fox", 0) == []
    assert await store.search(S1, "   ", 5) == []
    assert await store.search(S1, "absent", 5) == []
    assert await store.search(Scope.global_(), "fox", 5) == []


async def test_search_is_case_insensitive_and_snippets_long_values(store: SqlStateStore) -> None:
    await store.write(S1, "long", "x" * 200 + " Needle " + "y" * 200)
    await store.write(S1, "unicode", "Überraschung: ÄÖÜ")
    (hit,) = await store.search(S1, "NEEDLE", 5)
    assert hit.key == "long" and hit.score == 1.0
    assert hit.snippet is not None
    assert "Needle" in hit.snippet and hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 120
    assert [r.key for r in await store.search(S1, "äöü", 5)] == ["unicode"]


async def test_read_only_view_cannot_write(store: SqlStateStore) -> None:
    await store.write(S1, "k", "v")
    view = read_only(store)
    assert isinstance(view, StateReader)
    assert not isinstance(view, StateStore)
    assert not hasattr(view, "write") and not hasattr(view, "delete")
    assert await view.read(S1, "k") == "v"
    assert await view.list(S1, "") == ["k"]
    assert [r.key for r in await view.search(S1, "v", 3)] == ["k"]


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
