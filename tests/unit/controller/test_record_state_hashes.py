"""The records the controller writes itself (a job's input, an effect, a yield) carry state
hashes like a turn's: before, the thread's last state; after, that folded with the content."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from airlock.controller._job_events import JobEvents
from airlock.controller._job_records import JobRecords
from airlock.controller._weaving import Weaves
from airlock.jobs import EffectOutcome, Job, JobState
from airlock.state import InMemoryStore
from airlock.weave import RecordType, TurnRecord, content_digest, verify
from airlock.weave._hashing import EMPTY_STATE, folded_state
from layer0 import TurnInput

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _job() -> Job:
    return Job(
        id="j",
        agent="a",
        state=JobState.RUNNING,
        input=TurnInput.new("hi"),
        queue="q",
        workflow="j",
        created_at=T0,
    )


def _records(weaves: Weaves) -> JobRecords:
    return JobRecords(weaves, cast(JobEvents, SimpleNamespace(store=None)))


def _chained(record: TurnRecord, pre: str) -> None:
    assert record.state_hash_pre == pre
    assert record.state_hash_post == folded_state(pre, content_digest(record.content))


async def test_input_effect_and_yield_records_carry_chained_state_hashes() -> None:
    weaves = Weaves(InMemoryStore(), b"k" * 32)
    records, job = _records(weaves), _job()
    await records.record_input("j", job, job.input, None)
    outcome = EffectOutcome(index=0, effect="write_memory", status="ok")
    await records.effect_record(job, job, outcome, None)
    await weaves.record("j", job="j", agent="a", type=RecordType.THOUGHT, kind="turn", pre="s1", post="s2")
    content: dict[str, Any] = {"calls": []}
    await records.yield_record(job, "approval_requested", content)
    first, effect, turn, yielded = await weaves.thread("j", "j")
    _chained(first, EMPTY_STATE)
    _chained(effect, first.state_hash_post)
    assert (turn.state_hash_pre, turn.state_hash_post) == ("s1", "s2"), "a turn's own hashes stay"
    _chained(yielded, "s2")
    assert verify(await weaves.load("j"), b"k" * 32).ok
