"""One StateStore conformance suite, run against every store."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from airlock.state import FsStore, InMemoryStore, SqliteStore
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
]

Factory = Callable[[], Awaitable[StateStore]]


@pytest.fixture(params=["memory", "sqlite", "fs"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """A factory of stores of one kind; for sqlite/fs, every store shares one location."""
    opened: list[SqliteStore] = []

    async def make() -> StateStore:
        if request.param == "memory":
            return InMemoryStore()
        if request.param == "sqlite":
            store = SqliteStore(tmp_path / "state.db")
            opened.append(store)
            return store
        return FsStore(tmp_path / "fs")

    make.kind = request.param  # type: ignore[attr-defined]
    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
async def store(make_store: Factory) -> StateStore:
    return await make_store()


async def test_is_a_state_store_and_reader(store: StateStore) -> None:
    assert isinstance(store, StateStore)
    assert isinstance(store, StateReader)


async def test_missing_key_reads_none(store: StateStore) -> None:
    assert await store.read(S1, "nope") is None


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -7, 2**70, 1.5, "", 'héllo \u2603 \n"q"', [], [1, "a", None], {}, {"b": {"a": [1.25]}}],
)
async def test_write_then_read_round_trips_json(store: StateStore, value: Any) -> None:
    await store.write(S1, "k", value)
    assert await store.read(S1, "k") == value


async def test_overwrite_replaces_value(store: StateStore) -> None:
    await store.write(S1, "k", {"v": 1})
    await store.write(S1, "k", {"v": 2})
    assert await store.read(S1, "k") == {"v": 2}
    assert await store.list(S1, "") == ["k"]


async def test_read_returns_a_copy(store: StateStore) -> None:
    await store.write(S1, "k", {"items": [1]})
    got = await store.read(S1, "k")
    got["items"].append(2)
    assert await store.read(S1, "k") == {"items": [1]}


async def test_delete(store: StateStore) -> None:
    await store.write(S1, "k", 1)
    await store.delete(S1, "k")
    assert await store.read(S1, "k") is None
    assert await store.list(S1, "") == []


async def test_delete_missing_is_a_noop(store: StateStore) -> None:
    await store.delete(S1, "never-written")
    await store.delete(Scope.custom("never-used"), "x")
    assert await store.list(S1, "") == []


async def test_list_by_prefix_sorted(store: StateStore) -> None:
    keys = ["notes/b", "notes/a", "note", "todo", "notes/sub/c", "Notes"]
    for k in keys:
        await store.write(S1, k, k)
    assert await store.list(S1, "notes/") == ["notes/a", "notes/b", "notes/sub/c"]
    assert await store.list(S1, "note") == ["note", "notes/a", "notes/b", "notes/sub/c"]
    assert await store.list(S1, "zzz") == []
    assert await store.list(S1, "") == sorted(keys)


async def test_empty_prefix_lists_all_and_unicode_sorts_by_code_point(store: StateStore) -> None:
    keys = ["é", "z", "a", "日本", "Z", "a b", "a%2Fb", "a.json", "a.d"]
    for k in keys:
        await store.write(S1, k, 1)
    assert await store.list(S1, "") == sorted(keys)
    for k in keys:
        assert await store.read(S1, k) == 1


async def test_list_of_unused_scope_is_empty(store: StateStore) -> None:
    assert await store.list(Scope.workflow("w-unused"), "") == []


async def test_scopes_are_isolated(store: StateStore) -> None:
    for i, scope in enumerate(ALL_SCOPES):
        await store.write(scope, "k", i)
    for i, scope in enumerate(ALL_SCOPES):
        assert await store.read(scope, "k") == i
        assert await store.list(scope, "") == ["k"]
    await store.delete(ALL_SCOPES[0], "k")
    assert await store.read(ALL_SCOPES[0], "k") is None
    assert [await store.read(s, "k") for s in ALL_SCOPES[1:]] == list(range(1, len(ALL_SCOPES)))


async def test_64_concurrent_writes_all_land(store: StateStore) -> None:
    await asyncio.gather(*(store.write(S1, f"k{i:02d}", {"i": i}) for i in range(64)))
    assert await store.list(S1, "k") == [f"k{i:02d}" for i in range(64)]
    values = await asyncio.gather(*(store.read(S1, f"k{i:02d}") for i in range(64)))
    assert values == [{"i": i} for i in range(64)]


async def test_concurrent_writes_to_one_key_leave_one_whole_value(store: StateStore) -> None:
    await asyncio.gather(*(store.write(S1, "same", {"i": i, "pad": "x" * 1000}) for i in range(32)))
    value = await store.read(S1, "same")
    assert value["pad"] == "x" * 1000 and 0 <= value["i"] < 32


async def test_concurrent_writes_from_two_instances(make_store: Factory) -> None:
    a, b = await make_store(), await make_store()
    await asyncio.gather(
        *(a.write(S1, f"a{i}", i) for i in range(32)), *(b.write(S1, f"b{i}", i) for i in range(32))
    )
    if make_store.kind == "memory":  # type: ignore[attr-defined]
        assert len(await a.list(S1, "")) == 32
    else:
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
async def test_non_json_values_rejected(store: StateStore, value: Any) -> None:
    with pytest.raises(StateError) as info:
        await store.write(S1, "k", value)
    assert info.value.kind == "serialization"
    assert await store.read(S1, "k") is None


@pytest.mark.parametrize("key", ["", "nul\x00byte", "\ud800"], ids=["empty", "nul", "lone-surrogate"])
async def test_invalid_keys_rejected_everywhere(store: StateStore, key: str) -> None:
    for op in (store.write(S1, key, 1), store.read(S1, key), store.delete(S1, key)):
        with pytest.raises(StateError) as info:
            await op
        assert info.value.kind == "serialization"


async def test_search_finds_ranks_and_limits(store: StateStore) -> None:
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


async def test_search_is_case_insensitive_and_snippets_long_values(store: StateStore) -> None:
    await store.write(S1, "long", "x" * 200 + " Needle " + "y" * 200)
    (hit,) = await store.search(S1, "NEEDLE", 5)
    assert hit.key == "long" and hit.score == 1.0
    assert hit.snippet is not None
    assert "Needle" in hit.snippet and hit.snippet.startswith("…") and hit.snippet.endswith("…")
    assert len(hit.snippet) < 120


async def test_read_only_view_cannot_write(store: StateStore) -> None:
    await store.write(S1, "k", "v")
    view = read_only(store)
    assert isinstance(view, StateReader)
    assert not isinstance(view, StateStore)
    assert not hasattr(view, "write") and not hasattr(view, "delete")
    assert await view.read(S1, "k") == "v"
    assert await view.list(S1, "") == ["k"]
    assert [r.key for r in await view.search(S1, "v", 3)] == ["k"]


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


# -- persistence (sqlite, fs) ---------------------------------------------------------------


async def test_sqlite_persists_across_instances(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "db" / "state.db") as first:
        await first.write(S1, "k", {"persisted": True})
        await first.write(Scope.global_(), "g", 1)
    async with SqliteStore(tmp_path / "db" / "state.db") as second:
        assert await second.read(S1, "k") == {"persisted": True}
        assert await second.list(Scope.global_(), "") == ["g"]


async def test_sqlite_uses_wal(tmp_path: Path) -> None:
    import sqlite3

    async with SqliteStore(tmp_path / "s.db") as store:
        await store.write(S1, "k", 1)
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


async def test_sqlite_closed_store_raises(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    await store.aclose()
    await store.aclose()
    with pytest.raises(StateError):
        await store.read(S1, "k")


async def test_sqlite_survives_a_process_restart(tmp_path: Path) -> None:
    db = tmp_path / "restart.db"
    script = (
        "import asyncio, sys\n"
        "from airlock.state import SqliteStore\n"
        "from layer0 import Scope\n"
        "async def main():\n"
        "    async with SqliteStore(sys.argv[1]) as s:\n"
        "        await s.write(Scope.session('s1'), 'from-child', {'pid': 1})\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(
        os.environ.get("PYTHON", __import__("sys").executable), "-c", script, str(db)
    )
    assert await proc.wait() == 0
    async with SqliteStore(db) as store:
        assert await store.read(S1, "from-child") == {"pid": 1}


async def test_fs_persists_across_instances_and_layout(tmp_path: Path) -> None:
    await FsStore(tmp_path).write(S1, "notes/today", {"a": 1})
    assert await FsStore(tmp_path).read(S1, "notes/today") == {"a": 1}
    assert (tmp_path / "session" / "s1.d" / "notes.d" / "today.json").is_file()
    await FsStore(tmp_path).write(Scope.agent("wf", "ag"), "k", 2)
    assert (tmp_path / "agent" / "wf.d" / "ag.d" / "k.json").is_file()


@pytest.mark.parametrize(
    "key",
    [
        "../escape",
        "a/../../escape",
        "/etc/passwd",
        "\\windows",
        "a\\..\\b",
        "a//b",
        "a/",
        "./a",
        "a/./b",
        "..",
    ],
)
async def test_fs_rejects_keys_that_could_escape(tmp_path: Path, key: str) -> None:
    store = FsStore(tmp_path / "root")
    for op in (store.write(S1, key, 1), store.read(S1, key), store.delete(S1, key)):
        with pytest.raises(StateError) as info:
            await op
        assert info.value.kind == "serialization"
    assert not (tmp_path / "escape").exists()
    assert _names(tmp_path) == []


async def test_fs_scope_ids_cannot_escape(tmp_path: Path) -> None:
    store = FsStore(tmp_path / "root")
    for sid in ["..", "../../x", "/abs", ".", ""]:
        await store.write(Scope.custom(sid), "k", sid)
        assert await store.read(Scope.custom(sid), "k") == sid
    assert _names(tmp_path) == ["root"]
    files = _files(tmp_path / "root")
    assert len(files) == 5
    assert all(p.resolve().is_relative_to((tmp_path / "root" / "custom").resolve()) for p in files)


async def test_fs_write_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    store = FsStore(tmp_path)
    await asyncio.gather(*(store.write(S1, "k", {"i": i}) for i in range(16)))
    names = _names(tmp_path / "session" / "s1.d")
    assert names == ["k.json"]


async def test_fs_key_too_long_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="too long"):
        await FsStore(tmp_path).write(S1, "x" * 300, 1)


async def test_fs_ignores_foreign_files(tmp_path: Path) -> None:
    store = FsStore(tmp_path)
    await store.write(S1, "k", 1)
    (tmp_path / "session" / "s1.d" / "README.txt").write_text("not a key")
    (tmp_path / "session" / "s1.d" / ".tmp-123.tmp").write_text("{")
    assert await store.list(S1, "") == ["k"]


async def test_fs_corrupt_file_is_a_state_error(tmp_path: Path) -> None:
    store = FsStore(tmp_path)
    await store.write(S1, "k", 1)
    (tmp_path / "session" / "s1.d" / "k.json").write_text("{not json")
    with pytest.raises(StateError) as info:
        await store.read(S1, "k")
    assert info.value.kind == "serialization"
