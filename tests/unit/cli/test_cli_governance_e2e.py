"""A gated job end to end through the CLI against a real in-process Controller (process
backend, real runner, real gRPC, real SQLite, its audit key): ``jobs show`` lists the call it
waits for, ``approve`` lets it run on, ``jobs audit`` shows its records and ``jobs verify``
finds the sealed chain intact."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.controller import _execute
from airlock.testing import text_step, tool_step

from .test_cli_jobs import BackgroundController

pytestmark = pytest.mark.timeout(120)

CONFIG = {
    "version": 1,
    "agents": {
        "ops": {
            "provider": {
                "kind": "scripted",
                "script": [tool_step("bash", {"command": "echo cleaned"}, id="b1"), text_step("cleaned up")],
            },
            "tools": ["bash"],
            "backend": "process",
            "defaults": {"max_turns": 4, "max_duration": "60s"},
            "approval": {"tools": ["bash"], "approvers": ["ana", "bob"], "strategy": "any"},
        }
    },
}


@pytest.fixture
def controller(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[BackgroundController]:
    async def no_reap(self: Any) -> list[str]:  # recovery must not touch this machine's Docker
        return []

    monkeypatch.setattr(_execute.AgentRunner, "reap", no_reap)
    config = tmp_path / "airlock.yaml"
    config.write_text(json.dumps(CONFIG))
    data_dir = tmp_path / "data"
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(data_dir))
    monkeypatch.delenv("AIRLOCK_TOKEN", raising=False)
    with BackgroundController(config, data_dir) as background:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
        yield background


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def state_of(runner: CliRunner, job_id: str, state: str, within: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while True:
        result = invoke(runner, "jobs", "show", job_id, "--json")
        assert result.exit_code == 0, result.output
        job: dict[str, Any] = json.loads(result.stdout)["job"]
        if job["state"] == state:
            return job
        assert time.monotonic() < deadline and job["state"] not in ("failed", "succeeded"), job
        time.sleep(0.05)


def test_a_gated_job_is_shown_approved_audited_and_verified(
    runner: CliRunner, controller: BackgroundController
) -> None:
    job_id = invoke(runner, "submit", "ops", "clean up").stdout.strip()
    job = state_of(runner, job_id, "awaiting_approval")
    assert [c["name"] for c in job["approval"]["calls"]] == ["bash"]
    shown = " ".join(invoke(runner, "jobs", "show", job_id).stdout.split())
    assert 'waiting for bash {"command": "echo cleaned"}' in shown and "(agent ops)" in shown
    assert "approvers ana, bob (strategy any; on timeout: reject)" in shown

    refused = invoke(runner, "approve", job_id, "--as", "eve")
    assert refused.exit_code == 2 and "PERMISSION_DENIED" in refused.stderr
    approved = invoke(runner, "approve", job_id, "--as", "ana", "--comment", "go ahead")
    assert approved.exit_code == 0, approved.output
    assert f"approved job {job_id} as ana" in approved.stdout and "outcome: approved" in approved.stdout
    done = state_of(runner, job_id, "succeeded")
    assert done["output"]["message"] == "cleaned up"

    audit = invoke(runner, "jobs", "audit", job_id)
    assert audit.exit_code == 0, audit.output
    out = audit.stdout
    assert f"job {job_id} (ops) succeeded" in out
    assert 'input "clean up"' in out
    assert "approval_requested bash wait for any of ana, bob" in out
    assert "approval_decision ana approved: go ahead" in out
    assert 'tool_call bash({"command": "echo cleaned"}) ->' in out
    assert 'model_response "cleaned up"' in out
    records = json.loads(invoke(runner, "jobs", "audit", job_id, "--json", "--thoughts").stdout)
    assert records and all(r["job"] == job_id and r["seal"] for r in records)

    verified = invoke(runner, "jobs", "verify", job_id)
    assert verified.exit_code == 0, verified.output
    assert f"chain intact: {len(records)} records, sealed" in verified.stdout
