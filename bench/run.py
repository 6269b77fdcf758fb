"""One benchmark, one table: the Docker floor, airlock and its peers, measured in the same run
on this machine, on the same image.

Rows (p50/p95; ratios of p50s to the floor and to each peer; the issue's targets):

- **floor**: docker-py create+start+exec of the runner image (network none, init), its
  ``exec_run`` round trip and removal; ``docker run --rm IMAGE true``; N of them at once;
  plain ``docker run true`` jobs at the controller's concurrency;
- **airlock**: a cold sandbox up to health SERVING; cold start to the first command (ready +
  one Execute whose scripted agent runs ``true`` with bash); a cold one-turn job
  (``DockerEnvironment.run``), also with an allow rule (egress proxy + internal network);
  teardown; RemoteTurn and one-tool round trips in the sandbox and to a local runner; the
  runner's memory; N concurrent one-turn jobs (memory per sandbox sampled from its cgroup);
  the controller's jobs/min (``bench/jobs_throughput.py``'s machinery);
- **warm pool**: a claim (the pool's own timing), a warm one-turn job (a pool of one, full
  before each job), the same with an allow rule when such sandboxes are pooled, the
  controller's jobs/min with ``pool: {size: N}``; ``n/a`` while ``airlock.sandbox`` has none;
- **replicas** (``bench/replicas.py``): jobs/min of one controller on SQLite vs 1, 2 and 3
  replicas on one durable PostgreSQL (process backend), and failover (a replica killed with -9:
  until its jobs run again elsewhere); ``n/a`` without the tests' PostgreSQL image;
- **observability** (``bench/observability_overhead.py``): the controller's jobs/min and the
  HTTP API's p50 (p99 in the notes) with metrics and tracing off vs on (scraped, exported over
  OTLP/HTTP to a local sink);
- **workspace** (``bench/workspace_snapshots.py``): a workspace snapshot per tool call (runner
  side, and end to end vs snapshots off) and a resume with 50 MiB restored vs an empty one;
- **delegation** (``bench/delegation.py``): a planner delegating to three children whose tool
  takes 3 s, at once vs one at a time, against the same planner with one child (process backend);
- **llm-sandbox** and **SWE-ReX**: cold start to the first command, a trivial command's
  round trip, teardown, N at once — run by ``bench/_peers.py`` in ``bench/.venv-peers``
  (``bench/setup-peers.sh``); without it their rows say so.

Repeated measurements are interleaved (one of each per iteration, after one warm-up of each)
so the machine's drift affects all alike. Every container started carries a label and is
removed at the end, whatever happens. Exit status 1 when a row failed outright or airlock
left a container behind.

Usage: ``python -m bench [--n 20] [--quick] [--peers/--no-peers] [--json PATH] [--markdown]``
(needs Docker and ``airlock images build``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.build import build_turn
from airlock.config import AirlockConfig
from airlock.images import docker_client, require_image, runner_image_tag
from airlock.runner import RemoteTurn
from airlock.sandbox import SandboxDefaults, resolve_limits
from airlock.sandbox.docker import DockerEnvironment
from airlock.sandbox.docker._config import resolve_boundary
from airlock.sandbox.docker._instance import DockerInstance
from airlock.sandbox.docker._labels import LABEL_OWNER, current_owner
from airlock.testing import bash_agent, scripted_agent, text_step
from bench import delegation, replicas
from bench import jobs_throughput as jt
from bench import observability_overhead as observability
from bench import runner_roundtrip as rr
from bench import workspace_snapshots as workspace
from bench._common import (
    BENCH_LABEL,
    MemorySampler,
    container_rss_mib,
    docker_run_true,
    exec_round_trips,
    floor_once,
    floor_remove,
    floor_start,
    loadavg,
    machine,
    pct,
    pooled_client,
    remove_labelled,
    thread_batch,
)
from bench._peers import PeerWorker
from bench._report import BEATS_PEERS, NO_FAILURES, PEERS, Report, RowSpec, at_most, floor_ratio
from bench.cold_start import EGRESS_SPEC
from layer0 import EnvironmentSpec, ExitReason, TurnInput, TurnOutput

ROOT = Path(__file__).resolve().parents[1]
#: The one-turn job: the scripted agent runs ``true`` with bash, then answers.
JOB_AGENT = bash_agent("true", name="bench-job")
#: The RemoteTurn round trip: one model call, no tool.
PONG_AGENT = scripted_agent([text_step("pong")], name="bench-pong")
INPUT = TurnInput.new("go")
PEER_VENV = ROOT / "bench" / ".venv-peers"
SETUP_HINT = "not installed (run bench/setup-peers.sh)"
#: Untimed calls before the timed ones, in a sandbox (lazy imports, first-call paths).
WARMUP_CALLS = 2


@dataclass(frozen=True)
class Settings:
    """How much to measure (``--quick``: what CI runs)."""

    n: int
    calls: int
    concurrency: tuple[int, ...]
    peer_concurrency: int
    throughput_concurrency: int
    throughput_jobs: int
    local_runs: int
    peers: bool
    quick: bool
    #: Jobs per replicas' throughput row, and the leases failover is measured with.
    replica_jobs: int = 60
    replica_leases: tuple[float, ...] = (3.0, 15.0)
    #: Rounds of (off, on) and jobs per batch of the observability rows.
    obs_rounds: int = 3
    obs_jobs: int = 40

    @classmethod
    def of(cls, args: argparse.Namespace) -> Settings:
        quick = bool(args.quick)
        peers = args.peers if args.peers is not None else not quick
        if quick:
            return cls(args.n or 3, 5, (3,), 3, 3, 6, 50, peers, True, 12, (3.0,), 1, 12)
        return cls(args.n or 20, 10, (10, 50), 10, 10, 50, 300, peers, False)


# -- the rows -------------------------------------------------------------------------------


def row_specs(s: Settings) -> list[RowSpec]:
    """Every row, in the table's order (sections by the keys' prefixes)."""
    pc, tc = s.peer_concurrency, s.throughput_concurrency
    first, call, teardown, throughput = "floor.first", "floor.call", "floor.teardown", "floor.throughput"
    rows = [
        RowSpec(first, "docker-py create+start+exec (cold start → first command)"),
        RowSpec(call, "docker-py exec_run `true` round trip"),
        RowSpec(teardown, "teardown: remove(force)"),
        RowSpec("floor.docker_run", "`docker run --rm IMAGE true` (CLI)"),
        *(
            RowSpec(f"floor.concurrent{c}", f"{c} at once: create+start+exec+remove", "s")
            for c in s.concurrency
        ),
        RowSpec(throughput, f"`docker run true` jobs at concurrency {tc}", "jobs/min"),
        RowSpec(
            "airlock.ready", "cold sandbox ready (health SERVING)", floor=first, targets=(floor_ratio(1.5),)
        ),
        RowSpec(
            "airlock.first",
            "cold start → first command (ready + Execute: bash `true`)",
            floor=first,
            peer="first",
            targets=(BEATS_PEERS,),
        ),
        RowSpec("airlock.job", "cold one-turn job (DockerEnvironment.run, e2e)", floor=first),
        RowSpec(
            "airlock.egress_ready",
            "  with an allow rule: ready (to the turn's first event)",
            floor=first,
            targets=(floor_ratio(2.5),),
        ),
        RowSpec("airlock.egress_job", "  with an allow rule: the whole job", floor=first),
        RowSpec("airlock.teardown", "teardown (container + control dir)", floor=teardown, peer="teardown"),
        RowSpec(
            "airlock.call",
            "RemoteTurn round trip in the sandbox (no tool)",
            floor=call,
            peer="call",
            targets=(at_most(3), BEATS_PEERS),
        ),
        RowSpec(
            "airlock.tool_call",
            "one-tool call round trip in the sandbox (bash `true`)",
            floor=call,
            peer="call",
            targets=(BEATS_PEERS,),
        ),
        RowSpec(
            "airlock.local_call",
            "RemoteTurn round trip, local runner (loopback TCP)",
            floor=call,
            targets=(at_most(3),),
        ),
        RowSpec("airlock.local_rss", "idle runner RSS, local runner", "MiB", targets=(at_most(50),)),
        RowSpec(
            "airlock.sandbox_rss", "sandbox processes' RSS after one turn", "MiB", targets=(at_most(50),)
        ),
        *(
            RowSpec(
                f"airlock.concurrent{c}",
                f"{c} concurrent one-turn jobs",
                "s",
                floor=f"floor.concurrent{c}",
                peer=f"concurrent{c}" if c == pc else None,
                targets=(NO_FAILURES,),
            )
            for c in s.concurrency
        ),
        RowSpec(
            "airlock.throughput",
            f"controller throughput at concurrency {tc}",
            "jobs/min",
            floor=throughput,
            targets=(NO_FAILURES,),
        ),
        RowSpec("warm.claim", "warm-pool claim", targets=(at_most(20),)),
        RowSpec("warm.job", "warm one-turn job", floor=first, targets=(at_most(60),)),
        RowSpec("warm.egress_job", "warm one-turn job with an allow rule", floor=first),
        RowSpec(
            "warm.throughput",
            f"controller throughput with a warm pool (conc {tc})",
            "jobs/min",
            floor=throughput,
        ),
    ]
    rows += replicas.row_specs(s.replica_jobs, s.replica_leases)
    rows += observability.row_specs(s.obs_jobs)
    rows += workspace.row_specs()
    rows += delegation.row_specs()
    for peer in PEERS:
        rows += [
            RowSpec(f"{peer}.first", "cold start → first command (`true`)", floor=first),
            RowSpec(f"{peer}.call", "trivial command round trip (`true`)", floor=call),
            RowSpec(f"{peer}.teardown", "teardown", floor=teardown),
            RowSpec(
                f"{peer}.concurrent{pc}",
                f"{pc} at once: start+command+teardown",
                "s",
                floor=f"floor.concurrent{pc}",
            ),
        ]
    return rows


# -- what the measurements share ------------------------------------------------------------


@dataclass
class Bench:
    """The engine, images, directories and peers' workers the measurements share."""

    settings: Settings
    client: Any
    image: str
    tmp: Path
    runtimes: frozenset[str] = frozenset()
    env: DockerEnvironment | None = None
    config: AirlockConfig | None = None
    throughput_dir: Path | None = None
    peers: dict[str, PeerWorker] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def run_label(self) -> tuple[str, str]:
        return BENCH_LABEL, f"run-{os.getpid()}"

    @property
    def label(self) -> str:
        return "=".join(self.run_label)

    @property
    def state_dir(self) -> Path:
        return self.tmp / "state"

    @property
    def workspace(self) -> Path:
        """The host-side workspace the turns are built with (they run in the sandbox's)."""
        return self.tmp / "workspace"

    @property
    def peer_image(self) -> str:
        return f"airlock-bench-peers:{self.image.rsplit(':', 1)[-1]}"

    async def open(self) -> None:
        info = await asyncio.to_thread(self.client.info)
        self.runtimes = frozenset(info.get("Runtimes") or {})
        self.throughput_dir = self.tmp / "throughput"
        for d in (self.state_dir, self.workspace, self.throughput_dir):
            await asyncio.to_thread(d.mkdir)
        self.env = DockerEnvironment(
            image=self.image, state_dir=self.state_dir, client=self.client, sweep=False
        )
        self.config, _, _ = await asyncio.to_thread(jt.prepare, self.throughput_dir)
        for peer in PEERS:
            await self._start_peer(peer)

    async def _start_peer(self, peer: str) -> None:
        if not self.settings.peers:
            self.unavailable[peer] = "skipped (--quick without --peers)" if self.settings.quick else "skipped"
            return
        if not await asyncio.to_thread(_image_exists, self.client, self.peer_image):
            self.unavailable[peer] = SETUP_HINT
            return
        python = PEER_VENV / "bin" / "python"
        if not await asyncio.to_thread(python.exists):
            self.unavailable[peer] = SETUP_HINT
            return
        worker = PeerWorker(peer, python, self.peer_image, self.label, self.tmp / f"{peer}.log")
        try:
            why = await worker.start()
        except (OSError, RuntimeError, TimeoutError, ValueError) as e:
            why = f"worker failed: {e}"
        if why is None:
            self.peers[peer] = worker
        else:
            await worker.close()
            self.unavailable[peer] = f"{why} (run bench/setup-peers.sh)"

    async def close(self) -> int:
        """Stop the workers, remove every container left; how many of airlock's were left."""
        for worker in self.peers.values():
            await worker.close()
        left = await asyncio.to_thread(remove_labelled, self.client, f"{LABEL_OWNER}={current_owner().ident}")
        await asyncio.to_thread(jt.sweep_leftovers, self.client)
        await asyncio.to_thread(remove_labelled, self.client, self.label)
        return left


def _image_exists(client: Any, image: str) -> bool:
    try:
        client.images.get(image)
    except Exception:  # docker.errors.ImageNotFound, or the engine's own refusal
        return False
    return True


def ms(seconds: list[float]) -> list[float]:
    return [s * 1000 for s in seconds]


# -- the measurements -----------------------------------------------------------------------


@dataclass(frozen=True)
class Measure:
    """A measurement filling ``keys``: once per iteration (``repeated``) or once; ``available``
    says why it cannot run (None: it can)."""

    name: str
    keys: tuple[str, ...]
    run: Callable[[Bench, Report], Awaitable[None]]
    repeated: bool = False
    timeout: float = 300.0
    available: Callable[[Bench], str | None] = lambda bench: None


async def floor_cycle(b: Bench, r: Report) -> None:
    def cycle() -> tuple[float, list[float], float]:
        container, first = floor_start(b.client, b.image, labels=dict([b.run_label]))
        try:
            calls = exec_round_trips(container, b.settings.calls, WARMUP_CALLS)
        finally:
            teardown = floor_remove(container)
        return first, calls, teardown

    first, calls, teardown = await asyncio.to_thread(cycle)
    r.add("floor.first", first * 1000)
    r.add("floor.call", *ms(calls))
    r.add("floor.teardown", teardown * 1000)


async def floor_docker_run(b: Bench, r: Report) -> None:
    r.add("floor.docker_run", await asyncio.to_thread(docker_run_true, b.image, b.label) * 1000)


def floor_batch(c: int) -> Measure:
    async def run(b: Bench, r: Report) -> None:
        client = await asyncio.to_thread(pooled_client, c)

        def one() -> None:
            floor_once(client, b.image, labels=dict([b.run_label]))

        try:
            with MemorySampler(b.client, b.label) as memory:
                batch = await asyncio.to_thread(thread_batch, c, one)
        finally:
            await asyncio.to_thread(client.close)
        detail = batch_detail(c, batch.latencies_s, memory.per_container())
        r.set(f"floor.concurrent{c}", batch.wall_s if batch.latencies_s else None, detail, batch.errors)

    return Measure(f"floor: {c} at once", (f"floor.concurrent{c}",), run)


async def checked(turn: RemoteTurn, input: TurnInput = INPUT) -> TurnOutput:
    output = await turn.execute(input)
    if output.exit_reason != ExitReason.complete():
        raise RuntimeError(f"turn ended {output.exit_reason.kind}")
    return output


async def timed_calls(turn: RemoteTurn, runs: int, warmup: int = WARMUP_CALLS) -> list[float]:
    """Seconds of each of ``runs`` executions of ``turn``, after ``warmup`` untimed."""
    times = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        await checked(turn)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


async def airlock_cycle(b: Bench, r: Report) -> None:
    """A cold sandbox: ready, first command, memory, round trips, teardown."""
    spec = EnvironmentSpec()
    sandbox = DockerInstance(b.client, b.state_dir)
    t0 = time.perf_counter()
    try:
        await sandbox.provision(
            image=b.image,
            limits=resolve_limits(spec, SandboxDefaults()),
            runtimes=b.runtimes,
            boundary=resolve_boundary(spec, b.runtimes),
        )
        await sandbox.wait_ready(30)
        ready = time.perf_counter() - t0
        sandbox.bind(JOB_AGENT)
        assert sandbox.remote is not None
        await checked(sandbox.remote)
        first = time.perf_counter() - t0
        rss = await asyncio.to_thread(container_rss_mib, sandbox.container.id)
        pong = RemoteTurn(sandbox.address, sandbox.token, PONG_AGENT)
        try:
            calls = await timed_calls(pong, b.settings.calls)
        finally:
            await pong.close()
        tool_calls = await timed_calls(sandbox.remote, b.settings.calls)
    finally:
        t1 = time.perf_counter()
        await sandbox.teardown()
        teardown = time.perf_counter() - t1
    r.add("airlock.ready", ready * 1000)
    r.add("airlock.first", first * 1000)
    r.add("airlock.call", *ms(calls))
    r.add("airlock.tool_call", *ms(tool_calls))
    r.add("airlock.teardown", teardown * 1000)
    if rss is None:
        r.na("airlock.sandbox_rss", "n/a (the container's cgroup is not readable here)")
    else:
        r.add("airlock.sandbox_rss", rss)


async def job(b: Bench, spec: EnvironmentSpec, env: DockerEnvironment | None = None) -> tuple[float, float]:
    """One one-turn job (cold unless ``env`` has a warm pool); (seconds to the turn's first
    event, seconds in all)."""
    env = env or b.env
    assert env is not None
    t0 = time.perf_counter()
    first: list[float] = []

    async def sink(event: Any) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    out = await env.run(build_turn(JOB_AGENT, workspace=b.workspace), INPUT, spec, events=sink)
    if out.exit_reason != ExitReason.complete():
        raise RuntimeError(f"turn ended {out.exit_reason.kind}")
    return (first[0] if first else float("nan")), time.perf_counter() - t0


async def airlock_job(b: Bench, r: Report) -> None:
    _, total = await job(b, EnvironmentSpec())
    r.add("airlock.job", total * 1000)


async def airlock_egress_job(b: Bench, r: Report) -> None:
    ready, total = await job(b, EGRESS_SPEC)
    r.add("airlock.egress_ready", ready * 1000)
    r.add("airlock.egress_job", total * 1000)


def airlock_batch(c: int) -> Measure:
    async def run(b: Bench, r: Report) -> None:
        async def one() -> None:
            await job(b, EnvironmentSpec())

        with MemorySampler(b.client, f"{LABEL_OWNER}={current_owner().ident}") as memory:
            result = await jt.bounded(c, c, "airlock", one)
        detail = batch_detail(c, [x / 1000 for x in result.latencies_ms], memory.per_container())
        r.set(f"airlock.concurrent{c}", result.wall_s if result.ok else None, detail, result.errors)

    return Measure(f"airlock: {c} concurrent jobs", (f"airlock.concurrent{c}",), run, timeout=600)


def batch_detail(n: int, latencies_s: list[float], mem_mib: list[float]) -> str:
    """``ok/n``, each run's p50/p95 and the sampled memory per sandbox."""
    parts = [f"{len(latencies_s)}/{n} ok"]
    if latencies_s:
        parts.append(f"each p50 {statistics.median(latencies_s):.2f} s, p95 {pct(latencies_s, 0.95):.2f} s")
    if mem_mib:
        parts.append(f"{statistics.median(mem_mib):.0f} MiB/sandbox (max {max(mem_mib):.0f})")
    return ", ".join(parts)


async def local_runner(b: Bench, r: Report) -> None:
    """RemoteTurn to a runner process on this host (``bench/runner_roundtrip.py``'s set-up)."""
    token = secrets.token_urlsafe(32)
    workspace = b.tmp / "runner-workspace"
    workspace.mkdir(exist_ok=True)
    proc, address, startup_ms, _ = await rr.start_runner(workspace, token)
    try:
        rss = await asyncio.to_thread(rr.rss_mib, proc.pid)
        uss = await asyncio.to_thread(rr.private_mib, proc.pid)
        turn = RemoteTurn(address, token, rr.pong_agent())
        try:
            times = await timed_calls(turn, b.settings.local_runs, warmup=30)
        finally:
            await turn.close()
    finally:
        await rr.stop_runner(proc)
    r.add("airlock.local_call", *ms(times))
    r.set("airlock.local_rss", rss, f"after start; USS {uss:.1f} MiB; start → SERVING {startup_ms:.0f} ms")


async def throughput(b: Bench, r: Report) -> None:
    """``bench/jobs_throughput.py``'s floor and controller runs at one concurrency."""
    assert b.config is not None and b.throughput_dir is not None
    c, jobs = b.settings.throughput_concurrency, b.settings.throughput_jobs
    raw = await jt.raw_docker(b.client, b.image, c, jobs)
    await asyncio.to_thread(jt.sweep_leftovers, b.client)
    ctl, _ = await jt.controller_run(b.config, b.image, b.throughput_dir / "sandboxes", c, jobs)
    await asyncio.to_thread(jt.sweep_leftovers, b.client)
    record_throughput(r, "floor.throughput", raw)
    record_throughput(r, "airlock.throughput", ctl)


def record_throughput(r: Report, key: str, result: jt.Result, note: str = "") -> None:
    errors = result.errors or ([f"{result.jobs - result.ok} jobs failed"] if result.ok < result.jobs else [])
    detail = f"{result.ok}/{result.jobs} ok, each p50 {result.p50_ms / 1000:.2f} s, peak {result.peak}"
    r.set(key, result.jobs_per_min if result.ok else None, f"{detail}, {note}" if note else detail, errors)


def warm_pool_support(b: Bench) -> str | None:
    """Why the warm-pool rows cannot run (None once ``airlock.sandbox`` has a warm pool)."""
    import inspect

    import airlock.sandbox
    from airlock.sandbox.docker import DockerBackend

    if not hasattr(airlock.sandbox, "WarmPool") or "pool" not in inspect.signature(DockerBackend).parameters:
        return "n/a (no warm pool yet)"
    return None


async def warm_series(b: Bench, env: DockerEnvironment, spec: EnvironmentSpec, pool: Any) -> list[float]:
    """``n`` one-turn jobs, each claiming from a full pool; seconds of each."""
    times = []
    for _ in range(b.settings.n):
        if not await pool.wait_ready(60):
            raise RuntimeError("the warm pool did not fill within 60 s")
        times.append((await job(b, spec, env))[1])
    return times


async def warm_jobs(b: Bench, r: Report) -> None:
    """Warm one-turn jobs (a pool of one, refilled before each job) and the pool's claims."""
    from airlock.sandbox import PoolSettings, WarmPool, compile_sandbox_plan

    pool: Any = WarmPool(PoolSettings(size=1), name="bench")
    env = DockerEnvironment(image=b.image, state_dir=b.state_dir, client=b.client, sweep=False, pool=pool)
    plain = EnvironmentSpec()
    sandbox: Any = env.sandbox
    try:
        if not await sandbox.warm(plain, compile_sandbox_plan(plain)):
            raise RuntimeError("a sandbox without network is not pooled")
        r.add("warm.job", *ms(await warm_series(b, env, plain, pool)))
        if await sandbox.warm(EGRESS_SPEC, compile_sandbox_plan(EGRESS_SPEC)):
            r.add("warm.egress_job", *ms(await warm_series(b, env, EGRESS_SPEC, pool)))
        else:
            r.na("warm.egress_job", "n/a (a sandbox with an allow rule is not pooled: it starts cold)")
        stats = pool.stats()
    finally:
        await pool.aclose()
    missed = [f"{stats.misses} claim(s) found the pool empty"] if stats.misses else []
    detail = f"the pool's own timing: {stats.hits} hits, {stats.misses} misses"
    r.set("warm.claim", stats.claim_ms_p50, detail, missed, p95=stats.claim_ms_p95)


async def warm_throughput(b: Bench, r: Report) -> None:
    """The controller's jobs/min with ``pool: {size: concurrency}`` (filled as the batch starts)."""
    c, jobs = b.settings.throughput_concurrency, b.settings.throughput_jobs
    tmp = b.tmp / "throughput-warm"
    tmp.mkdir()
    config, state_dir, _ = await asyncio.to_thread(jt.prepare, tmp, f"pool:\n  size: {c}\n")
    result, _ = await jt.controller_run(config, b.image, state_dir, c, jobs)
    await asyncio.to_thread(jt.sweep_leftovers, b.client)
    record_throughput(r, "warm.throughput", result, f"pool size {c}, filled as the batch starts")


async def replica_rows(b: Bench, r: Report) -> None:
    """``bench/replicas.py``'s throughput and failover rows (its queue comparison runs alone)."""
    await replicas.measure_rows(r, b.settings.replica_jobs, b.settings.replica_leases)


def replica_measure(s: Settings) -> Measure:
    keys = tuple(spec.key for spec in replicas.row_specs(s.replica_jobs, s.replica_leases))
    return Measure(
        "replicas: SQLite vs PostgreSQL, failover",
        keys,
        replica_rows,
        timeout=900,
        available=lambda b: replicas.missing_image(),
    )


async def workspace_rows(b: Bench, r: Report) -> None:
    """``bench/workspace_snapshots.py``'s rows: snapshots per tool call, and on resume."""
    await workspace.measure_rows(r, workspace.Settings.of(b.settings.quick))


async def delegation_rows(b: Bench, r: Report) -> None:
    """``bench/delegation.py``'s rows: three delegated children at once vs one at a time."""
    await delegation.measure_rows(r, 1 if b.settings.quick else 3)


async def observability_rows(b: Bench, r: Report) -> None:
    """``bench/observability_overhead.py``'s rows: metrics and tracing off vs on."""
    await observability.measure_rows(r, b.settings.obs_rounds, b.settings.obs_jobs)


def peer_available(peer: str) -> Callable[[Bench], str | None]:
    return lambda b: b.unavailable.get(peer)


def peer_cycle(peer: str) -> Measure:
    async def run(b: Bench, r: Report) -> None:
        answer = await b.peers[peer].request(120, op="cycle", calls=b.settings.calls)
        r.add(f"{peer}.first", answer["first_s"] * 1000)
        r.add(f"{peer}.call", *ms(answer["calls_s"]))
        r.add(f"{peer}.teardown", answer["teardown_s"] * 1000)

    keys = (f"{peer}.first", f"{peer}.call", f"{peer}.teardown")
    return Measure(f"{peer}: cycle", keys, run, repeated=True, timeout=150, available=peer_available(peer))


def peer_batch(peer: str, c: int) -> Measure:
    async def run(b: Bench, r: Report) -> None:
        answer = await b.peers[peer].request(540, op="batch", n=c)
        detail = batch_detail(c, answer["latencies_s"], answer["mem_mib"])
        r.set(
            f"{peer}.concurrent{c}",
            answer["wall_s"] if answer["latencies_s"] else None,
            detail,
            answer["errors"],
        )

    key = f"{peer}.concurrent{c}"
    return Measure(f"{peer}: {c} at once", (key,), run, timeout=600, available=peer_available(peer))


#: The rows one airlock cycle fills.
CYCLE_KEYS = tuple(f"airlock.{k}" for k in ("ready", "first", "call", "tool_call", "teardown", "sandbox_rss"))


def measures(s: Settings) -> list[Measure]:
    """Every measurement; the repeated ones run interleaved, then the others in this order."""
    warm_keys = ("warm.claim", "warm.job", "warm.egress_job")
    return [
        Measure("floor: cycle", ("floor.first", "floor.call", "floor.teardown"), floor_cycle, repeated=True),
        Measure("floor: docker run", ("floor.docker_run",), floor_docker_run, repeated=True),
        Measure(
            "airlock: cycle",
            CYCLE_KEYS,
            airlock_cycle,
            repeated=True,
        ),
        Measure("airlock: job", ("airlock.job",), airlock_job, repeated=True),
        Measure(
            "airlock: job with egress",
            ("airlock.egress_ready", "airlock.egress_job"),
            airlock_egress_job,
            repeated=True,
        ),
        *(peer_cycle(peer) for peer in PEERS),
        Measure("airlock: local runner", ("airlock.local_call", "airlock.local_rss"), local_runner),
        *(floor_batch(c) for c in s.concurrency),
        *(peer_batch(peer, s.peer_concurrency) for peer in PEERS),
        *(airlock_batch(c) for c in s.concurrency),
        Measure("throughput", ("floor.throughput", "airlock.throughput"), throughput, timeout=900),
        Measure("warm pool: jobs", warm_keys, warm_jobs, timeout=600, available=warm_pool_support),
        Measure(
            "warm pool: throughput",
            ("warm.throughput",),
            warm_throughput,
            timeout=900,
            available=warm_pool_support,
        ),
        replica_measure(s),
        Measure("observability: off vs on", observability.KEYS, observability_rows, timeout=900),
        Measure("workspace snapshots", workspace.KEYS, workspace_rows, timeout=900),
        Measure("delegation: children at once", delegation.KEYS, delegation_rows, timeout=600),
    ]


# -- the run --------------------------------------------------------------------------------


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def attempt(m: Measure, b: Bench, r: Report) -> None:
    """Run ``m`` once; a failure is recorded on its rows, never raised."""
    try:
        await asyncio.wait_for(m.run(b, r), m.timeout)
    except Exception as e:
        error = f"{type(e).__name__}: {e}".splitlines()[0]
        progress(f"{m.name} failed: {error}")
        for key in m.keys:
            r.fail(key, error)


async def measure_all(b: Bench, report: Report, all_measures: list[Measure]) -> None:
    runnable = []
    for m in all_measures:
        why = m.available(b)
        if why is None:
            runnable.append(m)
        else:
            for key in m.keys:
                report.na(key, why)
    repeated = [m for m in runnable if m.repeated]
    progress("warm-up: one of each (not counted)")
    scratch = Report(list(report.specs.values()))
    for m in repeated:
        await attempt(m, b, scratch)
    for i in range(b.settings.n):
        progress(f"iteration {i + 1}/{b.settings.n}")
        for m in repeated:
            await attempt(m, b, report)
    for m in runnable:
        if not m.repeated:
            progress(m.name)
            await attempt(m, b, report)


@dataclass
class Outcome:
    """One run: what was measured, where, and what was left behind."""

    settings: Settings
    bench: Bench
    report: Report
    machine: dict[str, Any]
    started: datetime
    duration_s: float
    left: int


async def run(settings: Settings) -> Outcome:
    """Measure everything; every container started is removed before this returns."""
    started, t0 = datetime.now(UTC), time.perf_counter()
    client = await asyncio.to_thread(docker_client)
    image = runner_image_tag()
    await asyncio.to_thread(require_image, client, image)
    report = Report(row_specs(settings))
    about = await asyncio.to_thread(machine, client)
    tmp = await asyncio.to_thread(tempfile.mkdtemp, prefix="al-bench-run-")
    bench = Bench(settings, client, image, Path(tmp))
    try:
        await bench.open()
        await measure_all(bench, report, measures(settings))
    finally:
        left = await bench.close()
        await asyncio.to_thread(shutil.rmtree, bench.tmp, True)
    about["load_average_after"] = loadavg()
    return Outcome(settings, bench, report, about, started, time.perf_counter() - t0, left)


LEGEND = (
    "p50/p95 over the samples (n); ratios are p50 ÷ p50 of the row named (÷ floor: its docker-py floor; "
    "for jobs/min below 1 is slower); targets: ✓ met, ✗ missed, ? not measured"
)


def header(o: Outcome) -> str:
    s, b, about = o.settings, o.bench, o.machine
    peers = ", ".join(f"{PEERS[p]} {w.version}" for p, w in b.peers.items()) or "none"
    return "\n".join(
        [
            f"airlock bench: n={s.n}{' (quick)' if s.quick else ''}, {s.calls} calls per cycle, "
            f"image {b.image}, peers: {peers} (image {b.peer_image}), {o.duration_s:.0f} s",
            f"machine: {about['cores']} cores ({about['cpu']}), {about['memory_gib']} GiB RAM, "
            f"kernel {about['kernel']}, Docker {about['docker']} (runtime {about['runtime']}, "
            f"cgroup {about['cgroup']}, {about['storage_driver']}), Python {about['python']}; "
            f"load {about['load_average']} → {about['load_average_after']}",
        ]
    )


def write_json(path: Path, o: Outcome) -> None:
    b = o.bench
    document = {
        "started_at": o.started.isoformat(timespec="seconds"),
        "duration_s": round(o.duration_s, 1),
        "machine": o.machine,
        "settings": asdict(o.settings),
        "image": b.image,
        "peers": {p: w.version for p, w in b.peers.items()} | dict(b.unavailable),
        "rows": o.report.as_json(),
        "failed": o.report.failed(),
        "airlock_left_behind": o.left,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--n", type=int, default=0, help="iterations of each repeated row (default 20; quick 3)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="CI's run: n=3, 3 at once, a short throughput run, no peers"
    )
    parser.add_argument(
        "--peers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="measure the peers (default: not in --quick)",
    )
    parser.add_argument(
        "--json", type=Path, default=ROOT / "bench" / "results" / "latest.json", help="results file"
    )
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table, write the JSON; 1 when a row failed or airlock left a container."""
    args = parse_args(argv)
    o = asyncio.run(run(Settings.of(args)))
    print(header(o))
    print(o.report.table(markdown=args.markdown))
    print(LEGEND)
    failed = o.report.failed()
    if o.left:
        print(f"airlock left {o.left} container(s) behind (removed)")
    if failed:
        print(f"failed rows: {', '.join(failed)}")
    write_json(args.json, o)
    print(f"results: {args.json}")
    return 1 if failed or o.left else 0


if __name__ == "__main__":
    sys.exit(main())
