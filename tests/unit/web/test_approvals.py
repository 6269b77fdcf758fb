"""Approvals over HTTP on a job that really waits (process backend, scripted provider): the
pending list shows it, a reject needs a reason, an approval is recorded as the authenticated
principal and the job completes; a job of another tenant stays invisible."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from airlock.jobs import JobState
from airlock.testing import text_step, tool_step
from layer0 import TurnInput

from .world import World, process_agent, world

pytestmark = pytest.mark.timeout(120)

GATED = process_agent(
    [tool_step("bash", {"command": "echo hi"}, id="b1"), text_step("all done")],
    ("bash",),
    approval={"tools": ["bash"], "approvers": ["alice"]},
)


async def waiting(w: World, job_id: str) -> None:
    while (await w.service.get(job_id)).state is not JobState.AWAITING_APPROVAL:
        assert not (await w.service.get(job_id)).state.terminal
        await asyncio.sleep(0.05)


async def test_approve_over_http_as_the_authenticated_principal(tmp_path: Path) -> None:
    async with world(tmp_path, {"a": GATED, "ops": GATED}, workers=True) as w:
        job = await w.service.submit("ops", TurnInput.new("run it"), tenant="red", owner="alice")
        await waiting(w, job.id)
        async with w.client("bob") as bob:
            theirs = (await bob.get("/api/v1/approvals")).json()["pending"]
            assert job.id not in [p["id"] for p in theirs] and {p["tenant"] for p in theirs} <= {"blue"}
            assert (await bob.post(f"/api/v1/jobs/{job.id}/approve")).status_code == 404
        async with w.client("carol") as carol:
            pending = (await carol.get("/api/v1/approvals")).json()["pending"]
            mine = [p for p in pending if p["id"] == job.id]
            assert mine and mine[0]["may_decide"] is False
            assert mine[0]["approval"]["calls"][0]["name"] == "bash"
            refused = await carol.post(f"/api/v1/jobs/{job.id}/approve")
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "PERMISSION_DENIED"
        async with w.client("erin") as erin:  # an approver only: sees what she may decide on
            pending = (await erin.get("/api/v1/approvals")).json()["pending"]
            assert [p["may_decide"] for p in pending if p["id"] == job.id] == [True]
            assert (await erin.get("/api/v1/jobs")).status_code == 403, "listing jobs needs more"
        async with w.client("alice") as alice:
            pending = (await alice.get("/api/v1/approvals")).json()["pending"]
            assert [p["may_decide"] for p in pending if p["id"] == job.id] == [True]
            approved = await alice.post(f"/api/v1/jobs/{job.id}/approve", json={"comment": "fine"})
            assert approved.status_code == 200, approved.text
            decisions = approved.json()["approval"]["decisions"]
            assert [(d["approver"], d["comment"]) for d in decisions] == [("alice", "fine")]
        done = await w.service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        async with w.client("alice") as alice:
            again = await alice.post(f"/api/v1/jobs/{job.id}/approve")
            assert again.status_code == 409 and again.json()["error"]["code"] == "NOT_AWAITING"


async def test_reject_over_http_tells_the_model_why(tmp_path: Path) -> None:
    async with world(tmp_path, {"a": GATED, "ops": GATED}, workers=True) as w:
        job = await w.service.submit("ops", TurnInput.new("run it"), tenant="red", owner="alice")
        await waiting(w, job.id)
        async with w.client("alice") as alice:
            rejected = await alice.post(f"/api/v1/jobs/{job.id}/reject", json={"reason": "not today"})
            assert rejected.status_code == 200, rejected.text
            decision = rejected.json()["approval"]["decisions"][0]
            assert decision["approver"] == "alice"
        done = await w.service.wait(job.id)
        assert done.state.terminal
