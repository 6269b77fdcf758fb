"""Watching a job: every event reaches the watcher, the final one included, however the job's
last transition interleaves with the watcher's reads."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import JobEvent, JobState
from airlock.state import SqliteStore
from layer0 import TurnInput

pytestmark = pytest.mark.timeout(30)


def service_of(tmp_path: Path, store: SqliteJobStore, state: SqliteStore) -> JobService:
    config = tmp_path / "airlock.yaml"
    agent = {"provider": {"kind": "scripted", "script": []}, "backend": "process"}
    config.write_text(json.dumps({"version": 1, "agents": {"a": agent}}))
    return JobService(store, AgentRunner(load_config(config)), state)


async def test_the_final_event_is_sent_when_the_job_ends_between_the_watchers_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store, SqliteStore(tmp_path / "state.db") as state:
        service = service_of(tmp_path, store, state)
        job, _ = await store.create(agent="a", input=TurnInput.new("go"))
        await service.events.transition(job.id, JobState.PROVISIONING)
        read_events = store.events
        finished = False

        async def events_then_finish(job_id: str, **kwargs: Any) -> list[JobEvent]:
            # The job ends right after the watcher read its events and found none new.
            nonlocal finished
            events = await read_events(job_id, **kwargs)
            if not events and not finished:
                finished = True
                await service.events.transition(job_id, JobState.SUCCEEDED, detail="done")
            return events

        monkeypatch.setattr(store, "events", events_then_finish)
        seen = [event async for event in service.watch(job.id)]
        states = [e.data.state for e in seen if e.kind == "state"]  # type: ignore[union-attr]
        assert states == [JobState.QUEUED, JobState.PROVISIONING, JobState.SUCCEEDED]
        assert seen[-1].terminal


async def test_a_watch_of_a_finished_job_sends_its_whole_record_and_ends(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db") as store, SqliteStore(tmp_path / "state.db") as state:
        service = service_of(tmp_path, store, state)
        job, _ = await store.create(agent="a", input=TurnInput.new("go"))
        await service.events.transition(job.id, JobState.CANCELLED, detail="by a user")
        seen = await asyncio.wait_for(_collect(service, job.id), 5)
        assert [e.seq for e in seen] == [1, 2] and seen[-1].terminal
        assert [e.seq for e in await _collect(service, job.id, after_seq=1)] == [2]
        assert await _collect(service, job.id, after_seq=2) == []


async def _collect(service: JobService, job_id: str, after_seq: int = 0) -> list[JobEvent]:
    return [event async for event in service.watch(job_id, after_seq)]
