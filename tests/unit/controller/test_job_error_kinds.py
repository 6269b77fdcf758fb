"""A job's error kind is a closed enum on the wire, with a ``retryable`` flag that tells a
retryable runner stop from a permanent failure (both read ``turn_error``)."""

from __future__ import annotations

from typing import get_args

import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.jobs import JobError, JobErrorKind
from airlock.jobs.convert import job_error_from_proto, job_error_to_proto
from layer0 import EnvError, HookError, OrchError, StateError, TurnError
from layer0._error import EnvErrorKind, OrchErrorKind, StateErrorKind, TurnErrorKind


def test_a_retryable_runner_stop_and_a_permanent_failure_differ() -> None:
    stopped = JobError.raised(EnvError.from_turn_error(TurnError.retryable("the runner stopped")))
    failed = JobError.raised(EnvError.from_turn_error(TurnError.non_retryable("bad request")))
    assert stopped.kind == failed.kind == JobErrorKind.TURN_ERROR
    assert (stopped.retryable, failed.retryable) == (True, False)
    assert job_error_to_proto(stopped) != job_error_to_proto(failed)
    assert job_error_to_proto(stopped).retryable is True


@pytest.mark.parametrize(
    ("kind", "retryable"),
    [("interrupted", True), ("provision_failed", True), ("cancelled", False), ("timeout", False)],
)
def test_each_kind_is_retryable_as_documented(kind: str, retryable: bool) -> None:
    assert JobError.of(kind, "x").retryable is retryable


def test_every_kind_round_trips_and_the_wire_has_no_other() -> None:
    for kind in JobErrorKind:
        for retryable in (False, True):
            error = JobError(kind=kind, message=f"m {kind}", retryable=retryable)
            assert job_error_from_proto(job_error_to_proto(error)) == error
    names = {n for n, _ in cpb.JobErrorKind.items() if n != "JOB_ERROR_KIND_UNSPECIFIED"}
    assert names == {f"JOB_ERROR_KIND_{k.value.upper()}" for k in JobErrorKind}


def test_an_unspecified_kind_is_malformed() -> None:
    with pytest.raises(wire.MalformedMessage, match=r"error\.kind"):
        job_error_from_proto(cpb.JobError(message="x"))


def test_every_layer0_kind_has_its_own_job_error_kind() -> None:
    raised = [
        *(TurnError(k, "m") for k in get_args(TurnErrorKind)),
        *(EnvError(k, "m") for k in get_args(EnvErrorKind)),
        *(OrchError(k, "m") for k in get_args(OrchErrorKind)),
        *(StateError(k, "m") for k in get_args(StateErrorKind)),
        HookError.failed("m") if hasattr(HookError, "failed") else HookError("failed", "m"),
    ]
    for error in raised:
        kind = JobError.raised(error).kind
        assert kind == error.kind or (error.kind, kind) == ("failed", JobErrorKind.HOOK_FAILED), error
    assert JobError.raised(RuntimeError("boom")).kind == JobErrorKind.CONTROLLER


def test_records_of_earlier_versions_still_read() -> None:
    assert JobError.model_validate({"kind": "timed_out", "message": "x"}).kind == JobErrorKind.TIMEOUT
    assert JobError.model_validate({"kind": "something new", "message": "x"}).kind == JobErrorKind.OTHER
    assert JobError.model_validate({"kind": "turn_error", "message": "x"}).retryable is False
