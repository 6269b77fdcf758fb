"""A job's state and turn records, written through its replica's fence: once another replica
adopted the job, the replica that lost it writes nothing (run on SQLite and PostgreSQL; on
PostgreSQL the claim is checked in the write's own transaction, and an adoption waits for it)."""

from __future__ import annotations

import asyncio

import pytest

from airlock.controller import JobStore, LeaseLost
from airlock.controller._fenced_state import fenced_state
from airlock.controller._weaving import Weaves
from airlock.jobs import JobState
from airlock.state import GuardedState, Op, SqlStateStore, Statement
from airlock.weave import RecordType, WeaveError, verify
from layer0 import Scope, StateStore, TurnInput
from tests.support.job_stores import StoreSite

SCOPE = Scope.custom("memory")


async def _running(store: JobStore) -> str:
    """A job ``store``'s replica claimed and runs."""
    await store.register(store.claims.replica)
    job, _ = await store.create(agent="a", input=TurnInput.new("hi"), queue="q")
    claim = await store.claim()
    assert claim is not None and claim.job_id == job.id
    await store.transition(job.id, JobState.RUNNING)
    return job.id


async def _adopt(adopter: JobStore, job_id: str) -> None:
    """``adopter`` finds every other replica past a tiny lease and adopts their jobs."""
    await asyncio.sleep(0.05)
    await adopter.register(adopter.claims.replica)
    dead = await adopter.dead_replicas(lease_s=0.01)
    adopted = await adopter.adopt(dead)
    assert [a.job_id for a in adopted] == [job_id]


async def test_a_replica_that_lost_a_job_writes_none_of_its_state(site: StoreSite) -> None:
    async with site.open_with_state() as (one, state), site.open() as two:
        job_id = await _running(one)
        mine = fenced_state(state, one, job_id)
        assert isinstance(mine, GuardedState) == (site.engine == "postgresql")
        await mine.write(SCOPE, "note", "before")
        await _adopt(two, job_id)
        with pytest.raises(LeaseLost):
            await mine.write(SCOPE, "note", "late")
        with pytest.raises(LeaseLost):
            await mine.delete(SCOPE, "note")
        assert await state.read(SCOPE, "note") == "before"
        assert await mine.read(SCOPE, "note") == "before", "reads pass through"
        await fenced_state(state, two, job_id).write(SCOPE, "note", "adopted")
        assert await state.read(SCOPE, "note") == "adopted"


KEY = b"k" * 32


def _weaves(state: StateStore, replica: JobStore) -> Weaves:
    """The weaves as ``replica`` writes them (fenced to the jobs it holds)."""
    return Weaves(state, KEY, writer=lambda job: fenced_state(state, replica, job))


async def _record(weaves: Weaves, job_id: str, kind: str) -> None:
    await weaves.record(job_id, job=job_id, agent="a", type=RecordType.THOUGHT, kind=kind)


async def test_a_replica_that_lost_a_job_appends_no_turn_record(site: StoreSite) -> None:
    async with site.open_with_state() as (one, state), site.open() as two:
        job_id = await _running(one)
        stale = _weaves(state, one)
        await _record(stale, job_id, "first")
        await _adopt(two, job_id)
        adopter = _weaves(state, two)
        with pytest.raises(LeaseLost):
            await _record(stale, job_id, "late")
        await _record(adopter, job_id, "resumed")
        records = await adopter.load(job_id)
        assert [r.kind for r in records] == ["first", "resumed"]
        assert verify(records, KEY).ok


async def test_a_replica_that_gets_a_job_back_appends_after_the_records_written_meanwhile(
    site: StoreSite,
) -> None:
    """A job goes one -> two -> one: one's cached copy of the weave misses two's record. Its
    next append, from that copy, is refused (nothing is overwritten); an execution starts by
    dropping the copy (``JobRuns.run_submitted``), and then appends after two's record."""
    async with site.open_with_state() as (one, state), site.open() as two:
        job_id = await _running(one)
        first = _weaves(state, one)
        await _record(first, job_id, "first")
        await _adopt(two, job_id)
        second = _weaves(state, two)
        await _record(second, job_id, "by two")
        await _adopt(one, job_id)
        with pytest.raises(WeaveError, match="already holds another record"):
            await _record(first, job_id, "from a stale copy")
        first.forget(job_id)
        await _record(first, job_id, "back on one")
        records = await first.load(job_id)
        assert [r.kind for r in records] == ["first", "by two", "back on one"]
        assert verify(records, KEY).ok


async def test_an_adoption_waits_for_a_write_that_checked_the_claim(postgres_dsn: str) -> None:
    """The fence's read of the claim holds the job's row to the end of the write, so the
    adopter's takeover comes after the write (and sees it), never between check and write."""
    site = StoreSite("postgresql", postgres_dsn)
    async with site.open_with_state() as (one, state), site.open() as two:
        job_id = await _running(one)
        assert isinstance(state, SqlStateStore)
        checked = asyncio.Event()
        order: list[str] = []

        def slow_fence() -> Op[None]:
            yield from one.fence(job_id)
            checked.set()
            yield Statement("SELECT pg_sleep(?)", (0.5,))  # paused between check and write

        writing = asyncio.create_task(state.guarded(slow_fence).write(SCOPE, "note", "v"))
        writing.add_done_callback(lambda _: order.append("written"))
        await checked.wait()
        await _adopt(two, job_id)
        order.append("adopted")
        await writing
        assert order == ["written", "adopted"]
        assert await state.read(SCOPE, "note") == "v"
        with pytest.raises(LeaseLost):
            await fenced_state(state, one, job_id).write(SCOPE, "note", "late")


async def test_guarded_writes_run_in_the_guards_transaction(postgres_dsn: str) -> None:
    """A guard that refuses leaves nothing written; one that passes sees the write commit."""
    site = StoreSite("postgresql", postgres_dsn)
    async with site.open_with_state() as (_, state):
        assert isinstance(state, SqlStateStore)

        def refuse() -> Op[None]:
            yield Statement("INSERT INTO state (scope, key, value) VALUES (?, ?, ?)", ("s", "k", '"x"'))
            raise LeaseLost("job-1", "a test refusal")

        guarded: StateStore = state.guarded(refuse)
        with pytest.raises(LeaseLost):
            await guarded.write(SCOPE, "note", "v")
        assert await state.read(SCOPE, "note") is None
        assert await state.read(Scope.custom("s"), "k") is None, "the guard's own write rolled back"
