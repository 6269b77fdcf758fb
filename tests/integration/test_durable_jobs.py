"""Durable jobs in real Docker sandboxes: a controller killed with -9, a sandbox removed
mid-job, an approval across a restart, and pause/step/resume giving the same weave."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from airlock.controller import JobService
from airlock.jobs import ControllerClient, JobResumed, JobState, SandboxActivity
from airlock.sandbox.docker._labels import LABEL_SANDBOX
from airlock.testing import text_step, tool_step
from airlock.turn import ToolStarted
from airlock.weave import TurnRecord
from layer0 import TurnInput
from tests.support.containers import assert_none_left, my_containers
from tests.support.controller import (
    agent_config,
    controller_process,
    running_controller,
    running_service,
    write_config,
)

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


STEPS = [
    tool_step("bash", {"command": "echo one"}, id="c1"),
    tool_step("bash", {"command": "sleep 30; echo two"}, id="c2"),
    text_step("finished"),
]


@pytest.fixture
def no_leaks(docker_client: Any) -> Any:
    yield
    assert_none_left(docker_client)


def started(events: list[Any]) -> list[str]:
    return [
        e.data.event.tool_use_id
        for e in events
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolStarted)
    ]


def model_steps(records: list[TurnRecord]) -> list[int]:
    return [r.content["iteration"] for r in records if r.kind == "model_response"]  # type: ignore[index, call-overload]


@pytest.mark.attack("faults")
async def test_a_controller_killed_mid_job_resumes_it_without_repeating_a_model_or_tool_call(
    tmp_path: Path, state_dir: Path, runner_image: str, no_leaks: None
) -> None:
    data_dir = tmp_path / "data"
    config = write_config(tmp_path, {"steps": agent_config(STEPS, ["bash"])})
    async with controller_process(config, data_dir, state_dir, runner_image) as (proc, client):
        job = await client.submit("steps", "go")
        seen = [e async for e in _events_until(client, job.id, "c2")]
        assert "c2" in started(seen)
        proc.send_signal(signal.SIGKILL)  # mid-call: c2 is running in the sandbox
        await asyncio.to_thread(proc.wait)
    async with running_controller(config, data_dir, state_dir, runner_image) as (controller, client):
        assert controller.service.recovered == [], "resumed, not interrupted"
        done = await client.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert done.output is not None and done.output.message.joined_text() == "finished"
        assert done.resumes == 1
        events = [e async for e in client.watch(job.id)]
        assert started(events) == ["c1", "c2"], "c1 ran once; c2 (in flight) was answered as lost"
        resumed = [e.data for e in events if isinstance(e.data, JobResumed)]
        assert [(r.cause, r.iteration) for r in resumed] == [("restart", 2)]
        _, records = await client.weave(job.id)
        assert model_steps(records) == [1, 2, 3], "each model call made once"
        _, report, sealed = await client.verify(job.id)
        assert report.ok and sealed


async def _events_until(client: ControllerClient, job_id: str, call: str) -> Any:
    """The job's events, stopping once ``call`` started."""
    async for event in client.watch(job_id):
        yield event
        data = event.data
        if (
            isinstance(data, SandboxActivity)
            and isinstance(data.event, ToolStarted)
            and data.event.tool_use_id == call
        ):
            return


@pytest.mark.attack("faults")
async def test_a_sandbox_removed_mid_job_is_replaced_and_the_job_completes(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any, no_leaks: None
) -> None:
    config = write_config(
        tmp_path, {"steps": agent_config(STEPS, ["bash"], durability={"in_flight": "fail"})}
    )
    async with running_service(config, tmp_path / "data", state_dir, runner_image) as service:
        job = await service.submit("steps", TurnInput.new("go"))
        deadline = time.monotonic() + 90
        while "c2" not in started(await service.store.events(job.id, kind="sandbox")):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        [sandbox] = [c for c in my_containers(docker_client) if LABEL_SANDBOX in c.labels]
        await asyncio.to_thread(sandbox.remove, force=True)  # the node is gone, say
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert done.resumes == 1
        assert started(await service.store.events(job.id, kind="sandbox")) == ["c1", "c2"]
        _, records = await service.weave(job.id)
        assert model_steps(records) == [1, 2, 3]
        lost = next(r for r in records if r.kind == "tool_call" and r.content["tool_use_id"] == "c2")  # type: ignore[index, call-overload]
        assert lost.content["output"].startswith("lost: the sandbox was lost")  # type: ignore[index, call-overload]


async def test_an_approval_survives_a_restart_and_the_call_runs_in_a_fresh_sandbox(
    tmp_path: Path, state_dir: Path, runner_image: str, docker_client: Any, no_leaks: None
) -> None:
    steps = [tool_step("bash", {"command": "echo approved-run"}, id="g1"), text_step("ran it")]
    gated = agent_config(steps, ["bash"], approval={"tools": ["bash"], "approvers": ["alice"]})
    config = write_config(tmp_path, {"gated": gated})
    data_dir = tmp_path / "data"
    async with running_service(config, data_dir, state_dir, runner_image) as service:
        job = await service.submit("gated", TurnInput.new("go"))
        waiting = await _wait_state(service, job.id, JobState.AWAITING_APPROVAL)
        assert waiting.approval is not None and waiting.approval.calls[0].input == {
            "command": "echo approved-run"
        }
        assert my_containers(docker_client) == [], "a job waiting for a person holds no sandbox"
    async with running_service(config, data_dir, state_dir, runner_image) as service:
        await service.approve(job.id, "alice", "ok")
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        events = await service.store.events(job.id, kind="sandbox")
        outputs = [
            e.data.event.output
            for e in events
            if isinstance(e.data, SandboxActivity) and getattr(e.data.event, "type", "") == "tool_finished"
        ]
        assert len(outputs) == 1 and json.loads(outputs[0])["stdout"] == "approved-run\n"


async def _wait_state(service: JobService, job_id: str, state: JobState, within: float = 90) -> Any:
    deadline = time.monotonic() + within
    while True:
        job = await service.get(job_id)
        if job.state is state:
            return job
        assert not job.state.terminal, job.error
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


def _timeless(records: list[TurnRecord], job_id: str) -> list[dict[str, Any]]:
    """The records as compared across two runs: no time, hash or seal; the job id replaced."""
    out = []
    for record in records:
        text = json.dumps(record.timeless()).replace(job_id, "JOB")
        data = json.loads(text)
        out.append(data)
    return out


async def test_pause_step_resume_give_the_same_output_and_weave_as_an_uninterrupted_run(
    tmp_path: Path, state_dir: Path, runner_image: str, no_leaks: None
) -> None:
    steps = [
        tool_step("bash", {"command": "sleep 1; echo a"}, id="s1"),
        tool_step("bash", {"command": "echo b"}, id="s2"),
        tool_step("bash", {"command": "echo c"}, id="s3"),
        text_step("abc"),
    ]
    config = write_config(tmp_path, {"stepper": agent_config(steps, ["bash"])})
    async with running_service(config, tmp_path / "data", state_dir, runner_image) as service:
        plain = await service.wait((await service.submit("stepper", TurnInput.new("go"))).id)
        stepped = await service.submit("stepper", TurnInput.new("go"))
        deadline = time.monotonic() + 90
        while "s1" not in started(await service.store.events(stepped.id, kind="sandbox")):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        await service.pause(stepped.id)
        while not (await service.inspect(stepped.id)).paused:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        info, _ = await service.step(stepped.id)
        assert info.tools == ["bash"] and not info.complete
        info, _ = await service.step(stepped.id)
        assert info.tools == ["bash"]
        await service.resume(stepped.id)
        done = await service.wait(stepped.id)
        assert plain.output is not None and done.output is not None
        assert done.output.message == plain.output.message
        assert done.output.metadata.turns_used == plain.output.metadata.turns_used == 4
        _, plain_records = await service.weave(plain.id)
        _, stepped_records = await service.weave(stepped.id)
        assert _timeless(stepped_records, stepped.id) == _timeless(plain_records, plain.id)
