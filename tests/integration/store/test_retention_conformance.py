"""Retention, run unchanged on SQLite and on PostgreSQL: finished job trees removed whole after
their tenant's cutoff (events, files, checkpoints, the signals of emptied workflows, audit
records), never a job that is not terminal nor a child whose root is not due; in bounded
batches; a dry run removes nothing."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from airlock.controller import Cutoffs, JobStore
from airlock.jobs import AuditRecord, JobState, utcnow
from layer0 import TurnInput
from tests.support.job_stores import StoreSite, count_rows


async def _finished(
    store: JobStore,
    *,
    parent: str | None = None,
    workflow: str | None = None,
    state: JobState = JobState.SUCCEEDED,
    tenant: str = "default",
) -> str:
    """A job with an artifact, a checkpoint and a log of events, left in ``state``."""
    job, _ = await store.create(
        agent="a", input=TurnInput.new("hi"), parent_id=parent, workflow=workflow, tenant=tenant
    )
    await store.save_artifacts(job.id, [("out.txt", b"x" * 100)])
    await store.save_checkpoint(job.id, "{}", ["call-1"])
    await store.transition(job.id, JobState.RUNNING)
    await store.transition(job.id, state)
    return job.id


async def _later() -> datetime:
    """A moment strictly after everything finished so far (and before what finishes next)."""
    await asyncio.sleep(0.01)
    moment = utcnow()
    await asyncio.sleep(0.01)
    return moment


async def test_a_due_tree_goes_whole_and_nothing_else(site: StoreSite) -> None:
    async with site.open() as store:
        root = await _finished(store, workflow="wf-1")
        child = await _finished(store, parent=root, workflow="wf-1")
        grandchild = await _finished(store, parent=child, workflow="wf-1", state=JobState.FAILED)
        await store.record_signal("wf-1", "go", {"n": 1}, None)
        shared = await _finished(store, workflow="wf-2")
        await store.record_signal("wf-2", "go", None, None)
        # Finished long ago, but a child still runs: kept whole.
        busy_root = await _finished(store)
        busy_child, _ = await store.create(agent="a", input=TurnInput.new("hi"), parent_id=busy_root)
        await store.transition(busy_child.id, JobState.RUNNING)
        running, _ = await store.create(agent="a", input=TurnInput.new("hi"))
        cutoff = await _later()
        late = await _finished(store, workflow="wf-2")  # keeps wf-2's signals

        report = await store.prune(Cutoffs(default=cutoff))

        assert sorted(report.roots) == sorted([root, shared])
        assert (report.jobs, report.files, report.bytes, report.checkpoints) == (4, 4, 400, 4)
        assert report.events == 12 and report.signals == 1 and not report.more
        for gone in (root, child, grandchild, shared):
            assert await store.get(gone) is None and await store.events(gone) == []
            assert await store.files(gone, "artifact") == [] and await store.checkpoint(gone) is None
        for kept in (busy_root, busy_child.id, running.id, late):
            assert await store.get(kept) is not None
        assert await store.signals("wf-1") == [] and len(await store.signals("wf-2")) == 1
        assert await count_rows(store, "jobs") == 4 and await count_rows(store, "job_files") == 2


async def test_each_tenant_has_its_own_cutoff_and_one_may_be_pruned_alone(site: StoreSite) -> None:
    async with site.open() as store:
        acme, globex, initech = [await _finished(store, tenant=t) for t in ("acme", "globex", "initech")]
        other = await _finished(store)
        cutoff = await _later()
        forever = {"acme": None, "globex": cutoff}

        only_globex = await store.prune(Cutoffs(default=cutoff, tenants=forever, only="globex"))
        assert only_globex.roots == [globex]
        rest = await store.prune(Cutoffs(default=cutoff, tenants=forever))
        assert sorted(rest.roots) == sorted([initech, other])
        assert await store.get(acme) is not None and await count_rows(store, "jobs") == 1
        assert (
            await store.prune(Cutoffs(default=None, tenants={"acme": cutoff - timedelta(days=1)}))
        ).roots == []


async def test_batches_are_bounded_and_a_dry_run_removes_nothing(site: StoreSite) -> None:
    async with site.open() as store:
        roots = [await _finished(store) for _ in range(5)]
        cutoff = await _later()

        dry = await store.prune(Cutoffs(default=cutoff), 10, dry_run=True)
        assert sorted(dry.roots) == sorted(roots) and dry.jobs == 5 and dry.bytes == 500
        assert await count_rows(store, "jobs") == 5 and await count_rows(store, "events") == 15

        first = await store.prune(Cutoffs(default=cutoff), 2)
        assert first.roots == roots[:2] and first.more  # oldest first
        second = await store.prune(Cutoffs(default=cutoff), 2)
        third = await store.prune(Cutoffs(default=cutoff), 2)
        assert second.roots == roots[2:4] and third.roots == roots[4:] and not third.more
        assert await count_rows(store, "jobs") == 0 and await count_rows(store, "events") == 0
        with pytest.raises(ValueError, match="at least one"):
            await store.prune(Cutoffs(default=cutoff), 0)


async def test_old_audit_records_go_only_when_asked(site: StoreSite) -> None:
    async with site.open() as store:
        for i in range(3):
            await store.record_audit(
                AuditRecord(time=utcnow(), principal="ann", tenant="acme", action=f"Act{i}", outcome="OK")
            )
        cutoff = await _later()
        await store.record_audit(
            AuditRecord(time=utcnow(), principal="ann", tenant="acme", action="New", outcome="OK")
        )

        assert (await store.prune(Cutoffs(default=cutoff))).audit == 0
        assert await count_rows(store, "audit") == 4
        assert (await store.prune(Cutoffs(default=None, audit=cutoff))).audit == 3
        assert await count_rows(store, "audit") == 1
