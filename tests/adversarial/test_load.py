"""Load on a real controller (``airlock serve`` in its own process, Docker backend): a batch of
jobs at concurrency 8 with the scripted model, while a slow-loris client holds connections to
the API open, trickling bytes. All jobs complete and none is lost, nothing is left behind
(containers, networks, state directories), the controller's memory stays bounded, and an
ordinary client is answered throughout. Quick mode (CI) runs 24 jobs; ``AIRLOCK_LOAD_JOBS=100``
is the full run (``bench/jobs_throughput.py`` measures the throughput)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from airlock.jobs import ControllerClient, JobState
from tests.support.containers import assert_none_left
from tests.support.servers import free_port, wait_serving

pytestmark = [pytest.mark.docker, pytest.mark.attack("load"), pytest.mark.timeout(900)]

JOBS = int(os.environ.get("AIRLOCK_LOAD_JOBS", "24"))
CONCURRENCY = 8
#: The controller's resident memory may grow by this much over the batch (after a warm-up).
RSS_BOUND_MIB = 64
STEPS = [
    {
        "response": {
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "echo hi"}}],
            "stop_reason": "tool_use",
        }
    },
    {"response": {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"}},
]


@dataclass
class Serve:
    address: str
    token: str
    proc: subprocess.Popen[bytes]
    state_dir: Path

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@pytest.fixture
def serve(tmp_path: Path, runner_image: str, docker_client: Any) -> Iterator[Serve]:
    token = secrets.token_urlsafe(32)
    (tmp_path / "token").write_text(token)
    agent = {
        "provider": {"kind": "scripted", "script": STEPS},
        "tools": ["bash"],
        "resources": {"memory": "128Mi"},
    }
    (tmp_path / "airlock.yaml").write_text(json.dumps({"version": 1, "agents": {"busy": agent}}))
    state_dir = Path(f"/tmp/al-load-{os.getpid()}-{secrets.token_hex(3)}")
    address = f"127.0.0.1:{free_port()}"
    airlock = str(Path(sys.executable).with_name("airlock"))
    argv = [
        airlock,
        "serve",
        "--config",
        str(tmp_path / "airlock.yaml"),
        "--data-dir",
        str(tmp_path / "data"),
    ]
    argv += ["--address", address, "--token-file", str(tmp_path / "token"), "--concurrency", str(CONCURRENCY)]
    env = {**os.environ, "AIRLOCK_CONFIG": "", "AIRLOCK_STATE_DIR": str(state_dir)}
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_serving(address, proc)
        yield Serve(address, token, proc, state_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert_none_left(docker_client)


async def slow_loris(address: str, stop: asyncio.Event, connections: int = 64) -> int:
    """Hold ``connections`` open, each sending the HTTP/2 preface one byte per second."""
    host, port = address.rsplit(":", 1)
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    writers = []
    for _ in range(connections):
        _, writer = await asyncio.open_connection(host, int(port))
        writers.append(writer)
    sent = 0
    while not stop.is_set():
        for w in writers:
            if not w.is_closing():
                w.write(preface[sent % len(preface) : sent % len(preface) + 1])
        sent += 1
        await asyncio.sleep(1.0)
    for w in writers:
        w.close()
    return sent


async def test_a_batch_of_jobs_under_a_slow_loris(serve: Serve) -> None:
    async with ControllerClient(serve.address, serve.token) as client:
        warm = [await client.submit("busy", "warm") for _ in range(CONCURRENCY)]
        for job in warm:
            assert (await client.wait(job.id)).state is JobState.SUCCEEDED
        before = serve.rss_mib()
        stop = asyncio.Event()
        loris = asyncio.create_task(slow_loris(serve.address, stop))
        answered: list[float] = []

        async def ordinary_client() -> None:
            while not stop.is_set():
                began = time.monotonic()
                await asyncio.wait_for(client.agents(), 10)  # never blocked by the slow clients
                answered.append(time.monotonic() - began)
                await asyncio.sleep(0.5)

        poller = asyncio.create_task(ordinary_client())
        submitted = [await client.submit("busy", f"job {i}") for i in range(JOBS)]
        finished = [await client.wait(job.id) for job in submitted]
        stop.set()
        await poller
        assert await loris > 0
        after = serve.rss_mib()
    print(
        f"load: {JOBS} jobs at concurrency {CONCURRENCY}, controller RSS {before:.0f} -> {after:.0f} MiB, "
        f"ordinary client answered {len(answered)} times, slowest {max(answered or [0]) * 1000:.0f} ms"
    )
    states = [job.state for job in finished]
    assert states == [JobState.SUCCEEDED] * JOBS, [(j.id, j.state, j.error) for j in finished if j.error]
    assert len({job.id for job in finished}) == JOBS  # none lost, none merged
    assert answered, "the ordinary client was never answered"
    assert after - before < RSS_BOUND_MIB, f"controller RSS grew {after - before:.0f} MiB over {JOBS} jobs"
    assert not serve.state_dir.exists() or list(serve.state_dir.iterdir()) == []
