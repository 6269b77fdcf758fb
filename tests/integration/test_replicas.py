"""Controller replicas on one PostgreSQL: jobs submitted through any replica run once, and a
replica killed with -9 (twice) or paused past its lease loses no job: another adopts its jobs
(its sandboxes gone first) and resumes them from their last checkpoints; watchers move to a
survivor and see every event once. Real ``airlock serve`` processes, the process backend."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from airlock.jobs import ControllerClient, JobEvent, JobState
from airlock.testing import text_step, tool_step
from tests.support.replicas import ReplicaProcess, replicas, sandbox_processes

pytestmark = pytest.mark.timeout(300)


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


async def test_sixty_jobs_survive_two_replicas_killed(tmp_path: Path, postgres_dsn: str) -> None:
    config, data = _config(tmp_path, 2.0), tmp_path / "data"
    with replicas() as started:
        for _ in range(3):
            started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3"))
        clients = [r.client() for r in started]
        ids = [(await clients[i % 3].submit("worker", f"job {i}")).id for i in range(60)]
        survivor = clients[2]

        async def some_run_on(replica: ReplicaProcess) -> bool:
            running = [j for j in await survivor.find() if j.state is JobState.RUNNING]
            return len(running) >= 3

        await _until("jobs run", lambda: some_run_on(started[0]))
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
        started.append(ReplicaProcess(config, data, postgres_dsn, "--concurrency", "3"))
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
            events = await survivor.logs(job_id)
            assert [e.seq for e in events] == list(range(1, len(events) + 1))
            ends = [e for e in events if e.terminal]
            assert len(ends) == 1, f"{job_id} ended {len(ends)} times"
        assert sandbox_processes(set(ids)) == [], "no sandbox is left"
        assert [e.seq for e in seen] == list(range(1, len(seen) + 1)), "no gap, no duplicate"
        assert seen[-1].terminal
        for client in clients:
            await client.close()
