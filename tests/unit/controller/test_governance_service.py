"""The controller's governance of a turn, end to end on the process backend (a real runner
process, real gRPC, real SQLite): approvals (each strategy, a wrong approver, rejection,
timeout, a restart while waiting), durable resumes, signals and the turn records."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobNotAwaiting, JobService, NotAnApprover, SqliteJobStore
from airlock.jobs import ApprovalChanged, Job, JobResumed, JobState, SandboxActivity
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step
from airlock.turn import SessionState, ToolStarted
from airlock.weave import RecordType, TurnRecord
from layer0 import TurnInput

pytestmark = pytest.mark.timeout(120)

KEY = b"k" * 32


def agent(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "provider": {"kind": "scripted", "script": steps},
        "tools": tools,
        "backend": "process",
        "defaults": {"max_turns": 8, "max_duration": "60s"},
        **extra,
    }


TWO_STEPS = [
    tool_step("bash", {"command": "echo first"}, id="b1"),
    tool_step("bash", {"command": "echo second"}, id="b2"),
    text_step("all done"),
]


def write(tmp_path: Path, agents: dict[str, dict[str, Any]]) -> Path:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": agents}))
    return path


@contextlib.asynccontextmanager
async def service_of(tmp_path: Path, config: Path) -> AsyncIterator[JobService]:
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(config)), state, audit_key=KEY) as service,
    ):
        yield service


async def wait_state(service: JobService, job_id: str, state: JobState, within: float = 60) -> Job:
    deadline = time.monotonic() + within
    while True:
        job = await service.get(job_id)
        if job.state is state:
            return job
        assert not job.state.terminal, f"job ended {job.state} waiting for {state}: {job.error}"
        assert time.monotonic() < deadline, f"job still {job.state} waiting for {state}"
        await asyncio.sleep(0.02)


async def records(service: JobService, job_id: str) -> list[TurnRecord]:
    return (await service.weave(job_id))[1]


async def started_calls(service: JobService, job_id: str) -> list[str]:
    events = await service.store.events(job_id, kind="sandbox")
    return [
        e.data.event.tool_use_id
        for e in events
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolStarted)
    ]


def gated(approvers: list[str], strategy: str = "any", **more: Any) -> dict[str, Any]:
    return agent(
        TWO_STEPS,
        ["bash"],
        approval={"tools": ["bash"], "approvers": approvers, "strategy": strategy, **more},
    )


# -- approvals ------------------------------------------------------------------------------------


async def test_all_strategy_waits_for_every_approver_and_the_job_resumes_in_a_fresh_runner(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, {"ops": gated(["alice", "bob"], "all")})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("run it"))
        waiting = await wait_state(service, job.id, JobState.AWAITING_APPROVAL)
        assert waiting.approval is not None
        call = waiting.approval.calls[0]
        assert (call.tool_use_id, call.name, call.input, call.risks) == (
            "b1",
            "bash",
            {"command": "echo first"},
            ["destructive", "external"],
        )
        assert await started_calls(service, job.id) == [], "nothing ran before the approval"
        with pytest.raises(NotAnApprover, match="'mallory' is not an approver"):
            await service.approve(job.id, "mallory")
        still = await service.approve(job.id, "alice", "looks fine")
        assert still.state is JobState.AWAITING_APPROVAL
        assert still.approval is not None and [d.approver for d in still.approval.decisions] == ["alice"]
        await service.approve(job.id, "bob")
        second = await wait_state(service, job.id, JobState.AWAITING_APPROVAL)  # the next bash call
        assert second.approval is not None and second.approval.calls[0].tool_use_id == "b2"
        await service.approve(job.id, "alice")
        await service.approve(job.id, "bob")
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert done.output is not None and done.output.message.joined_text() == "all done"
        assert await started_calls(service, job.id) == ["b1", "b2"], "each call ran exactly once"
        assert done.resumes == 2
        weave = await records(service, job.id)
        yields = [r.kind for r in weave if r.type is RecordType.YIELD]
        assert (
            yields
            == ["approval_requested", "approval_decision", "approval_decision", "approval_resolved"] * 2
        )
        actions = [r for r in weave if r.kind == "tool_call"]
        assert [a.content["tool_use_id"] for a in actions] == ["b1", "b2"]  # type: ignore[index, call-overload]
        _, report = await service.verify(job.id)
        assert report.ok, report.breaks
        with pytest.raises(JobNotAwaiting):
            await service.approve(job.id, "alice")


async def test_a_rejection_answers_the_model_and_the_call_never_runs(tmp_path: Path) -> None:
    config = write(tmp_path, {"ops": gated(["alice"])})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("run it"))
        await wait_state(service, job.id, JobState.AWAITING_APPROVAL)
        await service.reject(job.id, "alice", "not on a Friday")
        await wait_state(service, job.id, JobState.AWAITING_APPROVAL)
        await service.approve(job.id, "alice")
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED
        assert await started_calls(service, job.id) == ["b2"]
        first = next(r for r in await records(service, job.id) if r.kind == "tool_call")
        assert first.content["is_error"] is True  # type: ignore[index, call-overload]
        assert first.content["output"].startswith("rejected by alice: not on a Friday")  # type: ignore[index, call-overload]


async def test_majority_and_any_decide_as_soon_as_the_outcome_is_certain(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        {"maj": gated(["a", "b", "c"], "majority"), "any": gated(["a", "b"], "any")},
    )
    async with service_of(tmp_path, config) as service:
        maj = await service.submit("maj", TurnInput.new("go"))
        await wait_state(service, maj.id, JobState.AWAITING_APPROVAL)
        await service.reject(maj.id, "a", "no")
        assert (await service.get(maj.id)).state is JobState.AWAITING_APPROVAL
        await service.reject(maj.id, "b", "no")  # two of three against: rejected
        job = await wait_state(service, maj.id, JobState.AWAITING_APPROVAL)
        assert job.approval is not None and job.approval.calls[0].tool_use_id == "b2"
        await service.cancel(maj.id)

        anyone = await service.submit("any", TurnInput.new("go"))
        await wait_state(service, anyone.id, JobState.AWAITING_APPROVAL)
        await service.approve(anyone.id, "b")
        job = await wait_state(service, anyone.id, JobState.AWAITING_APPROVAL)
        assert job.approval is not None and job.approval.calls[0].tool_use_id == "b2"
        cancelled = await service.cancel(anyone.id)
        assert cancelled.state is JobState.CANCELLED


@pytest.mark.parametrize(
    ("strategy", "decisions", "outcome"),
    [
        ("any", [("a", False)], "rejected"),  # one rejection settles `any` at once
        ("any", [("b", True)], "approved"),
        ("all", [("a", True), ("b", False)], "rejected"),
        ("all", [("b", False)], "rejected"),  # any rejection settles `all`
        ("all", [("a", True), ("b", True)], "approved"),
    ],
)
async def test_any_and_all_settle_on_the_first_decisive_decision(
    tmp_path: Path, strategy: str, decisions: list[tuple[str, bool]], outcome: str
) -> None:
    config = write(tmp_path, {"ops": gated(["a", "b"], strategy)})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("go"))
        await wait_state(service, job.id, JobState.AWAITING_APPROVAL)
        for who, approve in decisions:
            decided = await (service.approve(job.id, who) if approve else service.reject(job.id, who, "no"))
        assert decided.approval is not None and decided.approval.outcome == outcome
        assert decided.state is not JobState.AWAITING_APPROVAL, "the last decision settled the wait"
        nxt = await wait_state(service, job.id, JobState.AWAITING_APPROVAL)  # the job went on
        assert nxt.approval is not None and nxt.approval.calls[0].tool_use_id == "b2"
        await service.cancel(job.id)
        weave = await records(service, job.id)
        said = [r.content for r in weave if r.kind == "approval_decision"]
        audited = [(c["approver"], c["approve"]) for c in said]  # type: ignore[index, call-overload]
        assert audited == decisions, "who decided is recorded"
        resolved = [r.content["outcome"] for r in weave if r.kind == "approval_resolved"]  # type: ignore[index, call-overload]
        assert resolved == [outcome]
        first = next(r for r in weave if r.kind == "tool_call")
        assert first.content["tool_use_id"] == "b1"  # type: ignore[index, call-overload]
        if outcome == "approved":
            assert await started_calls(service, job.id) == ["b1"]
        else:
            assert await started_calls(service, job.id) == [], "the rejected call never ran"
            assert first.content["is_error"] is True  # type: ignore[index, call-overload]
            rejecter = next(who for who, approve in decisions if not approve)
            assert first.content["output"].startswith(f"rejected by {rejecter}: no")  # type: ignore[index, call-overload]


async def test_a_timeout_applies_the_default_decision(tmp_path: Path) -> None:
    config = write(tmp_path, {"ops": gated(["alice"], timeout="300ms", on_timeout="reject")})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("go"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED
        assert await started_calls(service, job.id) == [], "both calls were rejected by the timeout"
        decisions = [
            e.data.decision
            for e in await service.store.events(job.id, kind="approval")
            if isinstance(e.data, ApprovalChanged) and e.data.decision is not None
        ]
        assert [(d.approver, d.approve, d.automatic) for d in decisions] == [("policy", False, True)] * 2


async def test_no_approvers_approve_at_once_and_the_decision_is_recorded(tmp_path: Path) -> None:
    config = write(tmp_path, {"ops": agent(TWO_STEPS, ["bash"], approval={"tools": ["bash"]})})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("go"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED
        states = [e.data.state for e in await service.store.events(job.id, kind="state")]  # type: ignore[union-attr]
        assert JobState.AWAITING_APPROVAL not in states
        assert await started_calls(service, job.id) == ["b1", "b2"]
        yields = [r for r in await records(service, job.id) if r.kind == "approval_decision"]
        assert [r.content["approver"] for r in yields] == ["policy", "policy"]  # type: ignore[index, call-overload]


async def test_a_restart_while_waiting_keeps_the_wait_and_the_approved_job_completes(tmp_path: Path) -> None:
    config = write(tmp_path, {"ops": gated(["alice"])})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("go"))
        await wait_state(service, job.id, JobState.AWAITING_APPROVAL)
    async with service_of(tmp_path, config) as service:  # a new controller, the same stores
        assert (await service.get(job.id)).state is JobState.AWAITING_APPROVAL
        await service.approve(job.id, "alice")
        await wait_state(service, job.id, JobState.AWAITING_APPROVAL)
        await service.approve(job.id, "alice")
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED
        assert await started_calls(service, job.id) == ["b1", "b2"]
        _, report = await service.verify(job.id)
        assert report.ok


# -- durable jobs ---------------------------------------------------------------------------------


def runner_pids() -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                # this test's runners only: another test's (or session's) are not ours to kill
                ours = f"--exit-with-parent\0{os.getpid()}\0".encode()
                if b"-m\0airlock.runner" in cmdline and ours in cmdline:
                    pids.add(int(entry))
    return pids


@pytest.mark.parametrize("in_flight", ["fail", "rerun"])
async def test_a_killed_runner_is_resumed_without_repeating_finished_work(
    tmp_path: Path, in_flight: str
) -> None:
    side = tmp_path / "side-effects.log"  # the process backend's tools write the host's files
    steps = [
        tool_step("bash", {"command": f"echo one >> {side}"}, id="c1"),
        tool_step("bash", {"command": f"echo two-started >> {side}; sleep 30; echo two >> {side}"}, id="c2"),
        text_step("finished"),
    ]
    config = write(tmp_path, {"slow": agent(steps, ["bash"], durability={"in_flight": in_flight})})
    before = runner_pids()
    async with service_of(tmp_path, config) as service:
        job = await service.submit("slow", TurnInput.new("go"))
        deadline = time.monotonic() + 30
        # c2's command is under way (its start event comes before the command runs)
        while not side.exists() or "two-started" not in side.read_text():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        victims = runner_pids() - before
        assert victims
        for pid in victims:
            os.kill(pid, signal.SIGKILL)  # the sandbox is lost mid-call
        if in_flight == "rerun":  # the rerun would sleep 30 s again: shorten the wait by cancelling
            resumed = await wait_resume(service, job.id)
            assert resumed.cause == "lost" and resumed.lost_calls == ["c2"], resumed
            while side.read_text().count("two-started") < 2:  # the rerun c2 is under way
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            await service.cancel(job.id)
            assert await started_calls(service, job.id) == ["c1", "c2", "c2"]
            assert side.read_text().splitlines() == ["one", "two-started", "two-started"], "c1 ran once"
            return
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert done.resumes == 1
        [resume] = [e.data for e in await service.store.events(job.id, kind="resume")]
        assert isinstance(resume, JobResumed) and resume.cause == "lost" and resume.lost_calls == ["c2"]
        assert await started_calls(service, job.id) == ["c1", "c2"], "c1 never ran again; c2 was not rerun"
        assert side.read_text() == "one\ntwo-started\n", "each side effect happened once"
        weave = await records(service, job.id)
        responses = [r for r in weave if r.kind == "model_response"]
        assert [r.content["iteration"] for r in responses] == [1, 2, 3], "one record per model call"  # type: ignore[index, call-overload]
        lost = next(r for r in weave if r.kind == "tool_call" and r.content["tool_use_id"] == "c2")  # type: ignore[index, call-overload]
        assert lost.content["output"].startswith("lost: the sandbox was lost")  # type: ignore[index, call-overload]
        assert [r.kind for r in weave].count("resume") == 1


async def wait_resume(service: JobService, job_id: str) -> JobResumed:
    deadline = time.monotonic() + 30
    while True:
        for event in await service.store.events(job_id, kind="resume"):
            assert isinstance(event.data, JobResumed)
            if "c2" in (await started_calls(service, job_id))[2:]:
                return event.data
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_a_resume_limit_stops_a_crash_loop(tmp_path: Path) -> None:
    kill_runner = (  # the topmost ancestor running airlock.runner (a fork of it supervises bash)
        'p=$PPID; top=; while [ "$p" -gt 1 ]; do '
        "if tr '\\0' ' ' < /proc/$p/cmdline | grep -q 'airlock.runner'; then top=$p; fi; "
        "p=$(awk '/^PPid/{print $2}' /proc/$p/status); done; kill -9 $top; sleep 5"
    )
    steps = [tool_step("bash", {"command": kill_runner}, id="k"), text_step("never")]
    config = write(
        tmp_path,
        {"crashy": agent(steps, ["bash"], durability={"in_flight": "rerun", "max_resumes": 2})},
    )
    async with service_of(tmp_path, config) as service:
        job = await service.submit("crashy", TurnInput.new("go"))
        done = await service.wait(job.id)
        assert done.state is JobState.FAILED
        assert done.error is not None and "max_resumes: 2" in done.error.message
        assert done.resumes == 2


# -- signals and controls -------------------------------------------------------------------------


async def test_a_signal_reaches_the_running_turn_at_its_next_boundary(tmp_path: Path) -> None:
    steps = [tool_step("bash", {"command": "sleep 1"}, id="s1"), text_step("noted")]
    config = write(tmp_path, {"ops": agent(steps, ["bash"])})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("go"), workflow="wf-1")
        deadline = time.monotonic() + 30
        while "s1" not in await started_calls(service, job.id):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        count, delivered = await service.signal("wf-1", "feedback", "use the staging database")
        assert count == 1 and delivered == [job.id]
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED
        saved = await service.store.checkpoint(job.id)
        assert saved is not None
        state = SessionState.model_validate_json(saved[0])
        seen = [p for m in state.messages for p in m.content if getattr(p, "text", "").startswith("[signal")]
        assert [p.text for p in seen] == ["[signal feedback] use the staging database"]  # type: ignore[attr-defined]
        kinds = [r.kind for r in await records(service, job.id)]
        assert "signal" in kinds


async def test_pause_step_resume_reach_the_runner_and_inspect_shows_the_session(tmp_path: Path) -> None:
    steps = [
        tool_step("bash", {"command": "sleep 0.5"}, id="p1"),
        tool_step("bash", {"command": "sleep 1; echo 2"}, id="p2"),
        text_step("done"),
    ]
    config = write(tmp_path, {"ops": agent(steps, ["bash"])})
    async with service_of(tmp_path, config) as service:
        job = await service.submit("ops", TurnInput.new("go"))
        with pytest.raises(JobNotAwaiting):
            await service.step(job.id)  # not running yet (or not paused)
        deadline = time.monotonic() + 30
        while "p1" not in await started_calls(service, job.id):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        await service.pause(job.id)
        while not (await service.inspect(job.id)).paused:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        seen = await service.inspect(job.id)
        assert seen.state is not None and seen.state.iterations == 1 and seen.running
        info, events = await service.step(job.id)
        assert (info.complete, info.tools) == (False, ["bash"])
        assert any(isinstance(e.data, SandboxActivity) for e in events)
        after = await service.inspect(job.id)
        # right after a step, inspect shows the step's end: its call answered, none pending
        assert after.state is not None and after.state.iterations == 2
        assert after.pending == []
        p2 = [json.loads(c.output)["stdout"] for c in after.state.completed if c.tool_use_id == "p2"]
        assert p2 == ["2\n"]
        await service.resume(job.id)
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED and done.output is not None
        assert done.output.message.joined_text() == "done"
