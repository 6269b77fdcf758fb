"""How many idle sandboxes with egress one host holds: memory per sandbox, runner + proxy.

Starts ``--n`` sandboxes at once through ``DockerEnvironment.run``, each with an allow rule (so
each gets its internal network on a /28 of ``backends.docker.internal_subnets`` and its egress
proxy container) and a scripted agent whose one tool call is ``sleep``: once every sandbox is
in its tool call they sit idle. Then, per sandbox:

- the runner container's and the proxy container's memory as ``docker stats`` counts it
  (cgroup usage less inactive file cache);
- the ``containerd-shim`` of each container (its proportional set size, read from ``/proc``
  when visible): host memory a sandbox costs outside its cgroups.

Prints failures, the time until all were idle, p50/p95/max of each, and how many such
sandboxes the host's RAM (``--ram-gib``, default 24) holds by the p50 figures. The runs are
then cancelled (which tears each sandbox down) and nothing of them may remain.

Usage: ``python bench/idle_capacity.py [--n 20] [--isolation container|gvisor]`` (needs
Docker and ``airlock images build``). The allow rule names an address that is never
contacted (the agent only sleeps).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from airlock.build import build_turn
from airlock.images import docker_client, docker_errors, require_image, runner_image_tag
from airlock.policy.resources import parse_memory
from airlock.sandbox import SandboxDefaults
from airlock.sandbox.docker import LABEL_OWNER, LABEL_SANDBOX, DockerEnvironment, DockerSettings
from airlock.sandbox.docker._labels import current_owner
from airlock.testing import bash_agent
from airlock.turn import ToolStarted
from layer0 import EnvironmentSpec, NetworkAction, NetworkPolicy, NetworkRule, TurnConfig, TurnInput

#: An allow rule that is never used: each sandbox gets its internal network and egress proxy.
EGRESS_SPEC = EnvironmentSpec(
    network=NetworkPolicy(
        default=NetworkAction.DENY,
        rules=[NetworkRule(destination="model.airlock.test", port=443, action=NetworkAction.ALLOW)],
    )
)
MIB = 2**20
#: The egress proxy container's memory limit (``EgressWiring.create_proxy``).
PROXY_LIMIT_MIB = 256


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def memory_mib(container: Any) -> float | None:
    """The container's memory as ``docker stats`` shows it (usage less inactive file cache);
    None when it is gone."""
    try:
        stats = container.stats(stream=False, one_shot=True)
    except (docker_errors().DockerException, ValueError):  # removed meanwhile, or being removed
        return None
    mem = stats.get("memory_stats") or {}
    inner = mem.get("stats") or {}
    cache = inner.get("total_inactive_file", inner.get("inactive_file", 0))
    return float(mem.get("usage", 0) - cache) / MIB


def shim_pss_mib() -> dict[str, float]:
    """Container id → PSS of its ``containerd-shim`` (empty when /proc shows none)."""
    found: dict[str, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not argv or b"containerd-shim" not in argv[0] or b"-id" not in argv:
                continue
            cid = argv[argv.index(b"-id") + 1].decode()
            rollup = (entry / "smaps_rollup").read_text()
        except (OSError, IndexError, ValueError):
            continue
        for line in rollup.splitlines():
            if line.startswith("Pss:"):
                found[cid] = int(line.split()[1]) / 1024
    return found


def measure(client: Any) -> dict[str, dict[str, float]]:
    """Sandbox id → {runner, proxy, shims} MiB for every sandbox of this process."""
    owner = f"{LABEL_OWNER}={current_owner().ident}"
    containers = client.containers.list(filters={"label": owner})
    shims = shim_pss_mib()
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for c in containers:
        role = "proxy" if (c.labels or {}).get("airlock.role") == "proxy" else "runner"
        sandbox = out[(c.labels or {})[LABEL_SANDBOX]]
        used = memory_mib(c)
        if used is None:
            continue
        sandbox[role] = used
        sandbox["shims"] = sandbox.get("shims", 0.0) + shims.get(c.id, 0.0)
    return dict(out)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="sandboxes started at once (default 20)")
    parser.add_argument("--isolation", choices=["container", "gvisor"], default="container")
    parser.add_argument("--ram-gib", type=float, default=24.0, help="the host RAM to fill (default 24)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds idle before measuring")
    args = parser.parse_args()
    client = docker_client()
    image = runner_image_tag()
    await asyncio.to_thread(require_image, client, image)
    settings = DockerSettings(isolation_floor=args.isolation)
    state_dir = Path(tempfile.mkdtemp(prefix="al-idle-"))
    work = Path(tempfile.mkdtemp(prefix="al-idle-ws-"))  # the turns' host workspaces (unused)
    env = DockerEnvironment(image=image, state_dir=state_dir, client=client, settings=settings, sweep=False)
    # The bash tool stops a command after 120 s unless its options allow more.
    agent = bash_agent("sleep 3600", tool_options={"bash": {"timeout_s": 3600}})
    idle = [asyncio.Event() for _ in range(args.n)]

    async def one(i: int) -> None:
        async def sink(event: Any) -> None:
            if isinstance(event, ToolStarted):
                idle[i].set()

        turn = build_turn(agent, workspace=Path(tempfile.mkdtemp(dir=work)))
        # An hour's max_duration: starting hundreds takes minutes, and none may end meanwhile.
        long = TurnInput.new("idle").model_copy(update={"config": TurnConfig(max_duration=3_600_000)})
        await env.run(turn, long, EGRESS_SPEC, events=sink)

    async def idle_or_failed(i: int) -> None:
        waiting = asyncio.ensure_future(idle[i].wait())
        await asyncio.wait([waiting, tasks[i]], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()

    t0 = time.perf_counter()
    tasks = [asyncio.ensure_future(one(i)) for i in range(args.n)]
    await asyncio.gather(*(idle_or_failed(i) for i in range(args.n)))
    started = time.perf_counter() - t0
    failures = [t.exception() for t in tasks if t.done() and not t.cancelled() and t.exception()]
    await asyncio.sleep(args.settle)
    per = await asyncio.to_thread(measure, client)
    ended = [t for t in tasks if t.done()]  # a sandbox must stay up until the teardown below
    owned = {"label": f"{LABEL_OWNER}={current_owner().ident}"}
    nets = await asyncio.to_thread(client.networks.list, filters=owned)
    subnets = sorted({str(c["Subnet"]) for n in nets for c in n.attrs["IPAM"]["Config"]})
    t1 = time.perf_counter()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    teardown = time.perf_counter() - t1
    left = await asyncio.to_thread(client.containers.list, all=True, filters=owned)
    left += await asyncio.to_thread(client.networks.list, filters=owned)
    stray = await asyncio.to_thread(lambda: sorted(p.name for p in state_dir.iterdir()))
    shutil.rmtree(state_dir, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)

    full = [s for s in per.values() if "runner" in s and "proxy" in s]
    rows = {
        "runner container": [s["runner"] for s in full],
        "proxy container": [s["proxy"] for s in full],
        "runner + proxy": [s["runner"] + s["proxy"] for s in full],
        "containerd shims (2)": [s["shims"] for s in full],
        "runner + proxy + shims": [s["runner"] + s["proxy"] + s["shims"] for s in full],
    }
    print(
        f"idle sandboxes with egress: {args.n} started at once [{args.isolation}], "
        f"{len(full)} idle after {started:.1f}s, {len(failures)} failed, {len(ended)} ended before "
        f"the teardown; teardown of all {teardown:.1f}s"
    )
    print(
        f"internal networks: {len(nets)}, on {len(subnets)} distinct subnets of "
        f"{settings.internal_subnets} ({', '.join(subnets[:3])}{', …' if len(subnets) > 3 else ''})"
    )
    for e in failures[:5]:
        print(f"  failure: {str(e).splitlines()[0][:160]}")
    print(f"{'memory per sandbox (MiB)':<30} {'p50':>8} {'p95':>8} {'max':>8}")
    for name, values in rows.items():
        if values:
            print(
                f"{name:<30} {statistics.median(values):>8.1f} {pct(values, 0.95):>8.1f} {max(values):>8.1f}"
            )
    ram = args.ram_gib * 1024
    print(f"{'fit in ' + f'{args.ram_gib:g} GiB':<30} {'sandboxes':>8}")
    for name in ("runner + proxy", "runner + proxy + shims"):
        if rows[name] and (p50 := statistics.median(rows[name])) > 0:
            print(f"{'by ' + name + ' p50':<30} {int(ram // p50):>8}")
    limits = parse_memory(SandboxDefaults().memory) / MIB + PROXY_LIMIT_MIB
    print(f"{f'by memory limits ({limits:.0f} MiB)':<30} {int(ram // limits):>8}")
    if left or stray:
        print(f"LEFT BEHIND: {[c.name for c in left]} {stray}")


if __name__ == "__main__":
    asyncio.run(main())
