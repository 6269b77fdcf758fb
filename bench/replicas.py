"""Controller replicas on PostgreSQL vs one controller on SQLite, failover, and DBOS Transact's
queue vs our PostgreSQL claim, all measured in one run on one PostgreSQL server.

1. **Throughput and submit→start**: one ``airlock serve`` on SQLite (WAL, synchronous=NORMAL) vs
   1, 2 and 3 replicas on one PostgreSQL 15 (the tests' image, started durable: fsync,
   synchronous_commit and full_page_writes on — stricter than SQLite's NORMAL, which does not
   sync each commit), each ``--concurrency 4``, process backend, a scripted one-turn agent with
   no tool; N jobs (60; ``--quick`` 12) submitted round-robin through the replicas at once, after
   one warm-up job per replica. jobs/min (first created → last finished), submit→start p50/p95
   (``started_at - created_at``), submit→finished p50, ratios to SQLite-1. Targets: PostgreSQL
   1 replica within 20% of SQLite; 3 replicas ≥ 1.5x one replica. On a 2-core machine the
   replicas share the 2 cores (and the runners and PostgreSQL), so the scaling ratio is a floor
   for a real cluster.
2. **Failover**: one replica runs 4 jobs (a bash ``sleep``), an idle second replica joins, the
   first is killed with -9; for each job, kill → its ``resume`` event (adopted) and kill → its
   next RUNNING state event on the survivor (event times), with ``--lease 3`` and the default 15.
   Target: ≤ lease + 2 s.
3. **DBOS Transact vs our claim** (``bench/_queue_claims.py``): claims/s with 1 and 3 claimers
   over 500 queued jobs, and enqueue→dequeue latency, for ``JobStore.claim`` and for a DBOS queue
   (``worker_concurrency`` 4). DBOS is not a project dependency: without it the rows say
   "not installed: pip install dbos".

Conclusion (issue 38; one run on 2 cores, bench/README.md): keep our PostgreSQL primitives.
Our claim took 784 jobs/s with one claimer and 971/s with three, and a NOTIFY-woken claimer
had a job 2.5 ms (p50) after its insert began; DBOS's queue is polled (``polling_interval_sec``,
default 1 s), so a dequeue waits about one interval (956 ms p50 at the default, 34 ms at 0.05 s)
and a worker takes at most worker_concurrency per interval: 66/s with one worker and 187/s with
three at 0.05 s. Nor would it give the controller what it needs: no fencing token per claim that
every write is checked against (a zombie DBOS execution is detected when it checkpoints a step
or its outcome: steps run at least once); without Conductor (a hosted service) a dead executor's
workflows are recovered only by an executor restarting with its id or through the admin API's
recovery endpoint, where our survivors adopt a dead replica's jobs after its lease; its limits are
per queue and per partition, not a tenant's quotas admitted in the submit's transaction; no
LISTEN/NOTIFY fan-out of job events to watchers on every replica; and its workflow model (replay a
deterministic function's recorded steps) is not our checkpoint (a turn's session state and the
tool calls it started, resumed in a fresh sandbox). It would add its own schema and migrations
(``dbos.*``) in our database and a second durable-execution model beside ours, for a claim that is
one SQL transaction here. Such an engine fits deterministic Python workflows; an agent turn in a
sandbox is not one.

Usage: ``python -m bench.replicas [--quick] [--jobs 60] [--claims 500] [--json PATH]`` (needs
Docker and the tests' PostgreSQL image: ``python -m tests.support.postgres_image``; row 3 also
``pip install dbos``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _queue_claims as qc
from bench import _replica_runs as rr
from bench._report import Report, RowSpec, at_most, floor_ratio_at_least

#: (store, replicas) of the throughput rows; the first is the reference.
SETUPS = (("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 3))
#: Slower than a DBOS default would be, faster than its 1 s default: see the conclusion.
DBOS_POLL_S = 0.05


@dataclass
class Results:
    """Everything one run measured."""

    jobs: int
    batches: list[rr.Batch] = field(default_factory=list)
    failovers: list[rr.Failover] = field(default_factory=list)
    takes: list[qc.Takes] = field(default_factory=list)
    dbos: str | None = None
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))


@contextlib.contextmanager
def postgres_server() -> Iterator[Any]:
    """The tests' PostgreSQL 15, durable (fsync on), removed at the end."""
    import pytest

    from tests.support import postgres

    try:
        server = postgres.start_server(durable=True)
    except pytest.skip.Exception as e:  # no Docker engine or no image: say which
        raise RuntimeError(str(e)) from None
    try:
        yield server
    finally:
        server.container.stop()


def fresh(server: Any) -> contextlib.AbstractContextManager[str]:
    """A new empty database on ``server`` (dropped on exit): its DSN."""
    from tests.support import postgres

    return contextlib.contextmanager(postgres.fresh_database)(server)


async def throughput(server: Any, tmp: Path, jobs: int) -> list[rr.Batch]:
    config = rr.write_config(tmp / "throughput")
    batches = []
    for i, (store, n) in enumerate(SETUPS):
        data = tmp / f"data-{i}"
        if store == "sqlite":
            batches.append(await rr.run_batch(config, data, None, n, jobs))
            continue
        with fresh(server) as dsn:
            batches.append(await rr.run_batch(config, data, dsn, n, jobs))
    return batches


async def failovers(server: Any, tmp: Path, leases: tuple[float, ...]) -> list[rr.Failover]:
    results = []
    for lease in leases:
        config = rr.write_config(tmp / f"failover-{lease:g}", sleep_s=lease + 60)
        with fresh(server) as dsn:
            results.append(await rr.run_failover(config, tmp / f"failover-data-{lease:g}", dsn, lease))
    return results


async def queues(server: Any, claims: int, latency_n: int) -> list[qc.Takes]:
    """Our claim, then DBOS's queue (if installed), each on a fresh database."""
    found = []
    for claimers in (1, 3):
        with fresh(server) as dsn:
            found.append(await qc.claim_rate(dsn, claims, claimers))
    with fresh(server) as dsn:
        found.append(await qc.claim_latency(dsn, latency_n))
    if qc.dbos_missing():
        return found
    for workers in (1, 3):
        with fresh(server) as dsn:
            found.append(await asyncio.to_thread(qc.dbos_rate, dsn, claims, workers, DBOS_POLL_S))
    for poll in (DBOS_POLL_S, 1.0):
        with fresh(server) as dsn:
            found.append(await asyncio.to_thread(qc.dbos_latency, dsn, latency_n // 2, poll))
    return found


async def measure(jobs: int, claims: int, quick: bool) -> Results:
    """Every section on one durable PostgreSQL (``quick``: throughput and a 3 s-lease failover)."""
    results = Results(jobs, dbos=qc.dbos_missing())
    with tempfile.TemporaryDirectory(prefix="al-bench-replicas-") as where, postgres_server() as server:
        tmp = Path(where)
        results.batches = await throughput(server, tmp, jobs)
        results.failovers = await failovers(server, tmp, (3.0,) if quick else (3.0, 15.0))
        if not quick:
            results.takes = await queues(server, claims, 40)
    return results


# -- rows of ``python -m bench`` (bench/run.py) --------------------------------------------

#: Row keys of the throughput setups.
ROW_KEYS = ("replicas.sqlite1", "replicas.pg1", "replicas.pg2", "replicas.pg3")


def row_specs(jobs: int, leases: tuple[float, ...]) -> list[RowSpec]:
    """The replicas' rows of the main table: jobs/min by store and replica count (÷ floor: ÷ one
    controller on SQLite; the 3-replica row ÷ one PostgreSQL replica) and failover."""
    each = f"{jobs} jobs, --concurrency 4 each, process backend"
    sqlite, pg1 = ROW_KEYS[0], ROW_KEYS[1]
    return [
        RowSpec(sqlite, f"one controller on SQLite ({each})", "jobs/min"),
        RowSpec(
            pg1,
            "1 replica on PostgreSQL (durable)",
            "jobs/min",
            floor=sqlite,
            targets=(floor_ratio_at_least(0.8),),
        ),
        RowSpec(ROW_KEYS[2], "2 replicas on PostgreSQL", "jobs/min", floor=sqlite),
        RowSpec(
            ROW_KEYS[3],
            "3 replicas on PostgreSQL (÷ floor: ÷ 1 replica)",
            "jobs/min",
            floor=pg1,
            targets=(floor_ratio_at_least(1.5),),
        ),
        *(
            RowSpec(
                f"replicas.failover{lease:g}",
                f"failover, lease {lease:g} s: kill -9 → its jobs RUNNING again (max)",
                "s",
                targets=(at_most(lease + 2),),
            )
            for lease in leases
        ),
    ]


def missing_image() -> str | None:
    """Why the replicas' rows cannot run (None: the tests' PostgreSQL image exists)."""
    from airlock.images import docker_client
    from tests.support.postgres_image import TAG

    try:
        docker_client().images.get(TAG)
    except Exception:  # no engine, or no image
        return f"n/a (image {TAG} missing: python -m tests.support.postgres_image)"
    return None


def record(report: Report, batches: list[rr.Batch], failed_over: list[rr.Failover], cores: int) -> None:
    """Fill :func:`row_specs`' rows."""
    note = f"; replicas share {cores} cores: a floor for a cluster" if cores <= 2 else ""
    for key, b in zip(ROW_KEYS, batches, strict=True):
        detail = f"{len(b.ok)}/{b.jobs} ok, submit→start p50 {_f(b.start_ms(0.5))} ms"
        detail += f" p95 {_f(b.start_ms(0.95))} ms"
        detail += f", →finished p50 {_f(b.finish_ms_p50())} ms" + (note if b.replicas > 1 else "")
        report.set(key, b.jobs_per_min, detail, b.errors)
    for f in failed_over:
        p50 = statistics.median(f.delays_s) if f.delays_s else None
        adopted = statistics.median(f.adopted_s) if f.adopted_s else None
        detail = f"{len(f.delays_s)} jobs, p50 {_f(p50, '.2f')} s, resume event p50 {_f(adopted, '.2f')} s"
        report.set(
            f"replicas.failover{f.lease_s:g}", max(f.delays_s) if f.delays_s else None, detail, f.errors
        )


async def measure_rows(report: Report, jobs: int, leases: tuple[float, ...]) -> None:
    """Throughput and failover (no queue comparison) for ``python -m bench``."""
    with tempfile.TemporaryDirectory(prefix="al-bench-replicas-") as where, postgres_server() as server:
        tmp = Path(where)
        batches = await throughput(server, tmp, jobs)
        record(report, batches, await failovers(server, tmp, leases), len(os.sched_getaffinity(0)))


# -- the tables ------------------------------------------------------------------------------


def _f(value: float | None, spec: str = ".0f", unit: str = "") -> str:
    return "" if value is None else f"{value:{spec}}{unit}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _mark(ok: bool | None) -> str:
    return {True: "✓", False: "✗", None: "?"}[ok]


def throughput_lines(r: Results) -> list[str]:
    ref = r.batches[0].jobs_per_min if r.batches else None
    one = next((b.jobs_per_min for b in r.batches if b.store == "postgresql" and b.replicas == 1), None)
    head = f"{'store':<11}{'replicas':>9}{'ok':>8}{'jobs/min':>10}{'start p50':>11}{'start p95':>11}"
    lines = [f"{head}{'done p50':>10}{'÷ sqlite-1':>12}{'÷ pg-1':>8}  target"]
    for b in r.batches:
        jpm = b.jobs_per_min
        target = ""
        if b.store == "postgresql" and b.replicas == 1:
            target = (
                f"≥ 0.80x sqlite-1 {_mark(None if _ratio(jpm, ref) is None else _ratio(jpm, ref) >= 0.8)}"  # type: ignore[operator]
            )
        if b.store == "postgresql" and b.replicas == 3:
            target = f"≥ 1.5x pg-1 {_mark(None if _ratio(jpm, one) is None else _ratio(jpm, one) >= 1.5)}"  # type: ignore[operator]
        lines.append(
            f"{b.store:<11}{b.replicas:>9}{f'{len(b.ok)}/{b.jobs}':>8}{_f(jpm, '.1f'):>10}"
            f"{_f(b.start_ms(0.5), '.0f', ' ms'):>11}{_f(b.start_ms(0.95), '.0f', ' ms'):>11}"
            f"{_f(b.finish_ms_p50(), '.0f', ' ms'):>10}{_f(_ratio(jpm, ref), '.2f', 'x'):>12}"
            f"{_f(_ratio(jpm, one) if b.store == 'postgresql' else None, '.2f', 'x'):>8}  {target}".rstrip()
        )
        lines += [f"  error: {e}" for e in b.errors[:3]]
    return lines


def failover_lines(r: Results) -> list[str]:
    lines = [f"{'lease':>6}{'jobs':>6}{'adopted p50':>13}{'running p50':>13}{'running max':>13}  target"]
    for f in r.failovers:
        worst = max(f.delays_s) if f.delays_s else None
        ok = None if worst is None or f.errors else worst <= f.lease_s + 2
        lines.append(
            f"{f.lease_s:>5g}s{len(f.delays_s):>6}"
            f"{_f(statistics.median(f.adopted_s) if f.adopted_s else None, '.2f', ' s'):>13}"
            f"{_f(statistics.median(f.delays_s) if f.delays_s else None, '.2f', ' s'):>13}"
            f"{_f(worst, '.2f', ' s'):>13}  max ≤ {f.lease_s + 2:g} s {_mark(ok)}"
        )
        lines += [f"  error: {e}" for e in f.errors[:3]]
    return lines


def queue_lines(r: Results) -> list[str]:
    lines = [f"{'way':<24}{'claimers':>9}{'n':>5}{'per s':>9}{'lat p50':>10}{'lat p95':>10}  note"]
    for t in r.takes:
        lines.append(
            f"{t.way:<24}{t.claimers:>9}{t.n:>5}{_f(t.per_s, '.0f'):>9}"
            f"{_f(t.latency(0.5), '.1f', ' ms'):>10}{_f(t.latency(0.95), '.1f', ' ms'):>10}  {t.note}"
        )
    if r.dbos:
        lines.append(f"DBOS Transact: {r.dbos}")
    return lines


def report(r: Results) -> str:
    shared = f"; the replicas share these {r.cores} cores" if r.cores <= 2 else ""
    sections = [
        f"replicas: {r.jobs} jobs per row, --concurrency 4 each, process backend, one-turn scripted agent; "
        f"PostgreSQL 15 durable (fsync on) vs SQLite WAL synchronous=NORMAL; {r.cores} cores{shared} "
        "(the scaling ratio is a floor for a real cluster)",
        *throughput_lines(r),
        "start/done: started_at/finished_at - created_at from the job records; "
        "jobs/min: first created → last finished",
        "",
        "failover: one replica running 4 jobs killed with -9, an idle survivor (event times after the kill)",
        *failover_lines(r),
    ]
    if r.takes or r.dbos:
        sections += [
            "",
            "taking queued work off PostgreSQL: our claim vs DBOS Transact's queue "
            "(per s: (n-1) ÷ first→last take; lat: enqueue → taken)",
            *queue_lines(r),
        ]
    return "\n".join(sections)


def failed(r: Results) -> bool:
    return any(b.errors or len(b.ok) != b.jobs for b in r.batches) or any(
        f.errors or not f.delays_s for f in r.failovers
    )


def as_json(r: Results) -> dict[str, Any]:
    doc: dict[str, Any] = {"jobs": r.jobs, "cores": r.cores, "dbos": r.dbos}
    doc["throughput"] = [
        {
            "store": b.store,
            "replicas": b.replicas,
            "ok": len(b.ok),
            "jobs_per_min": b.jobs_per_min,
            "start_p50_ms": b.start_ms(0.5),
            "start_p95_ms": b.start_ms(0.95),
            "finished_p50_ms": b.finish_ms_p50(),
            "errors": b.errors,
        }
        for b in r.batches
    ]
    doc["failover"] = [asdict(f) for f in r.failovers]
    doc["queues"] = [
        {
            **{k: v for k, v in asdict(t).items() if k not in ("taken_at", "latencies_ms")},
            "per_s": t.per_s,
            "latency_p50_ms": t.latency(0.5),
            "latency_p95_ms": t.latency(0.95),
        }
        for t in r.takes
    ]
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="12 jobs per row, one failover, no queue rows")
    parser.add_argument("--jobs", type=int, default=0, help="jobs per throughput row (default 60; quick 12)")
    parser.add_argument(
        "--claims", type=int, default=500, help="queued jobs the claim rows take (default 500)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = asyncio.run(measure(args.jobs or (12 if args.quick else 60), args.claims, args.quick))
    print(report(results))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(as_json(results), indent=2) + "\n", encoding="utf-8")
    return 1 if failed(results) else 0


if __name__ == "__main__":
    sys.exit(main())
