"""Each weave thread's anchor in the job store: records deleted from the state store (the
newest, a middle one, a whole child thread) are named by verify, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from airlock.controller._weave_anchors import StoredAnchors
from airlock.controller._weaving import Weaves
from airlock.jobs import JobState
from airlock.state import execute
from airlock.weave import RecordType, WeaveStore
from layer0 import StateStore, TurnInput
from tests.support.job_stores import StoreSite

KEY = b"k" * 32
ROOT = "root"


@asynccontextmanager
async def _tree(site: StoreSite) -> AsyncIterator[tuple[Weaves, StateStore]]:
    """Root thread of 10 records, its child ``kid`` (2 records) at positions 3 and 4."""
    async with site.open_with_state() as (jobs, state):
        weaves = Weaves(state, KEY, anchors=StoredAnchors(jobs))
        for i in range(12):
            job = "kid" if i in (3, 4) else ROOT
            await weaves.record(ROOT, job=job, agent=job, type=RecordType.THOUGHT, kind=f"step{i}")
        yield weaves, state


async def _delete(state: StateStore, *positions: int) -> None:
    for position in positions:
        await state.delete(WeaveStore.scope(ROOT), f"{position:08d}")


TRUNCATED = "(anchor says 10, store holds {held}): the thread was truncated"


async def _problems(weaves: Weaves) -> list[str]:
    return [b.problem for b in (await weaves.verify(ROOT)).breaks]


async def test_an_intact_tree_verifies_against_its_anchors(site: StoreSite) -> None:
    async with _tree(site) as (weaves, _):
        report = await weaves.verify(ROOT)
        assert report.ok and report.anchored and report.records == 12 == report.anchored_records


async def test_deleting_the_last_record_is_named(site: StoreSite) -> None:
    async with _tree(site) as (weaves, state):
        await _delete(state, 11)
        assert await _problems(weaves) == [
            "thread root: 1 record missing after #9 " + TRUNCATED.format(held=9)
        ]


async def test_deleting_the_last_two_records_is_named(site: StoreSite) -> None:
    async with _tree(site) as (weaves, state):
        await _delete(state, 10, 11)
        assert await _problems(weaves) == [
            "thread root: 2 records missing after #8 " + TRUNCATED.format(held=8)
        ]


async def test_deleting_a_middle_record_is_named(site: StoreSite) -> None:
    async with _tree(site) as (weaves, state):
        await _delete(state, 7)  # root:6
        found = await _problems(weaves)
        assert "record root:7 follows root:5: root:6 is missing" in found


async def test_deleting_a_whole_child_thread_is_named(site: StoreSite) -> None:
    async with _tree(site) as (weaves, state):
        await _delete(state, 3, 4)
        assert await _problems(weaves) == [
            "thread kid is missing: its anchor says 2 records, the store holds none"
        ]


async def test_dropping_a_tree_drops_its_anchors(site: StoreSite) -> None:
    async with _tree(site) as (weaves, _):
        assert await weaves.drop(ROOT) == 12
        assert weaves.anchors is not None and await weaves.anchors.anchors(ROOT) == []
        report = await weaves.verify(ROOT)
        assert report.ok and report.records == 0 and not report.anchored


async def test_a_version_6_store_gets_the_anchors_table(site: StoreSite) -> None:
    async with site.open() as jobs:
        await jobs.run(execute("DROP TABLE weave_anchors"))
    await site.set_schema_version(6)
    async with site.open_with_state() as (jobs, state):
        weaves = Weaves(state, KEY, anchors=StoredAnchors(jobs))
        await weaves.record(ROOT, job=ROOT, agent="a", type=RecordType.THOUGHT, kind="first")
        report = await weaves.verify(ROOT)
        assert report.ok and report.anchored and report.anchored_records == 1


async def test_a_finished_jobs_row_keeps_its_tip_when_the_anchors_are_deleted_too(site: StoreSite) -> None:
    async with site.open_with_state() as (jobs, state):
        weaves = Weaves(state, KEY, anchors=StoredAnchors(jobs))
        parent, _ = await jobs.create(agent="a", input=TurnInput.new("hi"))
        child, _ = await jobs.create(agent="b", input=TurnInput.new("sub"), parent_id=parent.id)
        for i in range(6):
            job = child.id if i in (1, 2) else parent.id
            await weaves.record(parent.id, job=job, agent="a", type=RecordType.THOUGHT, kind=f"step{i}")
        await jobs.transition(child.id, JobState.FAILED)
        await jobs.transition(parent.id, JobState.SUCCEEDED)
        await jobs.run(execute("DELETE FROM weave_anchors"))
        for position in (1, 2, 5):  # the whole child thread and the parent's last record
            await state.delete(WeaveStore.scope(parent.id), f"{position:08d}")
        problems = [b.problem for b in (await weaves.verify(parent.id)).breaks]
        assert problems == sorted(
            [
                f"thread {parent.id}: 1 record missing after #3 (anchor says 4, store holds 3): "
                "the thread was truncated",
                f"thread {child.id} is missing: its anchor says 2 records, the store holds none",
            ]
        )
