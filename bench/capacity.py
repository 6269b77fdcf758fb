"""What one sandboxed job costs the Kubernetes API server, the controller and the store, measured
against the Kubernetes stand-in, and the capacity model built on it (``docs/capacity.md``).

Setup: the stand-in API server (:class:`airlock.testing.KubeApiStandIn`) in this process, its
pods run on the local Docker engine (:class:`airlock.testing.DockerPods`: the runner image, the
token init container, the Secret volume; a deleted pod stays Terminating 1 s, as its kubelet
would keep it); one real ``airlock serve`` subprocess per case, kubernetes backend
(``connect: pod_ip``, ``network_policy: assume_enforced``: the stand-in enforces no
NetworkPolicy), its store a fresh database on the tests' PostgreSQL 15
(``tests/support/postgres.py``, fsync off: counts, not latencies, are measured); a scripted
agent (no network) whose one turn runs a bash ``sleep``.

Cases (``--jobs`` jobs each, ``--concurrency 8``, a turn of ``sleep 1``):

* **cold**: no warm pool, no network rule (one pod, one Secret, one NetworkPolicy);
* **warm**: ``pool: {size: 4}``: a job claims a running member and the pool refills;
* **egress**: one allow rule (a proxy pod, its Secret and policy beside the sandbox's; such
  sandboxes are never pooled, so warm + egress is the cold egress case).

Counted per job: the stand-in's request log by verb and resource (its idle background rate
taken off), the controller's CPU seconds, PostgreSQL's commits, rows and WAL bytes
(``pg_stat_database``, ``pg_stat_user_tables``, ``pg_current_wal_lsn``). Then **load**: jobs
that sleep 600 s added until 10, then 30, run at once (``--quick``: 2 and 6); over a 20 s window
at each level, the controller's CPU and RSS (``/proc``, the process and its children), its
requests and commits, and the sandbox objects' count and size.

Usage: ``python -m bench.capacity [--jobs 70] [--quick] [--json PATH]`` (Docker, the runner
image and the tests' PostgreSQL image: ``python -m tests.support.postgres_image``). Writes
``bench/results/capacity.json`` and ``bench/results/capacity.md`` (the model's tables).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _capacity_cluster as cc
from bench import _capacity_model as model
from bench import _capacity_runs as cr

RESULTS = Path(__file__).parent / "results"
#: (name, warm pool size, egress rule) of each case.
CASES = (("cold", 0, False), ("warm", 4, False), ("egress", 0, True))
#: Per-controller requests (its owner Lease's renewals, the reaper's sweeps), not a job's.
PER_REPLICA = ("leases",)


@dataclass
class Results:
    jobs: int
    cases: list[cr.Case] = field(default_factory=list)
    load: cr.Load | None = None
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))


@contextlib.contextmanager
def postgres() -> Iterator[Any]:
    """The tests' PostgreSQL 15 (fsync off), removed at the end."""
    import pytest

    from tests.support import postgres as pg

    try:
        server = pg.start_server()
    except pytest.skip.Exception as e:  # no Docker engine or no image: say which
        raise RuntimeError(str(e)) from None
    try:
        yield server
    finally:
        server.container.stop()


def fresh(server: Any) -> contextlib.AbstractContextManager[str]:
    from tests.support import postgres as pg

    return contextlib.contextmanager(pg.fresh_database)(server)


async def measure(jobs: int, levels: tuple[int, ...], window_s: float) -> Results:
    results = Results(jobs)
    with tempfile.TemporaryDirectory(prefix="al-bench-capacity-") as where, postgres() as server:
        tmp = Path(where)
        with cc.cluster(tmp) as (api, kubeconfig):
            for name, pool, egress in CASES:
                with fresh(server) as dsn:
                    case = await cr.run_case(api, kubeconfig, tmp, dsn, name, jobs, pool=pool, egress=egress)
                results.cases.append(case)
                print(f"  {name}: {case.ok}/{jobs} ok", file=sys.stderr, flush=True)
            with fresh(server) as dsn:
                results.load = await cr.run_load(api, kubeconfig, tmp, dsn, levels, window_s)
    return results


# -- from the runs to the model's inputs --------------------------------------------------------


def per_job(case: cr.Case) -> dict[str, float]:
    """A job's own requests by "verb resource" (the per-controller ones left out: its Lease, and
    the reaper's sweeps, the only lists)."""
    return {
        f"{v} {r}": n
        for (v, r), n in case.per_job().items()
        if r.split("/")[0] not in PER_REPLICA and v != "list"
    }


def plateau_rates(load: cr.Load) -> dict[str, float]:
    """From the load run: per running job and per replica, the idle controller taken off."""
    assert load.idle is not None and load.plateaus
    idle, top = load.idle, load.plateaus[-1]
    low = load.plateaus[0]
    w, k = top.window, top.running
    replica = sum(n for (v, r), n in w.requests.items() if r in PER_REPLICA or v == "list")
    own = sum(w.requests.values()) - replica
    rss_slope = (w.rss_mib - low.window.rss_mib) / (k - low.running) if k > low.running else w.rss_mib / k
    return {
        "requests_per_running_s": own / w.seconds / k,
        "replica_requests_s": replica / w.seconds,
        "commits_per_running_s": max(
            0.0, (w.store.commits / w.seconds - idle.store.commits / idle.seconds) / k
        ),
        # The idle controller's commits are its idle workers' claim polls (--concurrency: the top level).
        "idle_worker_commits_s": idle.store.commits / idle.seconds / k,
        "cpu_per_running": max(0.0, (w.cpu_s / w.seconds - idle.cpu_s / idle.seconds) / k),
        "rss_mib_per_running": rss_slope,
        # A replica's RSS once it ran a sandbox (the first one loads the Kubernetes client).
        "rss_mib_base": max(idle.rss_mib, low.window.rss_mib - low.running * rss_slope),
    }


def measured(case: cr.Case, load: cr.Load) -> model.Measured:
    """The model's inputs for one case (the load run's per-running figures are the cold case's)."""
    requests = per_job(case)
    objects = {r: n for k, n in requests.items() for v, r in [k.split(" ", 1)] if v == "create"}
    sizes = {kind: b / max(c, 1) for kind, (c, b) in load.plateaus[-1].objects.items()}
    store = case.store_per_job()
    written = {k: v for k, v in store.items() if k.split(" ")[0] in ("ins", "upd", "del")}
    kept = sum(v for k, v in store.items() if k.startswith("ins ")) - sum(
        v for k, v in store.items() if k.startswith("del ")
    )
    return model.Measured(
        requests_per_job=requests,
        objects_per_sandbox=objects,
        bytes_per_sandbox=sum(n * sizes.get(kind, 0.0) for kind, n in objects.items()),
        commits_per_job=store.get("commits", 0.0),
        rows_per_job=sum(written.values()),
        rows_kept_per_job=kept,
        cpu_s_per_job=case.cpu_per_job() or 0.0,
        **plateau_rates(load),
    )


# -- the tables -------------------------------------------------------------------------------


def request_lines(cases: list[cr.Case]) -> list[str]:
    """Verb and resource → requests per job, one column per case."""
    tables = {c.name: per_job(c) for c in cases}
    keys = sorted({k for t in tables.values() for k in t}, key=lambda k: (k.split(" ")[1], k))
    lines = [f"{'verb resource':<28}" + "".join(f"{c.name:>9}" for c in cases)]
    for key in keys:
        lines.append(f"{key:<28}" + "".join(f"{tables[c.name].get(key, 0.0):>9.2f}" for c in cases))
    lines.append(f"{'total':<28}" + "".join(f"{sum(tables[c.name].values()):>9.2f}" for c in cases))
    return lines


def store_lines(cases: list[cr.Case]) -> list[str]:
    tables = {c.name: c.store_per_job() for c in cases}
    keys = sorted(
        {k for t in tables.values() for k in t}, key=lambda k: (k not in ("commits", "wal_bytes"), k)
    )
    lines = [f"{'store, per job':<28}" + "".join(f"{c.name:>9}" for c in cases)]
    for key in keys:
        lines.append(f"{key:<28}" + "".join(f"{tables[c.name].get(key, 0.0):>9.1f}" for c in cases))
    cpu = "".join(f"{(c.cpu_per_job() or 0.0) * 1000:>9.0f}" for c in cases)
    lines.append(f"{'controller CPU ms per job':<28}{cpu}")
    ok = "".join(f"{f'{c.ok}/{c.jobs}':>9}" for c in cases)
    return [*lines, f"{'jobs ok':<28}{ok}", *(f"  {c.name} error: {e}" for c in cases for e in c.errors[:3])]


def load_lines(load: cr.Load) -> list[str]:
    lines = [f"{'running':>8}{'window':>8}{'CPU s/s':>9}{'RSS MiB':>9}{'requests':>9}{'commits':>9}  objects"]
    none: dict[str, tuple[int, int]] = {}
    rows: list[tuple[int, cr.Window | None, dict[str, tuple[int, int]]]] = (
        [(0, load.idle, none)] if load.idle else []
    )
    rows += [(p.running, p.window, p.objects) for p in load.plateaus]
    for k, w, objects in rows:
        assert w is not None
        kinds = ", ".join(f"{kind} {n} ({b / n / 1024:.1f} KiB each)" for kind, (n, b) in objects.items())
        lines.append(
            f"{k:>8}{w.seconds:>7.0f}s{w.cpu_s / w.seconds:>9.3f}{w.rss_mib:>9.1f}"
            f"{sum(w.requests.values()):>9}{w.store.commits:>9}  {kinds}"
        )
    return [*lines, *(f"  error: {e}" for e in load.errors)]


def report(r: Results) -> str:
    sections = [
        f"capacity: {r.jobs} jobs per case, --concurrency 8, kubernetes backend on the stand-in "
        f"(pods on Docker), PostgreSQL 15 store; {r.cores} cores",
        "",
        "API requests per job (the idle controller's rate taken off; leases are per controller)",
        *request_lines(r.cases),
        "",
        *store_lines(r.cases),
    ]
    if r.load is not None:
        sections += [
            "",
            "the controller with K jobs running (a bash sleep), over a window",
            *load_lines(r.load),
        ]
    return "\n".join(sections)


def model_tables(r: Results) -> str:
    if r.load is None or not r.load.plateaus:
        return ""
    return model.markdown({c.name: measured(c, r.load) for c in r.cases if c.ok})


def tables_of(path: Path) -> str:
    """The model's tables again from a results file's measured figures (no new run)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    return model.markdown({name: model.Measured(**m) for name, m in doc["load"]["measured"].items()})


def as_json(r: Results) -> dict[str, Any]:
    def window(w: cr.Window | None) -> dict[str, Any] | None:
        if w is None:
            return None
        reqs = {f"{v} {res}": n for (v, res), n in w.requests.items()}
        return {"seconds": w.seconds, "cpu_s": w.cpu_s, "rss_mib": w.rss_mib, "requests": reqs,
                "store": vars(w.store)}  # fmt: skip

    doc: dict[str, Any] = {"jobs": r.jobs, "cores": r.cores}
    doc["cases"] = [
        {"name": c.name, "ok": c.ok, "errors": c.errors, "requests_per_job": per_job(c),
         "store_per_job": c.store_per_job(), "cpu_s_per_job": c.cpu_per_job(),
         "idle": window(c.idle), "busy": window(c.busy)}
        for c in r.cases
    ]  # fmt: skip
    if r.load is not None:
        doc["load"] = {
            "idle": window(r.load.idle),
            "errors": r.load.errors,
            "plateaus": [
                {"running": p.running, "objects": p.objects, "window": window(p.window)}
                for p in r.load.plateaus
            ],
            "measured": {c.name: vars(measured(c, r.load)) for c in r.cases if c.ok}
            if r.load.plateaus
            else {},
        }
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=0, help="jobs per case (default 70; --quick 7)")
    parser.add_argument("--quick", action="store_true", help="7 jobs per case, load levels 2 and 6")
    parser.add_argument("--json", type=Path, default=RESULTS / "capacity.json", help="where the results go")
    parser.add_argument("--tables", type=Path, help="print the model's tables of this results file, no run")
    args = parser.parse_args(argv)
    if args.tables:
        print(tables_of(args.tables))
        return 0
    levels, window_s = ((2, 6), 10.0) if args.quick else ((10, 30), 20.0)
    results = asyncio.run(measure(args.jobs or (7 if args.quick else 70), levels, window_s))
    print(report(results))
    tables = model_tables(results)
    print("\n" + tables)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(as_json(results), indent=2, default=list) + "\n", encoding="utf-8")
    args.json.with_suffix(".md").write_text(tables + "\n", encoding="utf-8")
    failed = any(c.errors for c in results.cases) or (results.load is None or bool(results.load.errors))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
