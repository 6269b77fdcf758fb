"""The runs of ``bench/capacity.py``: one ``airlock serve`` (kubernetes backend on the stand-in,
its store one fresh PostgreSQL database) per case; what a batch of jobs cost, and what the
controller costs while K jobs run at once."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airlock.jobs import ControllerClient, Job, JobState
from airlock.testing import KubeApiStandIn
from bench import _capacity_cluster as cc
from bench import _replica_runs as rr
from bench._capacity_probe import Key, Proc, Store, count

#: Seconds PostgreSQL may hold a backend's statistics before publishing them (an idle backend
#: flushes within 10 s): the last snapshot of a window waits this long.
STATS_FLUSH_S = 11.0
JOB_LABEL = "airlock.dev/job"


@dataclass
class Window:
    """What one stretch of time cost: API requests, controller CPU, store writes."""

    seconds: float
    requests: Counter[Key]
    cpu_s: float
    rss_mib: float
    store: Store

    def rate(self) -> dict[Key, float]:
        return {k: v / self.seconds for k, v in self.requests.items()}


class Meter:
    """Snapshots of the stand-in's request log, the controller's process and the database."""

    def __init__(self, api: KubeApiStandIn, pid: int, dsn: str) -> None:
        self.api, self.pid, self.dsn = api, pid, dsn
        self._at = 0.0
        self._n = 0
        self._proc = Proc(0, 0)
        self._store = Store(0, 0)

    async def mark(self) -> None:
        self._store = await Store.of(self.dsn)
        self._at, self._n, self._proc = time.monotonic(), len(self.api.requests), Proc.of(self.pid)

    async def window(self) -> Window:
        """Since the last :meth:`mark` (which this also moves here)."""
        at, n, proc = time.monotonic(), len(self.api.requests), Proc.of(self.pid)
        store = await Store.of(self.dsn)
        found = Window(
            at - self._at,
            count(self.api.requests[self._n : n]),
            proc.cpu_s - self._proc.cpu_s,
            proc.rss_mib,
            store.minus(self._store),
        )
        self._at, self._n, self._proc, self._store = at, n, proc, store
        return found


@dataclass
class Case:
    """``jobs`` jobs of one kind, and the idle controller's background before them."""

    name: str
    jobs: int
    idle: Window | None = None
    busy: Window | None = None
    records: list[Job] = field(default_factory=list, repr=False)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> int:
        return sum(1 for j in self.records if j.state is JobState.SUCCEEDED)

    def per_job(self) -> dict[Key, float]:
        """Requests per job of each (verb, resource), the idle controller's own rate taken off."""
        if self.busy is None or self.idle is None or not self.ok:
            return {}
        idle = self.idle.rate()
        keys = set(self.busy.requests) | set(idle)
        found = {
            k: (self.busy.requests.get(k, 0) - idle.get(k, 0.0) * self.busy.seconds) / self.ok for k in keys
        }
        return {k: round(v, 2) for k, v in found.items() if abs(v) >= 0.005}

    def _idle_share(self) -> float:
        assert self.idle is not None and self.busy is not None
        return self.busy.seconds / self.idle.seconds

    def store_per_job(self) -> dict[str, float]:
        """Commits, rows written (by table) and WAL bytes per job, the idle rate taken off."""
        if self.busy is None or self.idle is None or not self.ok:
            return {}
        busy, idle, k = self.busy.store, self.idle.store, self._idle_share()
        found = {"commits": busy.commits - idle.commits * k, "wal_bytes": busy.wal_bytes - idle.wal_bytes * k}
        for verb, b, i in (("ins", busy.inserted, idle.inserted), ("upd", busy.updated, idle.updated),
                           ("del", busy.deleted, idle.deleted)):  # fmt: skip
            for table in set(b) | set(i):
                found[f"{verb} {table}"] = b.get(table, 0) - i.get(table, 0) * k
        return {key: round(v / self.ok, 2) for key, v in found.items() if abs(v / self.ok) >= 0.005}

    def cpu_per_job(self) -> float | None:
        """Controller CPU seconds per job (start, turn, teardown), the idle rate taken off."""
        if self.busy is None or self.idle is None or not self.ok:
            return None
        return (self.busy.cpu_s - self.idle.cpu_s * self._idle_share()) / self.ok


def job_pods_running(api: KubeApiStandIn) -> int:
    """Sandbox pods of a job (not a pool's unclaimed member, not a proxy) in phase Running."""
    return sum(
        1
        for p in api.objects("pods", cc.NS)
        if JOB_LABEL in (p["metadata"].get("labels") or {})
        and not p["metadata"]["name"].endswith("-proxy")
        and (p.get("status") or {}).get("phase") == "Running"
    )


def pods_left(api: KubeApiStandIn) -> int:
    return sum(1 for p in api.objects("pods", cc.NS) if JOB_LABEL in (p["metadata"].get("labels") or {}))


async def until(what: str, check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting until {what}")
        await asyncio.sleep(0.5)


@asynccontextmanager
async def controller(
    api: KubeApiStandIn, config: Path, data: Path, dsn: str, concurrency: int
) -> AsyncIterator[tuple[ControllerClient, Meter]]:
    """One ``airlock serve`` on ``dsn`` (``--concurrency``), a client and a meter of it."""
    replica = await asyncio.to_thread(rr.Replica, config, data, dsn, concurrency, 15.0)
    client = replica.client()
    try:
        yield client, Meter(api, replica.proc.pid, dsn)
    finally:
        await client.close()
        await asyncio.to_thread(replica.stop)


async def idle(meter: Meter, seconds: float) -> Window:
    await meter.mark()
    await asyncio.sleep(seconds)
    return await meter.window()


async def run_case(
    api: KubeApiStandIn,
    kubeconfig: Path,
    where: Path,
    dsn: str,
    name: str,
    jobs: int,
    *,
    pool: int = 0,
    egress: bool = False,
    idle_s: float = 20.0,
) -> Case:
    """``jobs`` one-turn jobs (a bash ``sleep 1``) through a controller of ``--concurrency 8``:
    the idle background first (after a warm pool filled), then the batch up to when every
    sandbox object is gone (and the pool refilled) and the store's statistics published."""
    case = Case(name, jobs)
    config = cc.write_config(where / name, kubeconfig, sleep_s=1.0, pool=pool, egress=egress)
    async with controller(api, config, where / name / "data", dsn, 8) as (client, meter):
        if pool:
            await until("the warm pool filled", lambda: _pool_ready(api) >= pool, 180)
        await asyncio.sleep(10.0)  # past the start's own writes
        case.idle = await idle(meter, idle_s)
        await meter.mark()
        submitted = await asyncio.gather(*(client.submit(cc.AGENT, f"job {i}") for i in range(jobs)))
        outcomes = await asyncio.gather(*(client.wait(j.id) for j in submitted), return_exceptions=True)
        for o in outcomes:
            if isinstance(o, BaseException):
                case.errors.append(f"{type(o).__name__}: {o}")
                continue
            case.records.append(o)
            if o.state is not JobState.SUCCEEDED:
                case.errors.append(f"job {o.id} {o.state.value}")
        await until("every sandbox removed", lambda: pods_left(api) == 0, 120)
        if pool:
            await until("the warm pool refilled", lambda: _pool_ready(api) >= pool, 180)
        await asyncio.sleep(STATS_FLUSH_S)
        case.busy = await meter.window()
    return case


def _pool_ready(api: KubeApiStandIn) -> int:
    return sum(
        1
        for p in api.objects("pods", cc.NS)
        if "airlock.dev/pool" in (p["metadata"].get("labels") or {})
        and JOB_LABEL not in (p["metadata"].get("labels") or {})
        and (p.get("status") or {}).get("phase") == "Running"
    )


# -- the controller under K running jobs ------------------------------------------------------


@dataclass
class Plateau:
    """``running`` jobs' sandboxes running at once (a bash ``sleep``), measured over a window."""

    running: int
    window: Window
    #: Sandbox objects in the namespace at the window's end: kind -> (count, JSON bytes).
    objects: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class Load:
    idle: Window | None = None
    plateaus: list[Plateau] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def run_load(
    api: KubeApiStandIn, kubeconfig: Path, where: Path, dsn: str, levels: tuple[int, ...], window_s: float
) -> Load:
    """Jobs that sleep long, added until ``levels[i]`` run at once; at each level, once every
    sandbox runs, the controller's CPU, RSS, requests and store writes over ``window_s``."""
    load = Load()
    top = max(levels)
    config = cc.write_config(where / "load", kubeconfig, sleep_s=600.0)
    async with controller(api, config, where / "load" / "data", dsn, top) as (client, meter):
        await asyncio.sleep(10.0)  # past the start's own writes
        load.idle = await idle(meter, window_s)
        ids: list[str] = []
        try:
            for level in levels:
                more = await asyncio.gather(
                    *(client.submit(cc.AGENT, f"load {i}") for i in range(len(ids), level))
                )
                ids += [j.id for j in more]
                await until(f"{level} sandboxes run", lambda n=level: job_pods_running(api) >= n, 300)
                await _all_running(client, ids)
                await asyncio.sleep(8.0)  # the runners started and their tool sleeps
                await meter.mark()
                await asyncio.sleep(window_s)
                load.plateaus.append(Plateau(level, await meter.window(), sandbox_objects(api)))
        except Exception as e:  # report what was measured so far
            load.errors.append(f"{type(e).__name__}: {e}")
        finally:
            await asyncio.gather(*(client.cancel(i, "bench over") for i in ids), return_exceptions=True)
            await until("every sandbox removed", lambda: pods_left(api) == 0, 180)
    return load


def sandbox_objects(api: KubeApiStandIn) -> dict[str, tuple[int, int]]:
    """Each kind's sandbox objects (labelled with a job) now: how many, and their JSON size."""
    found = {}
    for kind in ("pods", "secrets", "networkpolicies", "services", "leases"):
        mine = [o for o in api.objects(kind, cc.NS) if JOB_LABEL in (o["metadata"].get("labels") or {})]
        found[kind] = (len(mine), sum(len(json.dumps(o, separators=(",", ":"))) for o in mine))
    return {k: v for k, v in found.items() if v[0]}


async def _all_running(client: ControllerClient, ids: list[str]) -> None:
    for _ in range(600):
        states = await asyncio.gather(*(client.get(i) for i in ids))
        if all(j.state is JobState.RUNNING for j in states):
            return
        await asyncio.sleep(0.5)
    raise TimeoutError("the jobs did not all run")
