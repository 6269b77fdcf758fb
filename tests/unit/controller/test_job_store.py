"""SqliteJobStore: durable records, atomic state + event, recovery, filters, signals."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from airlock.controller import JobStoreError, SqliteJobStore
from airlock.jobs import JobError, JobFilter, JobState, LogLine, StateChanged
from layer0 import Content, ExitReason, LogLevel, SessionId, TurnInput, TurnMetadata, TurnOutput


def _output(text: str, reason: ExitReason | None = None) -> TurnOutput:
    return TurnOutput(
        message=Content.text(text), exit_reason=reason or ExitReason.complete(), metadata=TurnMetadata.empty()
    )


def _input(text: str = "hi", session: str | None = None) -> TurnInput:
    return TurnInput.new(text, session=SessionId(session) if session else None)


async def test_create_get_and_first_event(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        job, event = await store.create(agent="a", input=_input("hello", "s1"), max_duration_ms=5000)
        assert job.state is JobState.QUEUED and job.queue == "a" and job.workflow == job.id
        assert event.seq == 1 and event.kind == "state" and event.data == StateChanged(state=JobState.QUEUED)
        got = await store.get(job.id)
        assert got == job and got.session == "s1" and got.max_duration_ms == 5000
        assert await store.get("nope") is None
    assert stat.S_IMODE((tmp_path / "jobs.db").stat().st_mode) == 0o600


async def test_transitions_set_times_output_and_guard(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
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


async def test_records_survive_reopening_and_recover_marks_active_jobs(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    async with SqliteJobStore(path) as store:
        running, _ = await store.create(agent="a", input=_input("run"))
        await store.transition(running.id, JobState.RUNNING)
        queued, _ = await store.create(agent="a", input=_input("wait"))
        done, _ = await store.create(agent="a", input=_input("done"))
        await store.transition(done.id, JobState.SUCCEEDED, output=_output("x"))
        child, _ = await store.create(agent="b", input=_input("c"), parent_id=running.id, origin="delegate")
    async with SqliteJobStore(path) as store:
        assert [j.id for j in await store.held()] == [running.id, child.id]
        recovered = await store.recover("controller gone", "reaped 1 container")
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
        assert await store.held() == []


async def test_find_filters_and_pages(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
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


async def test_events_in_order_under_concurrent_appends(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        job, _ = await store.create(agent="a", input=_input())
        lines = [
            LogLine(level=LogLevel.INFO, message=str(i), source="test", data={"n": i}) for i in range(50)
        ]
        await asyncio.gather(*(store.append(job.id, line) for line in lines))
        events = await store.events(job.id)
        assert [e.seq for e in events] == list(range(1, 52))
        recorded = [e.data for e in events[1:] if isinstance(e.data, LogLine)]
        assert sorted(recorded, key=lambda line: int(line.message)) == lines
        logs = await store.events(job.id, after_seq=40, kind="log")
        assert [e.seq for e in logs] == list(range(41, 52))


async def test_signals_are_recorded_per_workflow(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        assert await store.record_signal("wf", "ping", {"n": 1}, "j1") == 1
        assert await store.record_signal("wf", "pong", None, None) == 2
        assert await store.record_signal("other", "ping", 3, "j2") == 1
        signals = await store.signals("wf")
        assert [(s["signal_type"], s["data"], s["source_job"]) for s in signals] == [
            ("ping", {"n": 1}, "j1"),
            ("pong", None, None),
        ]


async def test_closed_store_refuses(tmp_path: Path) -> None:
    store = SqliteJobStore(tmp_path / "jobs.db")
    await store.aclose()
    with pytest.raises(JobStoreError, match="closed"):
        await store.get("x")
