"""The job store's contract, run unchanged on SQLite and on PostgreSQL: durable records, state
and event in one transaction, recovery, filters, files, checkpoints, signals, the audit log,
quotas admitted across replicas, and a store newer than the code refused. The claims of
replicas (fair order, sessions, fencing, adoption) are in ``test_claims_conformance``."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from airlock.controller import JobStoreError
from airlock.jobs import AuditRecord, JobError, JobFilter, JobState, LogLine, StateChanged, utcnow
from airlock.state import Op, fetch_one
from layer0 import Content, ExitReason, LogLevel, SessionId, TurnInput, TurnMetadata, TurnOutput
from tests.support.job_stores import StoreSite


def _output(text: str, reason: ExitReason | None = None, cost: str = "0") -> TurnOutput:
    metadata = TurnMetadata.empty().model_copy(update={"cost": Decimal(cost)})
    return TurnOutput(
        message=Content.text(text), exit_reason=reason or ExitReason.complete(), metadata=metadata
    )


def _input(text: str = "hi", session: str | None = None) -> TurnInput:
    return TurnInput.new(text, session=SessionId(session) if session else None)


async def test_create_get_and_first_event(site: StoreSite) -> None:
    async with site.open() as store:
        job, event = await store.create(agent="a", input=_input("héllo ✓", "s1"), max_duration_ms=5000)
        assert job.state is JobState.QUEUED and job.queue == "a" and job.workflow == job.id
        assert event.seq == 1 and event.kind == "state" and event.data == StateChanged(state=JobState.QUEUED)
        got = await store.get(job.id)
        assert got == job and got.session == "s1" and got.max_duration_ms == 5000
        assert await store.get("nope") is None


async def test_a_job_is_found_only_within_its_tenant(site: StoreSite) -> None:
    async with site.open() as store:
        job, _ = await store.create(agent="a", input=_input(), tenant="acme", owner="ann")
        assert (await store.get(job.id, tenant="acme")) == job
        assert await store.get(job.id, tenant="globex") is None
        assert [j.id for j in await store.find(JobFilter(tenant="globex"))] == []
        assert [j.id for j in await store.find(JobFilter(tenant="acme", owner="ann"))] == [job.id]


async def test_transitions_set_times_output_and_guard(site: StoreSite) -> None:
    async with site.open() as store:
        job, _ = await store.create(agent="a", input=_input())
        changed = await store.transition(job.id, JobState.PROVISIONING, only_from=[JobState.QUEUED])
        assert changed is not None and changed[0].started_at is not None and changed[1].seq == 2
        # A second "start" loses: the job is no longer queued.
        assert await store.transition(job.id, JobState.CANCELLED, only_from=[JobState.QUEUED]) is None
        output = _output("done")
        final, event = await store.transition(
            job.id, JobState.SUCCEEDED, output=output, effects={"ok": True}
        ) or (
            None,
            None,
        )
        assert final is not None and event is not None
        assert final.output == output and final.effects == {"ok": True} and final.finished_at is not None
        assert event.terminal
        assert event.data == StateChanged(state=JobState.SUCCEEDED, previous=JobState.PROVISIONING)
        with pytest.raises(JobStoreError, match="no job"):
            await store.transition("missing", JobState.FAILED)


async def test_records_survive_reopening_and_recover_marks_active_jobs(site: StoreSite) -> None:
    async with site.open() as store:
        running, _ = await store.create(agent="a", input=_input("run"))
        await store.transition(running.id, JobState.RUNNING)
        queued, _ = await store.create(agent="a", input=_input("wait"))
        done, _ = await store.create(agent="a", input=_input("done"))
        await store.transition(done.id, JobState.SUCCEEDED, output=_output("x"))
        child, _ = await store.create(agent="b", input=_input("c"), parent_id=running.id, origin="delegate")
    async with site.open() as store:
        # Held by no live replica (claimed by none: written before claims): adopted at start.
        adopted = await store.adopt([], orphans=True)
        assert [a.job_id for a in adopted] == [running.id, child.id]
        recovered = await store.recover([a.job_id for a in adopted], "controller gone", "reaped 1 container")
        # A child created but never started is interrupted too (children never queue).
        assert [j.id for j in recovered] == [running.id, child.id]
        *_, log, last = await store.events(running.id)
        assert log.data == LogLine(level=LogLevel.WARN, message="reaped 1 container", source="controller")
        assert last.terminal and last.seq == log.seq + 1
        assert last.data == StateChanged(
            state=JobState.INTERRUPTED,
            previous=JobState.RUNNING,
            detail="controller gone",
            error=JobError.of("interrupted", "controller gone"),
        )
        again = await store.get(running.id)
        assert again is not None and again.state is JobState.INTERRUPTED
        assert again.error == JobError.of("interrupted", "controller gone")
        assert again.children == [child.id]
        assert [j.id for j in await store.queued()] == [queued.id]  # children never queue
        assert await store.recover([running.id], "again") == []  # already terminal: untouched


async def test_find_filters_and_pages(site: StoreSite) -> None:
    async with site.open() as store:
        ids = []
        for i in range(5):
            job, _ = await store.create(
                agent="a" if i % 2 else "b", input=_input(str(i), "s" if i < 2 else None)
            )
            ids.append(job.id)
        await store.transition(ids[0], JobState.FAILED, error=JobError(kind="x", message="y"))
        assert [j.id for j in await store.find()] == ids[::-1]
        assert [j.id for j in await store.find(JobFilter(agent="a"))] == [ids[3], ids[1]]
        assert [j.id for j in await store.find(JobFilter(session="s"))] == [ids[1], ids[0]]
        assert [j.id for j in await store.find(JobFilter(states=frozenset({JobState.FAILED})))] == [ids[0]]
        assert [j.id for j in await store.find(JobFilter(limit=2))] == [ids[4], ids[3]]
        assert [j.id for j in await store.find(JobFilter(limit=2, before_id=ids[3]))] == [ids[2], ids[1]]


async def test_events_in_order_under_concurrent_appends_from_two_replicas(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two:
        job, _ = await one.create(agent="a", input=_input())
        lines = [
            LogLine(level=LogLevel.INFO, message=str(i), source="test", data={"n": i}) for i in range(50)
        ]
        await asyncio.gather(*((one if i % 2 else two).append(job.id, line) for i, line in enumerate(lines)))
        events = await two.events(job.id)
        assert [e.seq for e in events] == list(range(1, 52))
        recorded = [e.data for e in events[1:] if isinstance(e.data, LogLine)]
        assert sorted(recorded, key=lambda line: int(line.message)) == lines
        logs = await one.events(job.id, after_seq=40, kind="log")
        assert [e.seq for e in logs] == list(range(41, 52))


async def test_children_recorded_by_two_replicas_at_once_are_all_kept(site: StoreSite) -> None:
    async with site.open() as one, site.open() as two:
        parent, _ = await one.create(agent="a", input=_input())
        children = await asyncio.gather(
            *(
                (one if i % 2 else two).create(
                    agent="b", input=_input(str(i)), parent_id=parent.id, origin="delegate"
                )
                for i in range(12)
            )
        )
        got = await one.get(parent.id)
        assert got is not None and sorted(got.children) == sorted(child.id for child, _ in children)


async def test_files_keep_their_bytes_and_digests(site: StoreSite) -> None:
    blob = bytes(range(256)) * 3
    async with site.open() as store:
        job, _ = await store.create(
            agent="a", input=_input(), files=[("b/x.bin", blob), ("a.txt", "é\n".encode())]
        )
        assert [f.path for f in await store.files(job.id, "input")] == ["a.txt", "b/x.bin"]
        assert await store.file_data(job.id, "input", "b/x.bin") == blob
        assert await store.input_files(job.id) == [("a.txt", "é\n".encode()), ("b/x.bin", blob)]
        await store.save_artifacts(job.id, [("out.txt", b"1")])
        await store.save_artifacts(job.id, [("out2.txt", b"22")])  # replaces the earlier ones
        (artifact,) = await store.files(job.id, "artifact")
        assert (artifact.path, artifact.size) == ("out2.txt", 2) and len(artifact.sha256) == 64
        assert await store.file_data(job.id, "artifact", "out.txt") is None


async def test_checkpoints_are_kept_replaced_and_cleared(site: StoreSite) -> None:
    async with site.open() as store:
        job, _ = await store.create(agent="a", input=_input())
        assert await store.checkpoint(job.id) is None
        await store.save_checkpoint(job.id, '{"messages": 1}', ["c2", "c1"])
        await store.save_checkpoint(job.id, '{"messages": 2}', [])
        await store.save_started(job.id, ["c3"])
        assert await store.checkpoint(job.id) == ('{"messages": 2}', ["c3"])
        await store.clear_checkpoint(job.id)
        assert await store.checkpoint(job.id) is None


async def test_signals_are_recorded_per_workflow(site: StoreSite) -> None:
    async with site.open() as store:
        assert await store.record_signal("wf", "ping", {"n": 1}, "j1") == 1
        assert await store.record_signal("wf", "pong", None, None) == 2
        assert await store.record_signal("other", "ping", 3, "j2") == 1
        signals = await store.signals("wf")
        assert [(s["signal_type"], s["data"], s["source_job"]) for s in signals] == [
            ("ping", {"n": 1}, "j1"),
            ("pong", None, None),
        ]


async def test_the_audit_log_pages_newest_first_and_notes_quota_changes_once(site: StoreSite) -> None:
    from airlock.controller._audit_log import AuditFilter

    async with site.open() as store:
        for i in range(3):
            entry = AuditRecord(time=utcnow(), principal="ann", tenant="acme", action=f"Act{i}", outcome="OK")
            assert await store.record_audit(entry) == i + 1
        page = await store.audit(AuditFilter(tenant="acme", limit=2))
        assert [e.action for e in page] == ["Act2", "Act1"]
        assert [e.action for e in await store.audit(AuditFilter(before_seq=page[-1].seq))] == ["Act0"]
        assert await store.audit_quotas('{"q": 1}', "config") is not None
        assert await store.audit_quotas('{"q": 1}', "config") is None
        assert await store.audit_quotas('{"q": 2}', "config") is not None


async def test_use_counts_what_quotas_limit(site: StoreSite) -> None:
    async with site.open() as store:
        a, _ = await store.create(agent="a", input=_input(), tenant="acme")
        b, _ = await store.create(agent="a", input=_input(), tenant="acme")
        await store.create(agent="a", input=_input(), tenant="globex")
        await store.transition(a.id, JobState.SUCCEEDED, output=_output("x", cost="0.25"))
        await store.save_artifacts(b.id, [("o", b"12345")])
        use = await store.tenant_use("acme")
        assert (use.concurrent_jobs, use.jobs_last_minute, use.cost_today, use.artifact_bytes) == (
            1,
            2,
            Decimal("0.25"),
            5,
        )


async def test_admission_holds_a_limit_across_replicas(site: StoreSite) -> None:
    """Twenty submits through two replicas at once against a limit of 3: exactly 3 are recorded."""
    from airlock.controller._tenant_use import measure

    def admit() -> Op[None]:
        use = yield from measure("acme", utcnow(), frozenset({"concurrent_jobs"}))
        if use.concurrent_jobs >= 3:
            raise ValueError("full")

    async with site.open() as one, site.open() as two:

        async def submit(i: int) -> bool:
            try:
                await (one if i % 2 else two).create(agent="a", input=_input(), tenant="acme", admit=admit)
            except ValueError:
                return False
            return True

        admitted = await asyncio.gather(*(submit(i) for i in range(20)))
        assert sum(admitted) == 3
        assert len(await one.find(JobFilter(tenant="acme"))) == 3


async def test_an_operation_that_raises_writes_nothing(site: StoreSite) -> None:
    def refuse() -> Op[None]:
        yield from fetch_one("SELECT 1")
        raise ValueError("no")

    async with site.open() as store:
        with pytest.raises(ValueError):
            await store.create(agent="a", input=_input(), admit=refuse)
        assert await store.find() == []


async def test_a_store_newer_than_the_code_is_refused_with_the_way_back(site: StoreSite) -> None:
    async with site.open() as store:
        await store.create(agent="a", input=_input())
    await site.set_schema_version(99)
    with pytest.raises(JobStoreError, match=r"schema version 99, newer than this airlock's .*roll"):
        async with site.open():
            pass


async def test_closed_store_refuses(site: StoreSite) -> None:
    async with site.open() as store:
        pass
    with pytest.raises(JobStoreError, match="closed"):
        await store.get("x")
