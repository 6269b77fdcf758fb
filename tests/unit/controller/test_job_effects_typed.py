"""A job's effect report crosses the wire as a typed EffectReport (statuses as enums, a
child's follow-up report nested), not as JSON text, and comes back as the job recorded it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.jobs import EffectOutcome, EffectReport, Job, JobState
from airlock.jobs import convert as jc
from layer0 import AgentId, Content, ExitReason, TurnInput, TurnMetadata, TurnOutput

WHEN = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)


def _report() -> EffectReport:
    child_output = TurnOutput(
        message=Content.text("42"), exit_reason=ExitReason.complete(), metadata=TurnMetadata.empty()
    )
    follow_up = EffectReport(
        depth=1,
        outcomes=[EffectOutcome(index=0, effect="custom", status="unhandled", result={"n": 2**60, "f": 1.5})],
    )
    return EffectReport(
        depth=0,
        outcomes=[
            EffectOutcome(index=0, effect="write_memory", status="ok"),
            EffectOutcome(
                index=1,
                effect="delegate",
                status="ok",
                agent=AgentId("calc"),
                child_output=child_output,
                follow_up=follow_up,
            ),
            EffectOutcome(index=2, effect="signal", status="refused", detail="not granted"),
        ],
    )


def _job() -> Job:
    return Job(
        id="j1",
        agent="a",
        state=JobState.SUCCEEDED,
        input=TurnInput.new("hi"),
        queue="q",
        workflow="j1",
        created_at=WHEN,
        effects=_report().recorded(),
    )


def test_the_effect_report_is_typed_on_the_wire_and_round_trips() -> None:
    job = _job()
    message = jc.job_to_proto(job)
    effects = message.effects
    assert [o.status for o in effects.outcomes] == [
        cpb.EFFECT_STATUS_OK,
        cpb.EFFECT_STATUS_OK,
        cpb.EFFECT_STATUS_REFUSED,
    ]
    assert effects.outcomes[1].agent == "calc" and effects.outcomes[1].follow_up.depth == 1
    assert effects.outcomes[1].follow_up.outcomes[0].status == cpb.EFFECT_STATUS_UNHANDLED
    assert effects.outcomes[2].detail == "not granted"
    assert jc.job_from_proto(message) == job


def test_an_unspecified_effect_status_is_located() -> None:
    message = jc.job_to_proto(_job())
    message.effects.outcomes[1].follow_up.outcomes[0].status = cpb.EFFECT_STATUS_UNSPECIFIED
    with pytest.raises(
        wire.MalformedMessage, match=r"effects\.outcomes\[1\]\.follow_up\.outcomes\[0\]\.status"
    ):
        jc.job_from_proto(message)
