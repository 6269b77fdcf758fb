"""Job throughput of the controller vs its floors, at several concurrencies, in one run.

For each concurrency N, the same batch of jobs (a scripted one-turn agent shaped like
``demo-scripted`` in examples/airlock.yaml: two model calls and a calculator call, docker
backend, 1 CPU / 256 MiB, no network) is run three ways, all jobs started at once:

- **raw docker**: plain docker-py ``containers.run`` of the runner image running ``true``
  (network none, init, auto-removed), N at a time on N threads — the engine's floor;
- **environment direct**: ``DockerEnvironment.run`` of the agent's turn (built as the
  controller's AgentRunner builds it) under an ``asyncio.Semaphore(N)`` — no controller,
  no gRPC, no job store;
- **controller**: an in-process ``Controller`` (temporary data dir, ``127.0.0.1:0``,
  ``ServiceSettings(concurrency=N)``); every job submitted through the gRPC
  ``ControllerClient`` at once, each followed with ``client.wait`` (WatchJob, then GetJob).

Measured: jobs/minute (wall from the first submit to the last job seen finished), p50/p95
of submit -> finished per job (client side; for the floors, batch start -> job done, the
same thing with no queue of their own), the same from the job record (``finished_at -
created_at``; its jobs/min over first created -> last finished), peak running (the
controller's ``service.peak_running``, must be <= N), and the controller's jobs/min as a
ratio of each floor's. Any failed job, a peak above N, or a container left behind makes the
exit status 1.

Usage: ``python bench/jobs_throughput.py [--concurrency 4 8] [--jobs 50] [--json]``
(needs Docker and ``airlock images build``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.build import build_turn
from airlock.config import AgentConfig, AirlockConfig, load_config
from airlock.controller import Controller, ControllerOptions, ServiceSettings
from airlock.images import docker_client, require_image, runner_image_tag
from airlock.jobs import ControllerClient, JobState
from airlock.sandbox.docker import DockerEnvironment
from airlock.sandbox.docker._labels import LABEL_OWNER, current_owner
from airlock.testing import calculator_script, script_yaml
from bench._common import BENCH_LABEL, loadavg, pct
from layer0 import ExitReason, TurnInput

AGENT = "bench-scripted"
PROMPT = "What is 17 * 23? Use the calculator."
#: The shape of ``demo-scripted`` in examples/airlock.yaml.
CONFIG = f"""\
version: 1
defaults:
  max_turns: 20
  max_duration: 5m
agents:
  {AGENT}:
    provider:
      kind: scripted
      script: scripts/calculator.yaml
    system: You are a helpful assistant. Use the calculator for arithmetic, then answer in one sentence.
    tools: [calculator]
    backend: docker
    resources: {{cpu: "1", memory: 256Mi}}
    defaults: {{max_turns: 6, max_duration: 30s}}
"""
#: Label value on the raw-floor containers (airlock's own carry ``airlock.owner``).
BENCH_VALUE = "jobs_throughput"

RAW = "raw docker (true)"
DIRECT = "environment direct"
CONTROLLER = "controller (gRPC)"
RECORD = "controller, job record"


@dataclass
class Result:
    """One mode at one concurrency."""

    concurrency: int
    mode: str
    jobs: int
    ok: int
    wall_s: float
    latencies_ms: list[float] = field(repr=False)
    peak: int
    errors: list[str] = field(default_factory=list)
    #: The 1-minute load average when the run started (others' work on the machine shows here).
    load_at_start: float = 0.0

    @property
    def jobs_per_min(self) -> float:
        return self.ok / self.wall_s * 60 if self.wall_s > 0 else 0.0

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies_ms) if self.latencies_ms else float("nan")

    @property
    def p95_ms(self) -> float:
        return pct(self.latencies_ms, 0.95) if self.latencies_ms else float("nan")


async def bounded(concurrency: int, jobs: int, mode: str, job: Callable[[], Awaitable[None]]) -> Result:
    """``jobs`` runs of ``job``, all started at once, ``concurrency`` at a time."""
    gate = asyncio.Semaphore(concurrency)
    running = peak = 0

    async def one() -> float:
        nonlocal running, peak
        async with gate:
            running += 1
            peak = max(peak, running)
            try:
                await job()
            finally:
                running -= 1
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    outcomes = await asyncio.gather(*(one() for _ in range(jobs)), return_exceptions=True)
    done = [o for o in outcomes if isinstance(o, float)]
    errors = [f"{type(o).__name__}: {o}" for o in outcomes if isinstance(o, BaseException)]
    wall = max(done) if done else time.perf_counter() - t0
    return Result(concurrency, mode, jobs, len(done), wall, [d * 1000 for d in done], peak, errors)


def raw_once(client: Any, image: str) -> None:
    """The engine floor: create, start, wait for ``true``, remove."""
    client.containers.run(
        image,
        entrypoint=["true"],
        network_mode="none",
        init=True,
        remove=True,
        labels={BENCH_LABEL: BENCH_VALUE},
    )


async def raw_docker(client: Any, image: str, concurrency: int, jobs: int) -> Result:
    loop = asyncio.get_running_loop()
    # Its own N threads: the default executor has min(32, nproc + 4) and would cap N.
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench-raw") as pool:

        async def job() -> None:
            await loop.run_in_executor(pool, raw_once, client, image)

        return await bounded(concurrency, jobs, RAW, job)


async def direct_once(env: DockerEnvironment, agent: AgentConfig, workspace: Path) -> None:
    """One turn as AgentRunner.run builds it, without the controller."""
    turn = build_turn(agent.running().with_inline_script().final(), workspace=workspace)
    out = await env.run(turn, TurnInput.new(PROMPT), agent.environment, sidecar_routes=agent.sidecar_routes)
    if out.exit_reason != ExitReason.complete():
        raise RuntimeError(f"turn ended {out.exit_reason.kind}")


async def environment_direct(
    agent: AgentConfig, image: str, state_dir: Path, workspace: Path, concurrency: int, jobs: int
) -> Result:
    # A fresh environment (its Docker client made on first use), as a fresh controller's.
    env = DockerEnvironment(image=image, state_dir=state_dir, sweep=False)
    return await bounded(concurrency, jobs, DIRECT, lambda: direct_once(env, agent, workspace))


async def controller_run(
    config: AirlockConfig, image: str, state_dir: Path, concurrency: int, jobs: int
) -> tuple[Result, Result]:
    """The batch through a fresh controller; (client-side result, job-record result)."""
    with tempfile.TemporaryDirectory(prefix="al-bench-ctl-") as data:
        options = ControllerOptions(
            data_dir=Path(data),
            address="127.0.0.1:0",
            settings=ServiceSettings(concurrency=concurrency),
            sandbox_dir=state_dir,
            image=image,
        )
        async with (
            Controller(config, options) as controller,
            ControllerClient(controller.address, controller.token) as client,
        ):
            await client.agents()  # the channel is connected before the clock starts

            async def one() -> tuple[float, float, Any]:
                submitted = time.perf_counter()
                job = await client.submit(AGENT, PROMPT)
                final = await client.wait(job.id)
                now = time.perf_counter()
                return now - submitted, now - t0, final

            t0 = time.perf_counter()
            outcomes = await asyncio.gather(*(one() for _ in range(jobs)), return_exceptions=True)
            assert controller.service is not None
            peak = controller.service.peak_running
    errors = [f"{type(o).__name__}: {o}" for o in outcomes if isinstance(o, BaseException)]
    finished = [o for o in outcomes if not isinstance(o, BaseException)]
    good = [o for o in finished if o[2].state is JobState.SUCCEEDED]
    for _, _, job in finished:
        if job.state is not JobState.SUCCEEDED:
            why = job.error.message if job.error else ""
            errors.append(f"job {job.id} {job.state.value}: {why}")
    wall = max((o[1] for o in finished), default=time.perf_counter() - t0)
    client_side = Result(
        concurrency, CONTROLLER, jobs, len(good), wall, [o[0] * 1000 for o in good], peak, errors
    )
    records = [o[2] for o in good if o[2].finished_at is not None]
    record_ms = [(j.finished_at - j.created_at).total_seconds() * 1000 for j in records]
    record_wall = (
        (max(j.finished_at for j in records) - min(j.created_at for j in records)).total_seconds()
        if records
        else 0.0
    )
    record = Result(concurrency, RECORD, jobs, len(good), record_wall, record_ms, peak, [])
    return client_side, record


def prepare(tmp: Path, extra: str = "") -> tuple[AirlockConfig, Path, Path]:
    """Write the agent's configuration (plus the YAML ``extra``) and script under ``tmp``;
    (config, state dir, workspace)."""
    (tmp / "scripts").mkdir()
    (tmp / "scripts" / "calculator.yaml").write_text(script_yaml(calculator_script()), encoding="utf-8")
    (tmp / "airlock.yaml").write_text(CONFIG + extra, encoding="utf-8")
    state_dir = tmp / "sandboxes"
    state_dir.mkdir()
    workspace = tmp / "workspace"
    workspace.mkdir()
    return load_config(tmp / "airlock.yaml"), state_dir, workspace


def sweep_leftovers(client: Any) -> int:
    """Remove (and count) containers and networks this process left behind."""
    owner = f"{LABEL_OWNER}={current_owner().ident}"
    found: dict[str, Any] = {}
    for label in (owner, f"{BENCH_LABEL}={BENCH_VALUE}"):
        for c in client.containers.list(all=True, filters={"label": label}):
            found[c.id] = c
    for c in found.values():
        c.remove(force=True)
    networks = client.networks.list(filters={"label": owner})
    for n in networks:
        n.remove()
    return len(found) + len(networks)


def stamped(load1: float, *results: Result) -> list[Result]:
    """``results`` with the load average their run started at."""
    for r in results:
        r.load_at_start = load1
    return list(results)


def print_table(results: list[Result], context: dict[str, Any]) -> None:
    print(
        f"jobs throughput: {context['jobs']} jobs per run, scripted agent (2 model calls + 1 tool), "
        f"image {context['image']}"
    )
    print(
        f"machine: nproc {context['nproc']}, load average {context['load_before']} before, "
        f"{context['load_after']} after"
    )
    head = f"{'conc':>4}  {'mode':<26} {'ok':>7} {'jobs/min':>9} {'p50 ms':>8} {'p95 ms':>8} {'peak':>5}"
    print(f"{head} {'load1':>6} {'controller / this':>18}")
    by_conc: dict[int, dict[str, Result]] = {}
    for r in results:
        by_conc.setdefault(r.concurrency, {})[r.mode] = r
    for conc, rows in by_conc.items():
        ctl = rows.get(CONTROLLER)
        for mode in (RAW, DIRECT, CONTROLLER, RECORD):
            if mode not in rows:
                continue
            r = rows[mode]
            ratio = ""
            if ctl is not None and mode in (RAW, DIRECT) and r.jobs_per_min > 0:
                ratio = f"{ctl.jobs_per_min / r.jobs_per_min:.2f}x"
            label = f"  {mode}" if mode == RECORD else mode
            print(
                f"{conc:>4}  {label:<26} {f'{r.ok}/{r.jobs}':>7} {r.jobs_per_min:>9.1f} "
                f"{r.p50_ms:>8.0f} {r.p95_ms:>8.0f} {r.peak:>5} {r.load_at_start:>6.2f} {ratio:>18}"
            )
    print(
        "latency: submit -> finished (client side; floors: batch start -> done); job record: "
        "finished_at - created_at"
    )
    print("load1: 1-minute load average as the run started (includes this bench's previous run)")
    print(f"containers/networks left behind (removed): {context['left_behind']}")
    for r in results:
        for e in r.errors[:5]:
            print(f"error: conc {r.concurrency} {r.mode}: {e}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 8], help="N values (default 4 8)")
    parser.add_argument("--jobs", type=int, default=50, help="jobs per run (default 50)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = parser.parse_args()

    client = docker_client()
    image = runner_image_tag()
    await asyncio.to_thread(require_image, client, image)
    tmp = Path(tempfile.mkdtemp(prefix="al-bench-jobs-"))
    results: list[Result] = []
    left_behind = 0
    load_before = loadavg()
    try:
        config, state_dir, workspace = prepare(tmp)
        agent = config.agent(AGENT)

        # One warm-up of each floor (page cache, image layers), not counted.
        await asyncio.to_thread(raw_once, client, image)
        await direct_once(DockerEnvironment(image=image, state_dir=state_dir, sweep=False), agent, workspace)

        for n in args.concurrency:
            load1 = os.getloadavg()[0]
            results += stamped(load1, await raw_docker(client, image, n, args.jobs))
            left_behind += await asyncio.to_thread(sweep_leftovers, client)
            load1 = os.getloadavg()[0]
            results += stamped(
                load1, await environment_direct(agent, image, state_dir, workspace, n, args.jobs)
            )
            left_behind += await asyncio.to_thread(sweep_leftovers, client)
            load1 = os.getloadavg()[0]
            results += stamped(load1, *await controller_run(config, image, state_dir, n, args.jobs))
            left_behind += await asyncio.to_thread(sweep_leftovers, client)
    finally:
        left_behind += await asyncio.to_thread(sweep_leftovers, client)
        await asyncio.to_thread(shutil.rmtree, tmp, True)

    context: dict[str, Any] = {
        "jobs": args.jobs,
        "image": image,
        "nproc": len(os.sched_getaffinity(0)),
        "load_before": load_before,
        "load_after": loadavg(),
        "left_behind": left_behind,
    }
    if args.json:
        ctl = {r.concurrency: r.jobs_per_min for r in results if r.mode == CONTROLLER}
        rows = []
        for r in results:
            row = asdict(r)
            del row["latencies_ms"]
            row |= {"jobs_per_min": r.jobs_per_min, "p50_ms": r.p50_ms, "p95_ms": r.p95_ms}
            if r.mode in (RAW, DIRECT) and r.concurrency in ctl and r.jobs_per_min > 0:
                row["controller_over_this"] = ctl[r.concurrency] / r.jobs_per_min
            rows.append(row)
        print(json.dumps({"context": context, "results": rows}, indent=2))
    else:
        print_table(results, context)

    bad = left_behind > 0
    for r in results:
        bad |= r.ok != r.jobs or bool(r.errors) or r.peak > r.concurrency
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
