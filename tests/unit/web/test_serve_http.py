"""``airlock serve`` serves the HTTP API beside gRPC on its own loop: a real ``airlock serve``
process (process backend, scripted provider), driven over HTTP with httpx: submit, the job's
events to its end, the audit of the submit; ``--http-address off`` serves none, an address in
use stops the command (exit 3)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import sys
from asyncio.subprocess import PIPE
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from airlock.testing import text_step, tool_step

from .test_events import parse
from .world import process_agent

pytestmark = pytest.mark.timeout(120)


def config(tmp_path: Path) -> Path:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": {"a": process_agent([text_step("<b>done</b>")])}}))
    return path


def command(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "airlock",
        "serve",
        "--config",
        str(config(tmp_path)),
        "--data-dir",
        str(tmp_path / "data"),
        "--address",
        "127.0.0.1:0",
        "--json",
        *extra,
    ]


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, *extra: str) -> AsyncIterator[dict[str, Any]]:
    """``airlock serve`` running; its startup document. Stopped with SIGTERM (it must exit 0)."""
    proc = await asyncio.create_subprocess_exec(*command(tmp_path, *extra), stdout=PIPE, stderr=PIPE)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = await proc.stdout.readline()
        assert line, await proc.stderr.read()
        yield json.loads(line)
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_serve_answers_http_with_the_grpc_apis_token(tmp_path: Path) -> None:
    async with serving(tmp_path, "--http-address", "127.0.0.1:0") as started:
        url = started["http_address"]
        assert url.startswith("http://127.0.0.1:")
        bearer = {"Authorization": f"Bearer {started['token']}"}
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            assert (await client.get("/api/v1/jobs")).status_code == 401
            assert (await client.get("/api/v1/health")).json() == {"status": "ok"}
            submitted = await client.post(
                "/api/v1/jobs", json={"agent": "a", "message": "go"}, headers=bearer
            )
            assert submitted.status_code == 201, submitted.text
            job_id = submitted.json()["id"]
            async with client.stream("GET", f"/api/v1/jobs/{job_id}/events", headers=bearer) as events:
                text = (await events.aread()).decode()
            states = [m["data"]["data"]["state"] for m in parse(text) if m["event"] == "state"]
            assert states[-1] == "succeeded", text
            job = (await client.get(f"/api/v1/jobs/{job_id}", headers=bearer)).json()
            assert job["output"]["message"] is not None and "<b>done</b>" in json.dumps(job["output"])
            document = (await client.get("/api/v1/openapi.json")).json()
            assert "/api/v1/jobs/{job_id}/events" in document["paths"]
            assert (await client.get("/metrics")).status_code == 401
            scraped = await client.get("/metrics", headers=bearer)
            assert scraped.status_code == 200, (scraped.status_code, scraped.headers, scraped.text)
            families = {f.name for f in text_string_to_metric_families(scraped.text)}
            assert {"airlock_jobs_finished", "airlock_job_run_duration_seconds"} <= families


async def test_http_address_off_serves_no_http_api(tmp_path: Path) -> None:
    async with serving(tmp_path, "--http-address", "off") as started:
        assert started["http_address"] is None


async def test_an_http_address_in_use_stops_serve(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            *command(tmp_path, "--http-address", f"127.0.0.1:{port}"), stdout=PIPE, stderr=PIPE
        )
        out, err = await proc.communicate()
    assert proc.returncode == 3, err
    assert f"cannot listen on 127.0.0.1:{port}" in (out + err).decode()


async def test_serve_stops_with_an_event_stream_open(tmp_path: Path) -> None:
    slow = process_agent([tool_step("bash", {"command": "sleep 60"}, id="s"), text_step("late")], ("bash",))
    (tmp_path / "slow.yaml").write_text(json.dumps({"version": 1, "agents": {"a": slow}}))
    args = command(tmp_path, "--http-address", "127.0.0.1:0")
    args[args.index("--config") + 1] = str(tmp_path / "slow.yaml")
    proc = await asyncio.create_subprocess_exec(*args, stdout=PIPE, stderr=PIPE)
    try:
        assert proc.stdout is not None
        started = json.loads(await proc.stdout.readline())
        bearer = {"Authorization": f"Bearer {started['token']}"}
        async with httpx.AsyncClient(base_url=started["http_address"], headers=bearer, timeout=60) as client:
            job_id = (await client.post("/api/v1/jobs", json={"agent": "a", "message": "go"})).json()["id"]
            async with client.stream("GET", f"/api/v1/jobs/{job_id}/events") as events:
                lines = events.aiter_lines()
                async for line in lines:
                    if '"state":"running"' in line:
                        break
                proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(httpx.HTTPError):
                    async for _ in lines:
                        pass
        assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_console_login_survives_a_restart_of_serve(tmp_path: Path) -> None:
    """The login is sealed with a key derived from the data directory's audit key: the next
    ``airlock serve`` on the same data directory (or a replica sharing the audit key) reads it."""
    async with (
        serving(tmp_path, "--http-address", "127.0.0.1:0") as started,
        httpx.AsyncClient(base_url=started["http_address"], timeout=30) as client,
    ):
        login = await client.post("/login", data={"token": started["token"]})
        assert login.status_code == 200, login.text
        cookies = dict(client.cookies)
    async with (
        serving(tmp_path, "--http-address", "127.0.0.1:0") as again,
        httpx.AsyncClient(base_url=again["http_address"], cookies=cookies, timeout=30) as client,
    ):
        assert (await client.get("/api/v1/whoami")).status_code == 200
