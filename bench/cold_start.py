"""Cold start of a sandbox: airlock vs the raw docker-py floor, on the same image.

Prints, in one run, p50/p95 of:

- **floor**: docker-py ``create`` + ``start`` + ``exec_run(["true"])`` (no network, init) —
  the least any Docker sandbox can cost before its first command;
- **airlock ready**: DockerEnvironment's provisioning up to gRPC health SERVING (control dir,
  token, hardened container, runner start, socket lock, health);
- **airlock one-turn job**: ``DockerEnvironment.run`` of a scripted one-turn agent, end to end
  (provision, ready, Execute over gRPC, OOM check, teardown);
- **the same job with an allow rule**: adds the per-sandbox internal network and the egress
  proxy container (started in parallel with the sandbox);
- **teardown**: force-remove of the floor container / airlock's full teardown;

and the ratio of each airlock number to the floor (target: ready <= 1.5x). When gVisor is
registered (``scripts/gvisor-setup.sh``), the same rows again under gVisor, each against the
runc floor and against the gVisor floor (the same docker-py calls with ``runtime="runsc"``).

Usage: ``python bench/cold_start.py [--n 20] [--no-gvisor]`` (needs Docker and
``airlock images build``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.build import build_turn
from airlock.images import docker_client, require_image, runner_image_tag
from airlock.sandbox import SandboxDefaults, resolve_limits
from airlock.sandbox.docker import DockerEnvironment, DockerRuntimes, DockerSettings
from airlock.sandbox.docker._config import resolve_boundary
from airlock.sandbox.docker._instance import DockerInstance
from airlock.testing import scripted_agent, text_step
from bench._common import BENCH_LABEL, floor_once, pct
from layer0 import EnvironmentSpec, ExitReason, NetworkAction, NetworkPolicy, NetworkRule, TurnInput

AGENT = scripted_agent([text_step("ok")], name="bench")


#: Label on the floor containers.
FLOOR_LABELS = {BENCH_LABEL: "cold_start"}


async def sandbox_once(
    client: Any, state_dir: Path, image: str, runtimes: frozenset[str], isolation: str = "container"
) -> tuple[float, float]:
    spec = EnvironmentSpec()
    t0 = time.perf_counter()
    sandbox = DockerInstance(client, state_dir)
    try:
        await sandbox.provision(
            image=image,
            limits=resolve_limits(spec, SandboxDefaults()),
            runtimes=runtimes,
            boundary=resolve_boundary(spec, runtimes, floor=isolation),
        )
        await sandbox.wait_ready(30)
        sandbox.bind(AGENT)
        ready = time.perf_counter() - t0
    finally:
        t1 = time.perf_counter()
        await sandbox.teardown()
    return ready, time.perf_counter() - t1


#: An allow rule that is never used: the sandbox gets its internal network and egress proxy.
EGRESS_SPEC = EnvironmentSpec(
    network=NetworkPolicy(
        default=NetworkAction.DENY,
        rules=[NetworkRule(destination="model.airlock.test", port=443, action=NetworkAction.ALLOW)],
    )
)


async def job_once(env: DockerEnvironment, spec: EnvironmentSpec | None = None) -> float:
    t0 = time.perf_counter()
    out = await env.run(build_turn(AGENT), TurnInput.new("hi"), spec or EnvironmentSpec())
    assert out.exit_reason == ExitReason.complete()
    return time.perf_counter() - t0


class Series:
    """The measurements of one isolation: floor, ready, job, job with egress, teardowns."""

    def __init__(self, isolation: str) -> None:
        self.isolation = isolation
        self.runtime = "runsc" if isolation == "gvisor" else "runc"
        self.floor: list[float] = []
        self.floor_td: list[float] = []
        self.ready: list[float] = []
        self.ready_td: list[float] = []
        self.job: list[float] = []
        self.egress_job: list[float] = []


async def measure(
    series: Series, client: Any, state_dir: Path, image: str, runtimes: frozenset[str], env: DockerEnvironment
) -> None:
    r, td = await asyncio.to_thread(floor_once, client, image, series.runtime, FLOOR_LABELS)
    series.floor.append(r)
    series.floor_td.append(td)
    r, td = await sandbox_once(client, state_dir, image, runtimes, series.isolation)
    series.ready.append(r)
    series.ready_td.append(td)
    series.job.append(await job_once(env))
    series.egress_job.append(await job_once(env, EGRESS_SPEC))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="iterations per measurement (default 20)")
    parser.add_argument("--no-gvisor", action="store_true", help="runc only, even when gVisor is registered")
    args = parser.parse_args()
    client = docker_client()
    image = runner_image_tag()
    await asyncio.to_thread(require_image, client, image)
    runtimes = frozenset(client.info().get("Runtimes", {}))
    state_dir = Path(tempfile.mkdtemp(prefix="al-bench-"))
    names = DockerRuntimes()
    kinds = ["container"]
    if not args.no_gvisor and {names.gvisor, names.gvisor_networked} <= runtimes:
        kinds.append("gvisor")
    envs = {
        kind: DockerEnvironment(
            image=image, state_dir=state_dir, client=client, settings=DockerSettings(isolation_floor=kind)
        )
        for kind in kinds
    }
    all_series = [Series(kind) for kind in kinds]

    for series in all_series:  # one warm-up of each (page cache, image layers), not counted
        await asyncio.to_thread(floor_once, client, image, series.runtime, FLOOR_LABELS)
        await sandbox_once(client, state_dir, image, runtimes, series.isolation)
        await job_once(envs[series.isolation])
        await job_once(envs[series.isolation], EGRESS_SPEC)

    for _ in range(args.n):  # interleaved so drift affects all alike
        for series in all_series:
            await measure(series, client, state_dir, image, runtimes, envs[series.isolation])

    base = statistics.median(all_series[0].floor)
    print(f"cold start, {args.n} runs each, image {image}, network none, init")
    print(f"{'measurement':<48} {'p50 ms':>8} {'p95 ms':>8} {'vs runc floor':>14} {'vs own floor':>13}")
    for series in all_series:
        own = statistics.median(series.floor)
        label = "runc" if series.isolation == "container" else "gVisor"
        rows: list[tuple[str, list[float], bool]] = [
            (f"floor: docker-py create+start+exec [{label}]", series.floor, True),
            (f"airlock sandbox ready (health SERVING) [{label}]", series.ready, True),
            (f"airlock one-turn job (scripted, e2e) [{label}]", series.job, True),
            ("  same, with egress proxy + internal net", series.egress_job, True),
            (f"teardown: floor (remove force) [{label}]", series.floor_td, False),
            (f"teardown: airlock (container + dir) [{label}]", series.ready_td, False),
        ]
        for name, values, ratio in rows:
            p50 = statistics.median(values)
            vs_runc = f"{p50 / base:.2f}x" if ratio else ""
            vs_own = f"{p50 / own:.2f}x" if ratio else ""
            print(
                f"{name:<48} {p50 * 1000:>8.0f} {pct(values, 0.95) * 1000:>8.0f} {vs_runc:>14} {vs_own:>13}"
            )
    print("target: airlock sandbox ready <= 1.5x its own floor")


if __name__ == "__main__":
    asyncio.run(main())
