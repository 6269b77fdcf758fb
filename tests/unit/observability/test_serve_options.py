"""``airlock serve --log-format json --metrics-address``: a real ``airlock serve`` process whose
log lines on stderr are JSON objects and whose ``/metrics`` (on a port it picked) parses with
prometheus_client's parser, running a job through its gRPC API."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from airlock.jobs import ControllerClient, JobState
from airlock.testing import text_step
from layer0 import TurnInput
from tests.support.controller import write_config

pytestmark = pytest.mark.timeout(120)


async def next_log(stderr: asyncio.StreamReader, logs: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """Read stderr until a JSON log line whose message starts with ``prefix``."""
    while True:
        line = await stderr.readline()
        assert line, f"serve ended; its log: {logs}"
        if line.startswith(b"{"):
            logs.append(json.loads(line))
            if logs[-1]["message"].startswith(prefix):
                return logs[-1]


async def test_serve_logs_json_and_serves_metrics(tmp_path: Path) -> None:
    agent = {
        "provider": {"kind": "scripted", "script": [text_step("done", usage=(7, 3))]},
        "backend": "process",
        "defaults": {"max_turns": 2, "max_duration": "60s"},
    }
    config = write_config(tmp_path, {"solo": agent})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "airlock", "serve", "--config", str(config), "--address", "127.0.0.1:0",
        "--data-dir", str(tmp_path / "data"), "--json", "--log-format", "json",
        "--metrics-address", "127.0.0.1:0",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    logs: list[dict[str, Any]] = []
    try:
        metrics_at = (await next_log(proc.stderr, logs, "metrics on http://"))["message"].split()[-1]
        started = json.loads(await proc.stdout.readline())
        async with ControllerClient(started["address"], started["token"]) as client:
            job = await client.submit("solo", TurnInput.new("go"))
            assert (await client.wait(job.id)).state is JobState.SUCCEEDED
        async with httpx.AsyncClient() as http:
            response = await http.get(metrics_at)
            missing = await http.get(metrics_at.replace("/metrics", "/other"))
    finally:
        proc.send_signal(signal.SIGTERM)
        rest = await proc.stderr.read()
        await proc.wait()
    assert response.status_code == 200 and missing.status_code == 404
    families = {f.name: f for f in text_string_to_metric_families(response.text)}
    finished = {
        (s.labels["state"], s.labels["agent"]): s.value for s in families["airlock_jobs_finished"].samples
    }
    assert finished[("succeeded", "solo")] == 1
    tokens = [s for s in families["airlock_model_tokens"].samples if s.name == "airlock_model_tokens_total"]
    assert sum(s.value for s in tokens) == 10
    logs += [json.loads(line) for line in rest.splitlines() if line.startswith(b"{")]
    assert logs and all({"time", "level", "logger", "message"} <= line.keys() for line in logs)
    assert started["token"] not in (json.dumps(logs))
