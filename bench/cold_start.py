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

and the ratio of each airlock number to the floor (target: ready <= 1.5x).

Usage: ``python bench/cold_start.py [--n 20]`` (needs Docker and ``airlock images build``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airlock.build import build_turn
from airlock.images import docker_client, require_image, runner_image_tag
from airlock.sandbox import SandboxDefaults, resolve_limits
from airlock.sandbox.docker import DockerEnvironment
from airlock.sandbox.docker._config import resolve_boundary
from airlock.sandbox.docker._environment import _Sandbox
from airlock.testing import scripted_agent, text_step
from layer0 import EnvironmentSpec, ExitReason, NetworkAction, NetworkPolicy, NetworkRule, TurnInput

AGENT = scripted_agent([text_step("ok")], name="bench")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def floor_once(client: Any, image: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    c = client.containers.create(
        image, entrypoint=["sleep", "600"], detach=True, init=True, network_mode="none", labels={"bench": "1"}
    )
    c.start()
    result = c.exec_run(["true"])
    ready = time.perf_counter() - t0
    assert result.exit_code == 0
    t1 = time.perf_counter()
    c.remove(force=True)
    return ready, time.perf_counter() - t1


async def sandbox_once(
    client: Any, state_dir: Path, image: str, runtimes: frozenset[str]
) -> tuple[float, float]:
    spec = EnvironmentSpec()
    t0 = time.perf_counter()
    sandbox = _Sandbox(client, state_dir)
    try:
        await sandbox.provision(
            image=image,
            limits=resolve_limits(spec, SandboxDefaults()),
            runtimes=runtimes,
            boundary=resolve_boundary(spec, runtimes),
        )
        await sandbox.wait_serving(30, AGENT)
        ready = time.perf_counter() - t0
    finally:
        t1 = time.perf_counter()
        await sandbox.teardown_shielded()
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="iterations per measurement (default 20)")
    args = parser.parse_args()
    client = docker_client()
    image = runner_image_tag()
    await asyncio.to_thread(require_image, client, image)
    runtimes = frozenset(client.info().get("Runtimes", {}))
    state_dir = Path(tempfile.mkdtemp(prefix="al-bench-"))
    env = DockerEnvironment(image=image, state_dir=state_dir, client=client)

    # One warm-up of each (page cache, image layers), not counted.
    await asyncio.to_thread(floor_once, client, image)
    await sandbox_once(client, state_dir, image, runtimes)
    await job_once(env)
    await job_once(env, EGRESS_SPEC)

    floor, floor_td, ready, ready_td, job, egress_job = [], [], [], [], [], []
    for _ in range(args.n):  # interleaved so drift affects all alike
        r, td = await asyncio.to_thread(floor_once, client, image)
        floor.append(r)
        floor_td.append(td)
        r, td = await sandbox_once(client, state_dir, image, runtimes)
        ready.append(r)
        ready_td.append(td)
        job.append(await job_once(env))
        egress_job.append(await job_once(env, EGRESS_SPEC))

    base = statistics.median(floor)
    rows: list[tuple[str, list[float], Callable[[float], str]]] = [
        ("floor: docker-py create+start+exec", floor, lambda m: "1.00x"),
        ("airlock sandbox ready (health SERVING)", ready, lambda m: f"{m / base:.2f}x"),
        ("airlock one-turn job (scripted, e2e)", job, lambda m: f"{m / base:.2f}x"),
        ("  same, with egress proxy + internal net", egress_job, lambda m: f"{m / base:.2f}x"),
        ("teardown: floor (remove force)", floor_td, lambda m: ""),
        ("teardown: airlock (container + dir)", ready_td, lambda m: ""),
    ]
    print(f"cold start, {args.n} runs each, image {image}, runtime runc, network none, init")
    print(f"{'measurement':<42} {'p50 ms':>8} {'p95 ms':>8} {'vs floor p50':>13}")
    for name, values, ratio in rows:
        p50 = statistics.median(values)
        print(f"{name:<42} {p50 * 1000:>8.0f} {pct(values, 0.95) * 1000:>8.0f} {ratio(p50):>13}")
    print("target: airlock sandbox ready <= 1.5x the floor")


if __name__ == "__main__":
    asyncio.run(main())
