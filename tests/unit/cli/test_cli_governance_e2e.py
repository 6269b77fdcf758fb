"""A gated job end to end through the CLI against a real in-process Controller (process
backend, real runner, real gRPC, real SQLite, its audit key, real API keys): the administrator
makes keys, a submitter's job waits, ``jobs show`` lists the call it waits for, the submitter
cannot approve it, an approver not among the agent's approvers cannot either, one who is lets
it run on (recorded as that principal), ``jobs audit`` shows its records, ``jobs verify`` finds
the sealed chain intact and ``airlock audit`` lists every decision with its outcome."""

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


def invoke(runner: CliRunner, *args: str, key: str | None = None) -> Any:
    """``airlock ARGS`` with ``key`` (None: the bootstrap administrator's token file)."""
    env = {"COLUMNS": "200", **({"AIRLOCK_TOKEN": key} if key else {})}
    return runner.invoke(app, list(args), env=env)


def new_key(runner: CliRunner, name: str, *roles: str) -> str:
    """An API key of ``name`` (tenant default) made by the administrator: its secret."""
    made = invoke(
        runner, "keys", "create", name, "--tenant", "default", *[a for r in roles for a in ("--role", r)]
    )
    assert made.exit_code == 0, made.output
    secret: str = made.stdout.strip()
    assert secret.startswith("ak_") and "shown only now" in made.stderr
    return secret


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
    sam = new_key(runner, "sam", "submitter")
    ana, eve = new_key(runner, "ana", "approver", "viewer"), new_key(runner, "eve", "approver", "viewer")
    job_id = invoke(runner, "submit", "ops", "clean up", key=sam).stdout.strip()
    job = state_of(runner, job_id, "awaiting_approval")
    assert (job["tenant"], job["owner"]) == ("default", "sam")
    assert [c["name"] for c in job["approval"]["calls"]] == ["bash"]
    shown = " ".join(invoke(runner, "jobs", "show", job_id).stdout.split())
    assert 'waiting for bash {"command": "echo cleaned"}' in shown and "(agent ops)" in shown
    assert "approvers ana, bob (strategy any; on timeout: reject)" in shown

    own = invoke(runner, "approve", job_id, key=sam)
    assert own.exit_code == 2 and "needs permission jobs.approve" in " ".join(own.stderr.split())
    refused = invoke(runner, "approve", job_id, key=eve)
    assert refused.exit_code == 2 and "'eve' is not an approver" in refused.stderr
    approved = invoke(runner, "approve", job_id, "--comment", "go ahead", key=ana)
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

    decisions = json.loads(invoke(runner, "audit", "--action", "ApproveJob", "--json").stdout)
    assert [(d["principal"], d["outcome"], d["target"]) for d in decisions] == [
        ("ana", "OK", job_id),
        ("eve", "PERMISSION_DENIED", job_id),
        ("sam", "PERMISSION_DENIED", job_id),
    ]
    assert all(d["peer"].startswith("ipv4:127.0.0.1:") for d in decisions)
    (submitted,) = json.loads(invoke(runner, "audit", "--action", "SubmitJob", "--json").stdout)
    assert (submitted["principal"], submitted["outcome"], submitted["target"]) == ("sam", "OK", job_id)
    made = json.loads(invoke(runner, "audit", "--action", "CreateKey", "--json").stdout)
    assert [(m["principal"], m["outcome"]) for m in made] == [("admin", "OK")] * 3


def test_keys_are_listed_used_and_revoked_from_the_cli(
    runner: CliRunner, controller: BackgroundController
) -> None:
    ana = new_key(runner, "ana", "viewer")
    assert "ana (tenant default, by key)" in invoke(runner, "whoami", key=ana).stdout
    (listed,) = json.loads(invoke(runner, "keys", "ls", "--json").stdout)
    assert (listed["name"], listed["roles"], listed["created_by"]) == ("ana", ["viewer"], "admin")
    assert ana.startswith(f"ak_{listed['id']}_") and ana not in invoke(runner, "keys", "ls").stdout
    (tenant,) = json.loads(invoke(runner, "tenants", "--json", key=ana).stdout)
    assert tenant["tenant"] == "default" and {q["quota"] for q in tenant["quotas"]} >= {"concurrent_jobs"}
    denied = invoke(runner, "keys", "ls", key=ana)
    assert denied.exit_code == 2 and "controller.admin" in " ".join(denied.stderr.split())
    assert invoke(runner, "keys", "revoke", listed["id"]).exit_code == 0
    refused = invoke(runner, "whoami", key=ana)
    assert refused.exit_code == 2 and "invalid or expired API key" in refused.stderr
    assert json.loads(invoke(runner, "keys", "ls", "--all", "--json").stdout)[0]["revoked_by"] == "admin"
