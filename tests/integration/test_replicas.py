"""Controller replicas on one PostgreSQL: jobs submitted through any replica run once, and a
replica killed with -9 (twice) or paused past its lease loses no job: another adopts its jobs
(its sandboxes gone first) and resumes them from their last checkpoints; watchers move to a
survivor and see every event once. Real ``airlock serve`` processes, on the process backend
(and the Docker backend: containers reaped)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from airlock.jobs import ControllerClient, ControllerError, EffectApplied, JobEvent, JobState, SignalRecorded
from airlock.testing import text_step, tool_step, tools_step
from tests.support.controller import agent_config, write_config
from tests.support.replicas import ReplicaProcess, replicas, runs_on, sandbox_processes

pytestmark = [pytest.mark.docker, pytest.mark.timeout(300)]


def _config(tmp_path: Path, seconds: float) -> Path:
    steps = [tool_step("bash", {"command": f"sleep {seconds}; echo done"}, id="t"), text_step("finished")]
    agent = {
        "provider": {"kind": "scripted", "script": steps},
        "tools": ["bash"],
        "backend": "process",
        "defaults": {"max_turns": 4, "max_duration": "120s"},
        "durability": {"in_flight": "rerun", "max_resumes": 5},
    }
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": {"worker": agent}}))
    return path


async def _until(what: str, check: object, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out waiting until {what}")


async def _states(client: ControllerClient, ids: list[str]) -> dict[str, JobState]:
    return {job_id: (await client.get(job_id)).state for job_id in ids}


def _leftovers(backend: str, ids: set[str], docker_client: Any) -> list[str]:
    """What is left of the sandboxes of ``ids``: processes (pids), or containers (their jobs)."""
    if backend == "process":
        return [str(pid) for pid in sandbox_processes(ids)]
    found = docker_client.api.containers(all=True, filters={"label": "airlock.job"})
    return [c["Labels"]["airlock.job"] for c in found if c["Labels"]["airlock.job"] in ids]


async def test_sixty_jobs_survive_two_replicas_killed(tmp_path: Path, postgres_dsn: str) -> None:
    await _sixty_jobs(tmp_path, postgres_dsn, _config(tmp_path, 2.0), "process", None)


async def test_sixty_docker_jobs_survive_two_replicas_killed(
    tmp_path: Path, postgres_dsn: str, runner_image: str, docker_client: Any
) -> None:
    steps = [tool_step("bash", {"command": "sleep 2; echo done"}, id="t"), text_step("finished")]
    durability = {"in_flight": "rerun", "max_resumes": 5}
    config = write_config(tmp_path, {"worker": agent_config(steps, ["bash"], durability=durability)})
    await _sixty_jobs(tmp_path, postgres_dsn, config, "docker", docker_client)


async def _sixty_jobs(
    tmp_path: Path, postgres_dsn: str, config: Path, backend: str, docker_client: Any
) -> None:
    """60 jobs through three replicas; two killed with -9 while they run (a third started
    between): every job succeeds once, a watcher moves to a survivor, no sandbox is left."""
    data = tmp_path / "data"
    with replicas() as started:
        # A lease that 9 sandboxes starting at once on 2 cores cannot stall past: this test is
        # about replicas killed, not about one falsely declared dead (the paused-replica test).
        for _ in range(3):
            started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3", lease_s=8.0))
        clients = [r.client() for r in started]
        ids = [(await clients[i % 3].submit("worker", f"job {i}")).id for i in range(60)]
        survivor = clients[2]

        async def some_run() -> bool:
            running = [j for j in await survivor.find() if j.state is JobState.RUNNING]
            return len(running) >= 3

        await _until("jobs run", some_run)
        # A watcher on the replica about to die follows a running job.
        watched = next(j.id for j in await clients[0].find() if j.state is JobState.RUNNING)
        seen: list[JobEvent] = []

        async def follow(client: ControllerClient, after: int) -> None:
            async for event in client.watch(watched, after_seq=after):
                seen.append(event)

        first_watch = asyncio.create_task(follow(clients[0], 0))
        await asyncio.sleep(0.5)
        started[0].kill()
        with pytest.raises(Exception):  # noqa: B017 - the stream breaks, however grpc names it
            await first_watch
        await follow(survivor, seen[-1].seq if seen else 0)  # reconnects to a survivor
        started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3", lease_s=8.0))
        await asyncio.sleep(3)
        started[1].kill()

        async def all_ended() -> bool:
            return all(s.terminal for s in (await _states(survivor, ids)).values())

        await _until("every job ended", all_ended, 240)
        final = [await survivor.get(job_id) for job_id in ids]
        assert [j.state for j in final] == [JobState.SUCCEEDED] * 60, [
            (j.id, j.state, j.error) for j in final if j.state is not JobState.SUCCEEDED
        ]
        assert sum(j.resumes for j in final) >= 1, "a killed replica's jobs were resumed elsewhere"
        for job_id in ids:
            events = [event async for event in survivor.watch(job_id)]
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            ends = [e for e in events if e.terminal]
            assert len(ends) == 1, f"{job_id} ended {len(ends)} times"
        assert _leftovers(backend, set(ids), docker_client) == [], "no sandbox is left"
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1)), "no gap, no duplicate"
        assert seen[-1].terminal
        for client in clients:
            await client.close()


async def _running_on(job_id: str, started: list[ReplicaProcess]) -> ReplicaProcess:
    found: list[ReplicaProcess] = []

    async def check() -> bool:
        owner = runs_on(job_id, started)
        if owner is not None:
            found.append(owner)
        return owner is not None

    await _until(f"{job_id} runs in a sandbox", check, 60)
    return found[-1]


async def test_a_paused_replica_is_fenced_and_lets_go(tmp_path: Path, postgres_dsn: str) -> None:
    config, data = _config(tmp_path, 6.0), tmp_path / "data"
    with replicas() as started:
        one = ReplicaProcess(config, data, postgres_dsn, "--concurrency", "2")
        started.append(one)
        client = one.client()
        job_id = (await client.submit("worker", "paused")).id
        assert await _running_on(job_id, started) is one
        two = ReplicaProcess(config, data, postgres_dsn, "--concurrency", "2")
        started.append(two)
        other = two.client()
        one.pause()  # past its lease of 3 s: the other replica adopts its job and resumes it
        await _until("the job is resumed by the other replica", lambda: _resumed_on(job_id, two, started), 60)
        one.cont()  # wakes up fenced: its writes are refused, it lets go
        done = await other.wait(job_id)
        assert done.state is JobState.SUCCEEDED and done.resumes == 1
        events = [event async for event in other.watch(job_id)]
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert len([e for e in events if e.terminal]) == 1

        async def let_go() -> bool:
            log = one.log.read_text()
            return "declared dead" in log or "no longer holds" in log

        await _until("the paused replica says it let go", let_go, 30)
        again = (await client.submit("worker", "after")).id  # and serves on, as a new member
        assert (await other.wait(again)).state is JobState.SUCCEEDED
        assert sandbox_processes({job_id, again}) == []
        await client.close()
        await other.close()


async def _resumed_on(job_id: str, replica: ReplicaProcess, started: list[ReplicaProcess]) -> bool:
    return runs_on(job_id, started) is replica


async def test_approvals_and_cancel_through_any_replica(tmp_path: Path, postgres_dsn: str) -> None:
    steps = [tool_step("bash", {"command": "sleep 30"}, id="long"), text_step("finished")]
    gated = {
        "provider": {
            "kind": "scripted",
            "script": [tool_step("bash", {"command": "echo ok"}), text_step("ok")],
        },
        "tools": ["bash"],
        "backend": "process",
        "approval": {"tools": ["bash"], "approvers": ["admin"]},
    }
    slow = {"provider": {"kind": "scripted", "script": steps}, "tools": ["bash"], "backend": "process"}
    config = tmp_path / "airlock.yaml"
    config.write_text(json.dumps({"version": 1, "agents": {"gated": gated, "slow": slow}}))
    data = tmp_path / "data"
    with replicas() as started:
        for _ in range(2):
            started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "2"))
        a, b = (r.client() for r in started)
        job = await a.submit("gated", "needs a yes")

        async def waiting() -> bool:
            now = await b.get(job.id)
            assert not now.state.terminal, (now.state, now.error)
            return now.state is JobState.AWAITING_APPROVAL

        await _until("the job waits for approval", waiting, 60)
        await b.approve(job.id, "yes, through the other replica")
        assert (await a.wait(job.id)).state is JobState.SUCCEEDED

        long = await a.submit("slow", "runs long")
        owner = await _running_on(long.id, started)
        elsewhere = a if owner is started[1] else b
        cancelled = await elsewhere.cancel(long.id, "through the replica not running it")
        assert cancelled.state is JobState.CANCELLED

        async def gone() -> bool:
            return sandbox_processes({long.id}) == []

        await _until("the running replica let go of it and removed its sandbox", gone, 30)
        assert (await a.get(long.id)).state is JobState.CANCELLED
        await a.close()
        await b.close()


async def test_pause_step_inspect_signal_and_resume_through_the_other_replica(
    tmp_path: Path, postgres_dsn: str
) -> None:
    steps = [
        tool_step("bash", {"command": "sleep 3; echo one"}, id="one"),
        tool_step("bash", {"command": "echo two"}, id="two"),
        tool_step("bash", {"command": "echo three"}, id="three"),
        text_step("done"),
    ]
    agent = {"provider": {"kind": "scripted", "script": steps}, "tools": ["bash"], "backend": "process"}
    config = tmp_path / "airlock.yaml"
    config.write_text(json.dumps({"version": 1, "agents": {"stepper": agent}}))
    data = tmp_path / "data"
    with replicas() as started:
        for _ in range(2):
            started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "2"))
        clients = [r.client() for r in started]
        job = await clients[0].submit("stepper", "step me")
        owner = await _running_on(job.id, started)
        other = clients[1] if owner is started[0] else clients[0]

        async def pause_accepted() -> bool:
            try:
                await other.pause(job.id)
            except ControllerError as e:
                assert "no turn running" in str(e) or "no running execution" in str(e), e  # not yet running
                return False
            return True

        await _until("the owner accepts the relayed pause", pause_accepted, 60)

        async def paused() -> bool:
            return (await other.inspect(job.id)).paused

        await _until("the turn pauses at its next step boundary", paused, 60)
        seen = await other.inspect(job.id)
        assert seen.running and seen.state is not None
        count, reached = await other.signal(job.workflow, "ping", {"n": 1})
        assert count == 1 and reached == [job.id], "the signal reached the turn in the other replica"
        info, _ = await other.step(job.id)
        assert not info.complete and info.tools, info
        await other.resume(job.id)
        done = await other.wait(job.id)
        assert done.state is JobState.SUCCEEDED
        kinds = [e.kind for e in await other.logs(job.id)]
        assert kinds, "the controls' log lines are on the job"
        for client in clients:
            await client.close()


@pytest.mark.parametrize("leaving", ["killed", "stopped"])
async def test_a_replica_leaving_while_applying_effects_applies_none_twice(
    tmp_path: Path, postgres_dsn: str, leaving: str
) -> None:
    """The replica applying a job's effects dies (kill -9) or stops (SIGTERM, a rolling update)
    while the delegate's child runs: another adopts the job and applies the rest once (the
    memory write and the signal before the delegate are not applied again, the child is reused
    and resumed, not created twice); a stop hands the job over instead of interrupting it."""
    planner = {
        "provider": {
            "kind": "scripted",
            "script": [
                tools_step(
                    [
                        ("write_memory", {"key": "before", "value": 1, "scope": "global"}),
                        ("signal", {"target": "wf-x", "signal_type": "ping", "data": {"n": 1}}),
                        ("delegate", {"agent": "worker", "message": "take your time"}),
                        ("write_memory", {"key": "after", "value": 2, "scope": "global"}),
                    ]
                ),
                text_step("planned"),
            ],
        },
        "tools": ["write_memory", "signal", "delegate"],
        "backend": "process",
        "effects": {"memory": ["global"], "signal": ["wf-x"], "delegate": ["worker"]},
    }
    worker = {
        "provider": {
            "kind": "scripted",
            "script": [tool_step("bash", {"command": "sleep 8; echo sub"}, id="w"), text_step("subdone")],
        },
        "tools": ["bash"],
        "backend": "process",
        "durability": {"in_flight": "rerun", "max_resumes": 3},
    }
    config = tmp_path / "airlock.yaml"
    config.write_text(json.dumps({"version": 1, "agents": {"planner": planner, "worker": worker}}))
    data = tmp_path / "data"
    with replicas() as started:
        for _ in range(2):
            started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "2"))
        clients = [r.client() for r in started]
        job = await clients[0].submit("planner", "plan")

        async def child_runs() -> bool:
            children = (await clients[0].get(job.id)).children
            return bool(children) and runs_on(children[0], started) is not None

        await _until("the delegate's child runs", child_runs, 60)
        (child_id,) = (await clients[0].get(job.id)).children
        owner = runs_on(child_id, started)
        assert owner is not None
        assert (await clients[0].get(job.id)).state is JobState.APPLYING_EFFECTS
        if leaving == "killed":
            owner.kill()
        else:
            owner.stop()
            assert owner.proc.returncode == 0, owner.log.read_text()
        survivor = clients[1] if owner is started[0] else clients[0]
        done = await survivor.wait(job.id)
        assert done.state is JobState.SUCCEEDED, (done.state, done.error)
        assert done.children == [child_id], "the child was reused, not created again"
        child = await survivor.get(child_id)
        assert child.state is JobState.SUCCEEDED and child.resumes == 1
        events = [event async for event in survivor.watch(job.id)]
        applied = [
            (e.data.outcome.index, e.data.outcome.effect)
            for e in events
            if isinstance(e.data, EffectApplied) and e.data.depth == 0 and e.data.job is None
        ]
        assert sorted(applied) == [(0, "write_memory"), (1, "signal"), (2, "delegate"), (3, "write_memory")]
        signals = [e for e in events if isinstance(e.data, SignalRecorded)]
        assert [s.data.count for s in signals] == [1], "the signal was recorded once"  # type: ignore[union-attr]
        for client in clients:
            await client.close()


async def test_a_rolling_update_hands_running_jobs_over(tmp_path: Path, postgres_dsn: str) -> None:
    """SIGTERM (what a rolling update sends) stops a replica cleanly: its running jobs are queued
    again and another replica resumes them from their last checkpoints."""
    config, data = _config(tmp_path, 5.0), tmp_path / "data"
    with replicas() as started:
        leaving = ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3")
        started.append(leaving)
        client = leaving.client()
        ids = [(await client.submit("worker", f"job {i}")).id for i in range(3)]

        async def all_run_here() -> bool:
            return all(runs_on(job_id, [leaving]) is leaving for job_id in ids)

        await _until("the jobs run in the replica about to leave", all_run_here, 60)
        staying = ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3")
        started.append(staying)
        other = staying.client()
        leaving.stop()
        assert leaving.proc.returncode == 0, leaving.log.read_text()
        for job_id in ids:
            done = await other.wait(job_id)
            assert done.state is JobState.SUCCEEDED and done.resumes == 1, (done.state, done.error)
        assert sandbox_processes(set(ids)) == []
        await client.close()
        await other.close()


async def test_docker_sandboxes_of_a_killed_replica_are_reaped_and_its_jobs_resumed(
    tmp_path: Path, postgres_dsn: str, runner_image: str, docker_client: Any
) -> None:
    """The Docker backend: a replica killed with -9 leaves running containers; a survivor
    removes them before it resumes their jobs, and no container of any job is left."""
    steps = [tool_step("bash", {"command": "sleep 4; echo done"}, id="t"), text_step("finished")]
    agent = agent_config(steps, ["bash"], durability={"in_flight": "rerun", "max_resumes": 3})
    config = write_config(tmp_path, {"worker": agent})
    data = tmp_path / "data"
    with replicas() as started:
        for _ in range(2):
            started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3"))
        clients = [r.client() for r in started]
        ids = [(await clients[i % 2].submit("worker", f"job {i}")).id for i in range(8)]

        def containers() -> list[str]:
            return _leftovers("docker", set(ids), docker_client)

        async def running() -> bool:
            return len(containers()) >= 4

        await _until("containers run jobs", running, 120)
        started[0].kill()
        survivor = clients[1]
        final = [await survivor.wait(job_id) for job_id in ids]
        assert [j.state for j in final] == [JobState.SUCCEEDED] * 8, [(j.id, j.state, j.error) for j in final]
        assert any(j.resumes for j in final), "the killed replica's jobs were resumed"
        assert containers() == [], "no container of any job is left"
        for client in clients:
            await client.close()
