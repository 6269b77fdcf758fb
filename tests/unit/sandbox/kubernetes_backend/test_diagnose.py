"""Reading pod status: what fails a start at once, what waits, and how it is described."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airlock.sandbox.kubernetes._diagnose import describe_pod, oom_killed, start_failure
from airlock.sandbox.kubernetes._owner import lease_expired, micro_time


def pod(phase: str = "Pending", *, reason: str | None = None, containers: list[dict[str, Any]] | None = None,
        conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:  # fmt: skip
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": containers or [],
        "conditions": conditions or [],
    }
    if reason:
        status["reason"] = reason
    return {"metadata": {"name": "airlock-sb-1"}, "status": status}


def waiting(reason: str) -> dict[str, Any]:
    return {"name": "runner", "state": {"waiting": {"reason": reason, "message": f"{reason} detail"}}}


def terminated(reason: str, code: int) -> dict[str, Any]:
    return {"name": "runner", "state": {"terminated": {"reason": reason, "exitCode": code}}}


@pytest.mark.parametrize(
    "reason", ["ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "CrashLoopBackOff"]
)
def test_hopeless_waiting_fails_at_once(reason: str) -> None:
    assert start_failure(pod(containers=[waiting(reason)])) == f"container runner: {reason}"


def test_still_creating_and_unschedulable_wait() -> None:
    assert start_failure(pod(containers=[waiting("ContainerCreating")])) is None
    unschedulable = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes",
    }
    assert start_failure(pod(conditions=[unschedulable])) is None
    assert "condition PodScheduled=False: Unschedulable 0/3 nodes" in describe_pod(
        pod(conditions=[unschedulable]), []
    )


def test_failed_and_deadline_exceeded_pods_fail() -> None:
    assert start_failure(pod("Failed", reason="DeadlineExceeded")) == "the pod failed (DeadlineExceeded)"
    assert start_failure(pod("Succeeded")) == "the pod succeeded (the runner exited)"
    assert "exited with code 1" in str(start_failure(pod("Running", containers=[terminated("Error", 1)])))


def test_oom_killed_now_or_in_the_last_state() -> None:
    assert oom_killed(pod("Failed", containers=[terminated("OOMKilled", 137)]))
    restarted = {
        "name": "runner",
        "state": {"running": {}},
        "lastState": {"terminated": {"reason": "OOMKilled"}},
    }
    assert oom_killed(pod("Running", containers=[restarted]))
    assert not oom_killed(pod("Failed", containers=[terminated("Error", 1)]))


def test_description_lists_phase_states_and_the_last_events_in_order() -> None:
    events = [
        {
            "type": "Warning",
            "reason": f"Failed{i}",
            "message": f"m{i}",
            "lastTimestamp": f"2026-11-23T10:00:{i:02d}Z",
        }
        for i in range(12)
    ]
    text = describe_pod(pod("Pending", containers=[waiting("ImagePullBackOff")]), list(reversed(events)))
    lines = text.splitlines()
    assert lines[0] == "phase: Pending"
    assert "container runner: waiting ImagePullBackOff ImagePullBackOff detail" in lines
    assert [line for line in lines if line.startswith("event")] == [
        f"event Warning Failed{i}: m{i}" for i in range(4, 12)
    ]


def test_lease_expiry() -> None:
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    lease = {"spec": {"renewTime": micro_time(now - timedelta(seconds=30)), "leaseDurationSeconds": 60}}
    assert not lease_expired(lease, now)
    assert lease_expired(lease, now + timedelta(seconds=31))
    assert lease_expired({"spec": {}}, now)
    assert lease_expired({"spec": {"renewTime": "yesterday", "leaseDurationSeconds": 60}}, now)
    assert micro_time(now) == "2026-11-23T12:00:00.000000Z"
