"""Taking queued work off one PostgreSQL, two ways, for ``bench/replicas.py``:

- **ours**: ``JobStore.claim`` of a ``PostgresJobStore`` (``FOR UPDATE SKIP LOCKED`` over the
  oldest candidates, then ``claimed_by`` and ``fence + 1`` in the same transaction); claimers
  are stores with their own replica id sharing one connection pool in this process; the
  latency claimer wakes on the ``airlock_queue`` NOTIFY, as the controller's workers do;
- **DBOS Transact**: one workflow enqueued per job (``DBOSClient.enqueue``) on a queue with
  ``worker_concurrency`` 4, dequeued by DBOS processes (``bench/_dbos_worker.py``: DBOS is one
  instance per process), which poll the queue every ``polling_interval_sec``.

Rates are (n - 1) ÷ (last take - first take): process start-up is not counted for either.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from airlock.controller import PostgresJobStore
from airlock.state import PostgresDatabase
from bench._common import pct
from layer0 import TurnInput

DBOS_MISSING = "not installed: pip install dbos"


@dataclass
class Takes:
    """One way, one set-up: when each of ``n`` items was taken, and enqueue→take latencies."""

    way: str
    claimers: int
    n: int
    taken_at: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    empty: int = 0
    note: str = ""
    error: str = ""

    @property
    def per_s(self) -> float | None:
        if len(self.taken_at) < 2:
            return None
        return (len(self.taken_at) - 1) / max(max(self.taken_at) - min(self.taken_at), 1e-9)

    def latency(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        return statistics.median(self.latencies_ms) if q == 0.5 else pct(self.latencies_ms, q)


def dbos_missing() -> str | None:
    """Why the DBOS rows cannot run (None: they can)."""
    try:
        import dbos  # noqa: F401
    except ImportError:
        return DBOS_MISSING
    return None


# -- ours --------------------------------------------------------------------------------------


async def _fill(store: PostgresJobStore, n: int) -> None:
    for i in range(n):
        await store.create(agent="bench", input=TurnInput.new(f"job {i}"))


async def claim_rate(dsn: str, n: int, claimers: int) -> Takes:
    """``n`` queued jobs, then ``claimers`` claiming until none is left."""
    takes = Takes("airlock JobStore.claim", claimers, n)
    async with contextlib.AsyncExitStack() as stack:
        db = await stack.enter_async_context(PostgresDatabase(dsn, max_size=claimers + 2))
        async with PostgresJobStore(db) as filler:
            await _fill(filler, n)
        stores = [await stack.enter_async_context(PostgresJobStore(db)) for _ in range(claimers)]
        left = n

        async def claimer(store: PostgresJobStore) -> None:
            nonlocal left
            while left > 0:
                if await store.claim() is None:
                    takes.empty += 1  # the candidates were locked by another claimer
                    await asyncio.sleep(0)
                    continue
                left -= 1
                takes.taken_at.append(time.perf_counter())

        await asyncio.gather(*(claimer(s) for s in stores))
    takes.note = f"{takes.empty} claims found nothing free (candidates locked by another claimer)"
    return takes


async def claim_latency(dsn: str, n: int) -> Takes:
    """One claimer woken by the queue's NOTIFY; ``n`` jobs enqueued one at a time; create() call →
    claim() return of that job."""
    takes = Takes("airlock JobStore.claim", 1, n, note="claimer woken by LISTEN airlock_queue")
    async with (
        PostgresDatabase(dsn) as db,
        PostgresJobStore(db) as producer,
        PostgresJobStore(db) as consumer,
    ):
        wake = asyncio.Event()
        claimed: dict[str, float] = {}
        arrived = asyncio.Event()
        listening = asyncio.create_task(db.listen(["airlock_queue"], lambda channel, payload: wake.set()))

        async def claimer() -> None:
            while True:
                await wake.wait()
                wake.clear()
                while (c := await consumer.claim()) is not None:
                    claimed[c.job_id] = time.perf_counter()
                    arrived.set()

        claiming = asyncio.create_task(claimer())
        try:
            await asyncio.sleep(0.5)  # LISTEN is in place
            for i in range(n):
                arrived.clear()
                t0 = time.perf_counter()
                job, _ = await producer.create(agent="bench", input=TurnInput.new(f"job {i}"))
                while job.id not in claimed:
                    await asyncio.wait_for(arrived.wait(), 10)
                    arrived.clear()
                takes.latencies_ms.append((claimed[job.id] - t0) * 1000)
        finally:
            for task in (listening, claiming):
                task.cancel()
            await asyncio.gather(listening, claiming, return_exceptions=True)
    return takes


# -- DBOS --------------------------------------------------------------------------------------


def _worker(mode: str, dsn: str, poll_s: float) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "bench._dbos_worker", mode, dsn, str(poll_s)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _setup(dsn: str, poll_s: float) -> None:
    proc = _worker("setup", dsn, poll_s)
    if proc.wait(120) != 0:
        raise RuntimeError("DBOS set-up failed (its schema in the database)")


def _enqueue(dsn: str, n: int) -> list[str]:
    from dbos import DBOSClient

    from bench._dbos_worker import QUEUE, WORKFLOW

    client = DBOSClient(system_database_url=dsn)
    try:
        return [
            client.enqueue({"queue_name": QUEUE, "workflow_name": WORKFLOW}, i).get_workflow_id()
            for i in range(n)
        ]
    finally:
        client.destroy()


def _started(dsn: str, ids: list[str], timeout_s: float) -> list[tuple[int, int]]:
    """(created, started) epoch ms of ``ids`` once all succeeded."""
    import psycopg

    deadline = time.monotonic() + timeout_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT created_at, started_at_epoch_ms FROM dbos.workflow_status "
                "WHERE workflow_uuid = ANY(%s) AND status = 'SUCCESS'",
                (ids,),
            ).fetchall()
            if len(rows) == len(ids):
                return [(int(r[0]), int(r[1])) for r in rows]
            if time.monotonic() > deadline:
                raise TimeoutError(f"DBOS ran {len(rows)}/{len(ids)} workflows in {timeout_s:.0f} s")
            time.sleep(0.1)


def _workers(dsn: str, count: int, poll_s: float) -> list[subprocess.Popen[str]]:
    procs = [_worker("work", dsn, poll_s) for _ in range(count)]
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("a DBOS worker did not start")
    return procs


def _close(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.stdin is not None:
            p.stdin.close()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def dbos_rate(dsn: str, n: int, workers: int, poll_s: float) -> Takes:
    """``n`` workflows enqueued, then ``workers`` DBOS processes started to run them (blocking)."""
    takes = Takes("DBOS queue", workers, n, note=f"worker_concurrency 4, polling every {poll_s:g} s")
    _setup(dsn, poll_s)
    ids = _enqueue(dsn, n)
    procs = _workers(dsn, workers, poll_s)
    try:
        rows = _started(dsn, ids, 600)
    finally:
        _close(procs)
    takes.taken_at = [started / 1000 for _, started in rows]
    return takes


def dbos_latency(dsn: str, n: int, poll_s: float) -> Takes:
    """One DBOS worker; ``n`` workflows enqueued one at a time, each waited for;
    ``started_at_epoch_ms - created_at`` (both DBOS's, the same clock)."""
    takes = Takes("DBOS queue", 1, n, note=f"worker_concurrency 4, polling every {poll_s:g} s")
    _setup(dsn, poll_s)
    procs = _workers(dsn, 1, poll_s)
    try:
        for _ in range(n):
            ids = _enqueue(dsn, 1)
            created, started = _started(dsn, ids, 60)[0]
            takes.latencies_ms.append(started - created)
    finally:
        _close(procs)
    return takes
