"""The state store conformance suite on the in-memory and file stores (SQLite and PostgreSQL
run it in tests/integration/store), and what only the file store promises."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.state import FsStore, InMemoryStore, SqliteStore
from layer0 import Scope, StateError, StateStore
from tests.support.state_store_suite import *  # noqa: F403 - the conformance suite runs here
from tests.support.state_store_suite import S1, Factory


@pytest.fixture(params=["memory", "fs"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Factory]:
    """A factory of stores of one kind; file stores share one directory."""

    async def make() -> StateStore:
        return InMemoryStore() if request.param == "memory" else FsStore(tmp_path / "fs")

    make.shares = request.param != "memory"  # type: ignore[attr-defined]
    yield make


@pytest.fixture
async def store(make_store: Factory) -> StateStore:
    return await make_store()


# -- what only one store promises ------------------------------------------------------------


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _files(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


async def test_sqlite_uses_wal(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "s.db") as store:
        await store.write(S1, "k", 1)
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


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
