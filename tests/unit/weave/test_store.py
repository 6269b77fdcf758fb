"""WeaveStore over the airlock stores: records round-trip in storage order and still verify."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.state import InMemoryStore, SqliteStore
from airlock.weave import Weave, WeaveError, WeaveStore, verify
from layer0 import Scope, StateStore

from .helpers import draft

KEY = b"store-test-key"


def job_tree() -> Weave:
    w = Weave(key=KEY)
    w.record(draft("root", content={"text": "plan", "ünïcode": ["é", 1.25, None]}))
    w.record(draft("root", content={"tool": "delegate"}))
    w.record(draft("root.1", "root:2"))
    w.record(draft("root.2", "root:2"))
    w.record(draft("root.1"))
    w.record(draft("root", *w.knot(["agent-root.1", "agent-root.2"])))
    return w


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StateStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with SqliteStore(tmp_path / "weave.db") as sqlite:
            yield sqlite


async def save(weaves: WeaveStore, root: str, w: Weave) -> None:
    for position, record in enumerate(w.records):
        await weaves.append(root, record, position)


async def test_records_round_trip_and_verify(store: StateStore) -> None:
    w, weaves = job_tree(), WeaveStore(store)
    await save(weaves, "root", w)
    loaded = await weaves.load("root")
    assert loaded == w.records
    assert await weaves.count("root") == 6
    assert verify(loaded, KEY).ok
    reloaded = Weave(loaded, key=KEY)
    assert reloaded.braid() == w.braid()
    assert await weaves.load("other") == [] and await weaves.count("other") == 0


async def test_the_layout_is_one_key_per_position_in_a_custom_scope(store: StateStore) -> None:
    w, weaves = job_tree(), WeaveStore(store)
    await save(weaves, "root", w)
    scope = Scope.custom("weave:root")
    assert WeaveStore.scope("root") == scope
    assert await store.list(scope, "") == [f"{i:08d}" for i in range(6)]
    assert await store.read(scope, "00000002") == w.records[2].model_dump(mode="json")


async def test_sqlite_keeps_the_weave_across_reopening(tmp_path: Path) -> None:
    w = job_tree()
    async with SqliteStore(tmp_path / "w.db") as first:
        await save(WeaveStore(first), "root", w)
    async with SqliteStore(tmp_path / "w.db") as second:
        loaded = await WeaveStore(second).load("root")
    assert loaded == w.records and verify(loaded, KEY).ok


async def test_appending_again_is_idempotent_but_never_overwrites(store: StateStore) -> None:
    w, weaves = job_tree(), WeaveStore(store)
    await save(weaves, "root", w)
    await weaves.append("root", w.records[1], 1)
    with pytest.raises(WeaveError, match="position 1"):
        await weaves.append("root", w.records[2], 1)
    with pytest.raises(ValueError, match="position"):
        await weaves.append("root", w.records[0], -1)
    assert await weaves.load("root") == w.records


async def test_an_invalid_value_names_its_key(store: StateStore) -> None:
    w, weaves = job_tree(), WeaveStore(store)
    await save(weaves, "root", w)
    bad = w.records[3].model_dump(mode="json")
    bad["n"] = "three"
    await store.write(Scope.custom("weave:root"), "00000003", bad)
    with pytest.raises(WeaveError, match="00000003"):
        await weaves.load("root")


async def test_a_missing_position_is_an_error(store: StateStore) -> None:
    w, weaves = job_tree(), WeaveStore(store)
    await save(weaves, "root", w)
    await store.delete(Scope.custom("weave:root"), "00000004")
    with pytest.raises(WeaveError, match="position 4"):
        await weaves.load("root")


async def test_a_tampered_stored_record_loads_and_fails_verification(store: StateStore) -> None:
    w, weaves = job_tree(), WeaveStore(store)
    await save(weaves, "root", w)
    tampered = w.records[2].model_dump(mode="json")
    tampered["content"] = {"tool": "rm -rf"}
    await store.write(Scope.custom("weave:root"), "00000002", tampered)
    report = verify(await weaves.load("root"), KEY)
    assert report.first_break is not None
    assert report.first_break.record_id == "root.1:1" and report.first_break.position == 2
