"""Approval waits, fixed-point runs, resumes and turn records cross the controller's wire
unchanged (a fixed-point run's outputs stay on the controller); bad values are malformed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.behaviour import ApprovalDecision
from airlock.jobs import FixedPointRun, Job, JobState
from airlock.jobs import convert as jc
from airlock.weave import RecordType
from airlock.wire import MalformedMessage
from layer0 import Content, ExitReason, TurnMetadata, TurnOutput

from .test_api_governance import T0, awaiting_job, weave_records


def _through_the_wire(job: Job) -> Job:
    message = jc.job_to_proto(job)
    again = type(message)()
    again.ParseFromString(message.SerializeToString())
    return jc.job_from_proto(again)


def test_a_job_waiting_for_approval_round_trips() -> None:
    job = awaiting_job()
    assert _through_the_wire(job) == job and job.approval is not None
    decided = job.model_copy(
        update={
            "state": JobState.QUEUED,
            "approval": job.approval.model_copy(
                update={
                    "decisions": [
                        ApprovalDecision(approver="ana", approve=True, comment="ok", time=T0),
                        ApprovalDecision(approver="policy", approve=False, time=T0, automatic=True),
                    ],
                    "outcome": "rejected",
                    "strategy": "majority",
                    "on_timeout": "approve",
                }
            ),
        }
    )
    assert _through_the_wire(decided) == decided
    assert _through_the_wire(job.model_copy(update={"approval": None, "resumes": 0})).approval is None


def test_a_fixed_point_run_round_trips_without_its_outputs() -> None:
    output = TurnOutput(
        message=Content.text("x"), exit_reason=ExitReason.complete(), metadata=TurnMetadata.empty()
    )
    running = FixedPointRun(max_iterations=7, window=2, hashes=[("sha256:a", "sha256:b")], outputs=[output])
    job = awaiting_job().model_copy(update={"approval": None, "fixed_point": running})
    back = _through_the_wire(job)
    assert back.fixed_point == running.model_copy(update={"outputs": []})
    assert back == job.model_copy(update={"fixed_point": back.fixed_point})
    done = running.model_copy(
        update={"hashes": [("a", "b"), ("b", "b")], "exit": "stable", "chosen": 0, "outputs": []}
    )
    assert _through_the_wire(job.model_copy(update={"fixed_point": done})).fixed_point == done


def test_a_bad_approval_or_fixed_point_is_malformed() -> None:
    message = jc.job_to_proto(awaiting_job())
    message.approval.on_timeout = 9  # type: ignore[assignment]
    with pytest.raises(MalformedMessage, match=r"approval\.on_timeout"):
        jc.job_from_proto(message)
    message = jc.job_to_proto(awaiting_job())
    message.approval.outcome = 7
    with pytest.raises(MalformedMessage, match=r"approval\.outcome: unknown approval outcome 7"):
        jc.job_from_proto(message)
    message = jc.job_to_proto(awaiting_job().model_copy(update={"fixed_point": FixedPointRun()}))
    message.fixed_point.exit = 9  # type: ignore[assignment]
    with pytest.raises(MalformedMessage, match=r"fixed_point\.exit"):
        jc.job_from_proto(message)
    message = jc.job_to_proto(awaiting_job())
    message.approval.strategy = cpb.APPROVAL_STRATEGY_UNSPECIFIED
    with pytest.raises(MalformedMessage, match=r"approval\.strategy"):
        jc.job_from_proto(message)
    message = jc.job_to_proto(awaiting_job())
    message.origin = cpb.JOB_ORIGIN_UNSPECIFIED
    with pytest.raises(MalformedMessage, match=r"origin"):
        jc.job_from_proto(message)


@pytest.mark.parametrize("key", [None, b"audit-key"], ids=["unsealed", "sealed"])
def test_every_turn_record_round_trips(key: bytes | None) -> None:
    records = weave_records(key)
    assert {r.type for r in records} == set(RecordType)
    assert any(r.cost for r in records) and any(r.prev_hash is None for r in records)
    for record in records:
        message = jc.record_to_proto(record)
        again = type(message)()
        again.ParseFromString(message.SerializeToString())
        assert jc.record_from_proto(again) == record
        assert (record.seal is not None) is (key is not None)


def test_a_records_cost_keeps_its_scale_and_null_content_stays_null() -> None:
    record = weave_records()[0].model_copy(update={"cost": Decimal("0.0100"), "content": None})
    back = jc.record_from_proto(jc.record_to_proto(record))
    assert back == record and str(back.cost) == "0.0100" and back.content is None


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("type", 0, "record.type: required"),
        ("type", 42, "record.type: unknown record type 42"),
        ("cost", "cheap", "record.cost"),
        ("n", 0, "record.n"),
    ],
)
def test_a_bad_record_is_malformed(field: str, value: object, says: str) -> None:
    message = jc.record_to_proto(weave_records()[0])
    setattr(message, field, value)
    with pytest.raises(MalformedMessage, match=says):
        jc.record_from_proto(message)


def test_until_stable_zero_means_the_defaults_and_bounds_are_checked() -> None:
    message = jc.until_stable_to_proto(FixedPointRun(max_iterations=4, window=2))
    assert jc.until_stable_from_proto(message) == FixedPointRun(max_iterations=4, window=2)
    assert jc.until_stable_from_proto(type(message)()) == FixedPointRun(max_iterations=10, window=3)
    with pytest.raises(MalformedMessage, match=r"until_stable\.window"):
        jc.until_stable_from_proto(type(message)(window=1))
