"""Jobs and events cross the controller's wire unchanged; the token file is private."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airlock.controller import ControllerServerError, load_or_create_token
from airlock.jobs import Job, JobError, JobEvent, JobFilter, JobState, LogLine
from airlock.jobs import convert as jc
from airlock.jobs import event_wire as ew
from layer0 import Content, ExitReason, LogLevel, SessionId, TurnInput, TurnMetadata, TurnOutput


def _output(text: str, reason: ExitReason | None = None) -> TurnOutput:
    return TurnOutput(
        message=Content.text(text), exit_reason=reason or ExitReason.complete(), metadata=TurnMetadata.empty()
    )


def test_job_round_trips() -> None:
    when = datetime(2026, 11, 23, 10, 0, 0, 123456, tzinfo=UTC)
    job = Job(
        id="j1",
        agent="a",
        state=JobState.SUCCEEDED,
        input=TurnInput.new("hi", session=SessionId("s"), metadata={"big": 2**60, "f": 1.5}),
        output=_output("ok", ExitReason.max_turns()),
        error=None,
        queue="q",
        parent_id="j0",
        origin="delegate",
        workflow="wf",
        created_at=when,
        started_at=when,
        finished_at=when,
        max_duration_ms=90_000,
        children=["j2", "j3"],
        effects={"depth": 0, "outcomes": []},
    )
    assert jc.job_from_proto(jc.job_to_proto(job)) == job
    bare = job.model_copy(
        update={
            "output": None,
            "error": JobError(kind="timeout", message="late"),
            "started_at": None,
            "finished_at": None,
            "max_duration_ms": None,
            "effects": None,
            "parent_id": None,
        }
    )
    assert jc.job_from_proto(jc.job_to_proto(bare)) == bare


def test_every_state_has_a_wire_value() -> None:
    for state in JobState:
        assert jc.state_from_proto(jc.state_to_proto(state)) is state
    with pytest.raises(ValueError, match="unknown job state"):
        jc.state_from_proto(0)


def test_event_and_filter_round_trip() -> None:
    line = LogLine(level=LogLevel.INFO, message="x", source="controller", data={"n": 1})
    event = JobEvent(job_id="j", seq=3, time=datetime.now(UTC), data=line)
    assert ew.event_from_proto(ew.event_to_proto(event)) == event
    where = JobFilter(
        states=frozenset({JobState.QUEUED, JobState.FAILED}), agent="a", limit=7, before_id="j9"
    )
    assert jc.filter_from_proto(jc.filter_to_proto(where)) == where


def test_token_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "d" / "token"
    token, created = load_or_create_token(path)
    assert created and len(token) >= 40
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_token(path) == (token, False)
    path.write_text("")
    with pytest.raises(ControllerServerError, match="empty"):
        load_or_create_token(path)
