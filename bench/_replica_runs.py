"""Real ``airlock serve`` processes on SQLite or one PostgreSQL, for ``bench/replicas.py``: a batch
of jobs submitted round-robin through them (throughput, submit→start), and a replica killed with
-9 (failover: kill → its jobs RUNNING again on a survivor)."""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock.jobs import ControllerClient, Job, JobState
from airlock.testing import text_step, tool_step
from bench._common import pct
from tests.support.replicas import ReplicaProcess as Replica

AGENT = "bench-replica"


def write_config(where: Path, sleep_s: float | None = None) -> Path:
    """The agent's configuration: process backend; one model call and no tool, or (``sleep_s``)
    one bash ``sleep`` (rerun after a failover), then the answer."""
    steps = [text_step("done")]
    if sleep_s is not None:
        steps.insert(0, tool_step("bash", {"command": f"sleep {sleep_s}"}, id="t"))
    agent = {
        "provider": {"kind": "scripted", "script": steps},
        "tools": ["bash"] if sleep_s is not None else [],
        "backend": "process",
        "defaults": {"max_turns": 4, "max_duration": "300s"},
        "durability": {"in_flight": "rerun", "max_resumes": 5},
    }
    where.mkdir(parents=True, exist_ok=True)
    path = where / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": {AGENT: agent}}), encoding="utf-8")
    return path


async def start(
    n: int, config: Path, data: Path, dsn: str | None, concurrency: int, lease_s: float
) -> list[Replica]:
    """``n`` replicas sharing ``data`` (token, audit key) and the store, started one after another."""
    started: list[Replica] = []
    extra = ("--concurrency", str(concurrency))
    for _ in range(n):
        started.append(await asyncio.to_thread(Replica, config, data, dsn, *extra, lease_s=lease_s))
    return started


async def stop(replicas: list[Replica]) -> None:
    await asyncio.gather(*(asyncio.to_thread(r.stop) for r in replicas))


# -- throughput --------------------------------------------------------------------------------


@dataclass
class Batch:
    """One batch of jobs through ``replicas`` replicas on ``store``."""

    store: str
    replicas: int
    jobs: int
    records: list[Job] = field(default_factory=list, repr=False)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> list[Job]:
        return [j for j in self.records if j.state is JobState.SUCCEEDED and j.started_at and j.finished_at]

    @property
    def jobs_per_min(self) -> float | None:
        ok = self.ok
        if not ok:
            return None
        first = min(j.created_at for j in ok)
        last = max(j.finished_at for j in ok if j.finished_at is not None)
        return len(ok) / max((last - first).total_seconds(), 1e-9) * 60

    def _ms(self, end: str) -> list[float]:
        return [(getattr(j, end) - j.created_at).total_seconds() * 1000 for j in self.ok]

    def start_ms(self, q: float) -> float | None:
        values = self._ms("started_at")
        return (statistics.median(values) if q == 0.5 else pct(values, q)) if values else None

    def finish_ms_p50(self) -> float | None:
        values = self._ms("finished_at")
        return statistics.median(values) if values else None


async def run_batch(config: Path, data: Path, dsn: str | None, replicas: int, jobs: int) -> Batch:
    """Start ``replicas`` replicas (``--concurrency 4``), one warm-up job each, then ``jobs`` jobs
    submitted round-robin through them at once; every job record once all ended."""
    batch = Batch("sqlite" if dsn is None else "postgresql", replicas, jobs)
    started = await start(replicas, config, data, dsn, 4, 15.0)
    clients = [r.client() for r in started]
    try:
        warm = [await c.submit(AGENT, "warm-up") for c in clients]
        await asyncio.gather(*(clients[0].wait(j.id) for j in warm))
        ids = await asyncio.gather(*(clients[i % replicas].submit(AGENT, f"job {i}") for i in range(jobs)))
        outcomes = await asyncio.gather(
            *(clients[i % replicas].wait(j.id) for i, j in enumerate(ids)), return_exceptions=True
        )
        for o in outcomes:
            if isinstance(o, BaseException):
                batch.errors.append(f"{type(o).__name__}: {o}")
            else:
                batch.records.append(o)
                if o.state is not JobState.SUCCEEDED:
                    batch.errors.append(f"job {o.id} {o.state.value}")
    finally:
        for c in clients:
            await c.close()
        await stop(started)
    return batch


# -- failover ----------------------------------------------------------------------------------


@dataclass
class Failover:
    """A replica killed with -9 while running ``len(delays_s)`` jobs, and how long until each ran
    again on the survivor."""

    lease_s: float
    delays_s: list[float] = field(default_factory=list)
    #: Kill → the job's ``resume`` event (adopted by the survivor), per job.
    adopted_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _until(what: str, check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"timed out waiting until {what}")


async def _running_again(client: ControllerClient, job_id: str, after: float) -> tuple[float, float]:
    """Seconds from ``after`` (epoch) to the job's first ``resume`` event and to its first RUNNING
    state event after it."""
    resumed = float("nan")
    async for event in client.watch(job_id):
        at = event.time.timestamp() - after
        if at <= 0:
            continue
        if event.kind == "resume" and math.isnan(resumed):
            resumed = at
        if event.kind == "state" and getattr(event.data, "state", None) is JobState.RUNNING:
            return resumed, at
        if event.terminal:
            break
    raise RuntimeError(f"job {job_id} did not run again after the kill")


async def run_failover(config: Path, data: Path, dsn: str, lease_s: float, jobs: int = 4) -> Failover:
    """One replica runs ``jobs`` jobs (``--concurrency`` ``jobs``), an idle second one joins; the
    first is killed with -9; the delay of each job's next RUNNING (event time) after the kill."""
    result = Failover(lease_s)
    started = await start(1, config, data, dsn, jobs, lease_s)
    try:
        first = started[0].client()
        ids = [(await first.submit(AGENT, f"job {i}")).id for i in range(jobs)]

        async def all_running() -> bool:
            states = [(await first.get(i)).state for i in ids]
            return all(s is JobState.RUNNING for s in states)

        await _until("the first replica runs every job", all_running, 60)
        await first.close()
        started += await start(1, config, data, dsn, jobs, lease_s)
        survivor = started[1].client()
        await asyncio.sleep(1.0)  # the survivor has registered and renewed once
        killed_at = time.time()
        await asyncio.to_thread(started[0].kill)
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(_running_again(survivor, i, killed_at) for i in ids), return_exceptions=True),
            lease_s + 60,
        )
        await survivor.close()
        for o in outcomes:
            if isinstance(o, BaseException):
                result.errors.append(f"{type(o).__name__}: {o}")
            else:
                result.adopted_s.append(o[0])
                result.delays_s.append(o[1])
    finally:
        await stop(started)
    return result
