"""Runner benchmark: RemoteTurn round trip, start-to-SERVING and RSS of a real runner process.

Starts ``python -m airlock.runner`` as a subprocess on 127.0.0.1, then:

- start-up: the runner's own ``startup_ms`` (process start → SERVING, from its log) and the
  wall time from spawn until a health check answers SERVING, over several fresh processes;
- round trip: p50/p95 of ``RemoteTurn.execute`` with the scripted provider (one model call,
  no tools) over loopback TCP, after a warm-up;
- RSS of the runner process after start-up and after the round trips (``/proc/PID/status``).

Targets (issue 4): p50 round trip ≤ 3 ms, start-to-SERVING ≤ 400 ms, RSS ≤ 50 MiB.

Usage: ``python bench/runner_roundtrip.py [--runs 300] [--starts 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock.runner import RemoteTurn
from airlock.spec import AgentSpec
from airlock.testing import scripted_agent, text_step
from bench._common import pct
from layer0 import TurnInput


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def private_mib(pid: int) -> float:
    """Private (unshared) memory: what each extra runner really costs (USS)."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total / 1024


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def start_runner(workspace: Path, token: str) -> tuple[asyncio.subprocess.Process, str, float, float]:
    """Spawn a runner; returns (process, address, its startup_ms, wall ms until health SERVING)."""
    port = _free_port()
    address = f"127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items()} | {"AIRLOCK_RUNNER_TOKEN": token}
    spawned = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "airlock.runner",
        "--listen",
        address,
        "--workspace",
        str(workspace),
        stdout=asyncio.subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None
    startup_ms = float("nan")
    while line := await asyncio.wait_for(proc.stdout.readline(), 30):
        entry = json.loads(line)
        if entry.get("msg") == "serving":
            startup_ms = float(entry["startup_ms"])
            break
    _DRAINS.append(asyncio.create_task(_drain(proc.stdout)))  # a full pipe would block the runner
    probe = RemoteTurn(address, token, pong_agent())
    await probe.wait_until_serving(30)
    wall_ms = (time.perf_counter() - spawned) * 1000
    await probe.close()
    return proc, address, startup_ms, wall_ms


_DRAINS: list[asyncio.Task[None]] = []


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


def pong_agent() -> AgentSpec:
    return scripted_agent([text_step("pong", usage=(3, 1), cost="0.000001")], name="bench")


async def stop_runner(proc: asyncio.subprocess.Process) -> None:
    proc.terminate()
    await asyncio.wait_for(proc.wait(), 15)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    token = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        startups: list[float] = []
        walls: list[float] = []
        rss_start: list[float] = []
        private_start: list[float] = []
        for _ in range(args.starts):
            proc, _, startup_ms, wall_ms = await start_runner(workspace, token)
            startups.append(startup_ms)
            walls.append(wall_ms)
            rss_start.append(rss_mib(proc.pid))
            private_start.append(private_mib(proc.pid))
            await stop_runner(proc)

        proc, address, _, _ = await start_runner(workspace, token)
        turn = RemoteTurn(address, token, pong_agent())
        input = TurnInput.new("ping")
        for _ in range(30):  # warm-up: lazy imports, channel, first-call paths
            await turn.execute(input)
        times: list[float] = []
        for _ in range(args.runs):
            started = time.perf_counter()
            output = await turn.execute(input)
            times.append((time.perf_counter() - started) * 1000)
            assert output.message.as_text() == "pong"
        rss_after = rss_mib(proc.pid)
        await turn.close()
        await stop_runner(proc)

    rows = [
        ("round trip p50 (ms)", statistics.median(times), "≤ 3"),
        ("round trip p95 (ms)", pct(times, 0.95), ""),
        ("start → SERVING, runner log, median (ms)", statistics.median(startups), "≤ 400"),
        ("spawn → health SERVING, wall, median (ms)", statistics.median(walls), ""),
        ("RSS after start, median (MiB)", statistics.median(rss_start), "≤ 50"),
        ("private memory (USS) after start, median (MiB)", statistics.median(private_start), ""),
        (f"RSS after {args.runs + 30} executions (MiB)", rss_after, "≤ 50"),
    ]
    print(
        f"runner round trip: {args.runs} RemoteTurn.execute calls (scripted, loopback TCP); "
        f"{args.starts} starts"
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'metric':<{width}}  {'value':>9}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>9.2f}  {target}")


if __name__ == "__main__":
    asyncio.run(main())
