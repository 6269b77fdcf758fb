"""The runner's own start and memory, in real sandboxes (runc).

For each of ``--n`` sandboxes (DockerEnvironment's provisioning, as ``bench/cold_start.py``):
the runner's ``startup_ms`` (process start to SERVING, from its ``serving`` log line), its
RSS and anonymous memory (``/proc/<pid>/smaps_rollup`` read from the host, so it needs root) once
SERVING and idle, the time of one scripted Execute on it (what a warm pool's job waits for),
and the memory again after it. Prints the median and max of each.

Usage: ``sudo python bench/runner_footprint.py [--n 10] [--image TAG] [--runner-arg=--preload]``
(needs Docker and ``airlock images build``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from airlock.images import docker_client, require_image, runner_image_tag
from airlock.sandbox import SandboxDefaults, resolve_limits
from airlock.sandbox.docker import _config
from airlock.sandbox.docker._config import resolve_boundary
from airlock.sandbox.docker._instance import DockerInstance
from airlock.testing import scripted_agent, text_step
from layer0 import EnvironmentSpec, ExitReason, TurnInput

AGENT = scripted_agent([text_step("ok")], name="bench")


def runner_pid(container: Any) -> int:
    """The host pid of ``python -m airlock.runner`` in the container."""
    container.reload()
    init = int(container.attrs["State"]["Pid"])
    todo = [init]
    while todo:
        pid = todo.pop()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if argv[0].endswith(b"python") and b"airlock.runner" in argv:
            return pid
        for task in Path(f"/proc/{pid}/task").iterdir():
            todo += [int(c) for c in (task / "children").read_text().split()]
    raise RuntimeError("no runner process in the container")


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, anonymous memory) of ``pid`` in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0])
    return fields["Rss"], fields["Anonymous"]


def startup_ms(logs: str) -> float:
    for line in logs.splitlines():
        if '"serving"' in line:
            return float(json.loads(line)["startup_ms"])
    raise RuntimeError(f"no serving line in:\n{logs}")


async def once(client: Any, state_dir: Path, image: str, runtimes: frozenset[str]) -> tuple[float, ...]:
    spec = EnvironmentSpec()
    sandbox = DockerInstance(client, state_dir)
    try:
        limits = resolve_limits(spec, SandboxDefaults())
        boundary = resolve_boundary(spec, runtimes, floor="container")
        await sandbox.provision(image=image, limits=limits, runtimes=runtimes, boundary=boundary)
        await sandbox.wait_ready(30)
        sandbox.bind(AGENT)
        pid = await asyncio.to_thread(runner_pid, sandbox.container)
        await asyncio.sleep(0.2)  # let start-up threads settle
        idle = memory_kib(pid)
        t0 = time.perf_counter()
        out = await sandbox.execute(TurnInput.new("hi"), None, 30, limits)
        execute_ms = (time.perf_counter() - t0) * 1000
        assert out.exit_reason == ExitReason.complete()
        await asyncio.sleep(0.2)
        after = memory_kib(pid)
        ms = startup_ms(await sandbox.logs())
    finally:
        await sandbox.teardown()
    return ms, idle[0] / 1024, idle[1] / 1024, execute_ms, after[0] / 1024, after[1] / 1024


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="sandboxes (default 10)")
    parser.add_argument("--image", default=runner_image_tag(), help="runner image (default %(default)s)")
    parser.add_argument(
        "--runner-arg", action="append", default=[], help="appended to the runner's command line (repeatable)"
    )
    args = parser.parse_args()
    if args.runner_arg:
        command = _config.runner_command
        _config.runner_command = lambda: [*command(), *args.runner_arg]
    client = docker_client()
    image = args.image
    await asyncio.to_thread(require_image, client, image)
    runtimes = frozenset(client.info().get("Runtimes", {}))
    with tempfile.TemporaryDirectory(prefix="al-footprint-") as tmp:
        state_dir = Path(tmp)
        await once(client, state_dir, image, runtimes)  # warm-up, not counted
        rows = [await once(client, state_dir, image, runtimes) for _ in range(args.n)]
    names = (
        "startup_ms",
        "RSS idle MiB",
        "anon idle MiB",
        "first Execute ms",
        "RSS after Execute MiB",
        "anon after Execute MiB",
    )
    print(f"runner footprint, {args.n} sandboxes, image {image}")
    for i, name in enumerate(names):
        values = [r[i] for r in rows]
        print(f"{name:<24} p50 {statistics.median(values):8.1f}   max {max(values):8.1f}")


if __name__ == "__main__":
    asyncio.run(main())
