"""Replicas claiming jobs from one store, run unchanged on SQLite and PostgreSQL: fair order,
one job per session at a time, no job claimed twice, fencing after adoption or revocation."""

from __future__ import annotations

import asyncio

import pytest

from airlock.controller import Claims, JobNotAwaiting, JobStore, LeaseLost
from airlock.controller._control_relay import ControlRelay
from airlock.jobs import JobError, JobState, LogLine
from layer0 import LogLevel, SessionId, TurnInput
from tests.support.job_stores import StoreSite


def _input(text: str = "hi", session: str | None = None) -> TurnInput:
    return TurnInput.new(text, session=SessionId(session) if session else None)


async def _submit(store: JobStore, queue: str, session: str | None = None) -> str:
    job, _ = await store.create(agent="a", input=_input(queue, session), queue=queue)
    return job.id


async def test_queue_keys_take_turns_and_each_is_fifo(site: StoreSite) -> None:
    async with site.open() as store:
        a = [await _submit(store, "a") for _ in range(3)]
        b = [await _submit(store, "b") for _ in range(2)]
        order = []
        while (claim := await store.claim()) is not None:
            order.append(claim.job_id)
        assert order == [a[0], b[0], a[1], b[1], a[2]]
        assert await store.claim() is None


async def test_a_sessions_jobs_run_one_at_a_time_across_replicas(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two:
        first = await _submit(one, "q", "s1")
        second = await _submit(one, "q", "s1")
        other = await _submit(one, "q", "s2")
        got = await one.claim()
        assert got is not None and got.job_id == first
        assert (await two.claim()).job_id == other  # type: ignore[union-attr]
        assert await two.claim() is None, "s1's second job waits while its first holds a worker"
        await one.transition(first, JobState.RUNNING)
        await one.transition(first, JobState.SUCCEEDED)
        await one.release(first)
        assert (await two.claim()).job_id == second  # type: ignore[union-attr]


async def test_no_job_is_claimed_twice_by_replicas_racing(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two, site.open() as three:
        ids = {await _submit(one, f"q{i % 3}") for i in range(30)}
        claimed: list[str] = []

        async def worker(store: JobStore) -> None:
            while (claim := await store.claim()) is not None:
                claimed.append(claim.job_id)

        await asyncio.gather(*(worker(s) for s in (one, two, three) for _ in range(3)))
        assert sorted(claimed) == sorted(ids)


async def test_an_adopted_job_fences_out_its_old_replica(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two:
        await one.register("one")
        await two.register("two")
        job_id = await _submit(one, "q")
        claim = await one.claim()
        assert claim is not None and claim.fence == 1
        await one.transition(job_id, JobState.RUNNING)
        await one.append(job_id, LogLine(level=LogLevel.INFO, message="working", source="test"))
        # ``one`` stops renewing (paused); ``two`` finds it past its lease and adopts its job.
        await asyncio.sleep(0.05)
        await two.heartbeat()
        dead = await two.dead_replicas(lease_s=0.01)
        assert one.claims.replica in dead
        (adopted,) = await two.adopt(dead)
        assert (adopted.job_id, adopted.fence, adopted.state) == (job_id, 2, JobState.RUNNING)
        before = await two.events(job_id)
        with pytest.raises(LeaseLost, match="no longer holds it"):
            await one.append(job_id, LogLine(level=LogLevel.INFO, message="late", source="test"))
        assert not one.claims.holds(job_id)
        assert await two.events(job_id) == before, "the fenced write left nothing"
        assert await one.heartbeat() is False, "the adopted replica learns it was declared dead"
        await two.transition(job_id, JobState.SUCCEEDED)  # the adopter writes on


async def test_a_job_lost_and_queued_again_waits_until_its_old_run_here_let_go(site: StoreSite) -> None:
    """``one`` is declared dead while it runs a job; ``two`` adopts it and queues it again.
    ``one`` does not claim it back while it still holds it (it has not noticed) or lost it
    (its run has not let go): that run would pass the new claim's fence. Once released, it may."""
    async with site.open() as one, site.open() as two:
        await one.register("one")
        await two.register("two")
        job_id = await _submit(one, "q")
        assert (await one.claim()) is not None
        await one.transition(job_id, JobState.RUNNING)
        await asyncio.sleep(0.05)
        await two.heartbeat()
        (adopted,) = await two.adopt(await two.dead_replicas(lease_s=0.01))
        await two.transition(job_id, JobState.QUEUED)
        await two.release(job_id)
        assert one.claims.holds(job_id)
        assert await one.claim() is None, "still held here: its run has not noticed"
        one.claims.lose([job_id])
        assert await one.claim() is None, "lost here: its run has not let go"
        await one.release(job_id)  # the run let go
        claim = await one.claim()
        assert claim is not None and claim.job_id == job_id and claim.fence == adopted.fence + 1


async def test_a_revoked_claim_is_lost_and_found_so(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two:
        job_id = await _submit(one, "q")
        await one.claim()
        await one.transition(job_id, JobState.RUNNING)
        error = JobError.of("cancelled", "by a user")
        await two.transition(job_id, JobState.CANCELLED, error=error, revoke=True)
        assert await one.lost_claims() == [job_id]
        with pytest.raises(LeaseLost):
            one.claims.hold(job_id, 1)
            await one.save_checkpoint(job_id, "{}", [])


async def test_a_child_is_held_by_its_parents_replica_and_released_with_it(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two:
        parent = await _submit(one, "q")
        await one.claim()
        child, _ = await one.create(agent="b", input=_input(), parent_id=parent, origin="delegate")
        assert one.claims.holds(child.id)
        await one.transition(child.id, JobState.SUCCEEDED)
        await one.transition(parent, JobState.SUCCEEDED)
        await one.release(parent)
        assert one.claims.held() == {}
        assert await two.adopt([], orphans=True) == [], "released jobs that ended are nobody's orphans"


async def test_claims_live_in_the_store_and_only_a_dead_replicas_are_adopted(site: StoreSite) -> None:
    async with site.open() as store:
        await store.register("first")
        job_id = await _submit(store, "q")
        await store.claim()
        first = store.claims.replica
    async with site.open() as again:
        await again.register("second")
        assert await again.claim() is None, "still claimed by the first replica"
        assert await again.adopt([], orphans=True) == [], "a claimed job is nobody's orphan"
        dead = await again.dead_replicas(lease_s=3600)
        # One controller per SQLite file: any other is dead. PostgreSQL waits for the lease.
        assert dead == ([first] if site.engine == "sqlite" else [])
        adopted = await again.adopt([first])
        assert [(a.job_id, a.state) for a in adopted] == [(job_id, JobState.QUEUED)]
        await again.release(job_id)
        assert (await again.claim()).job_id == job_id  # type: ignore[union-attr]


def test_claims_need_a_replica_id() -> None:
    assert Claims("r1").replica == "r1" and Claims().replica != Claims().replica


async def test_a_relayed_control_call_stops_waiting_once_its_owner_let_the_job_go(site: StoreSite) -> None:
    """A control call relayed to the replica holding a job, which dies before answering: the
    asker learns so when another replica adopts the job, not at its (long) timeout."""
    async with site.open() as one, site.open() as two:
        await one.register("one")
        job_id = await _submit(one, "q")
        await one.claim()
        await one.transition(job_id, JobState.RUNNING)
        relay = ControlRelay(two, {}, timeout_s=3600, poll_s=0.05)
        asked = asyncio.create_task(relay.ask(one.claims.replica, job_id, "pause", {}))
        await asyncio.sleep(0.2)
        assert not asked.done(), "it waits while the owner holds the job"
        await two.register("two")
        dead = await two.dead_replicas(lease_s=0.01)
        await two.adopt(dead)
        with pytest.raises(JobNotAwaiting, match="before it answered pause"):
            await asked
