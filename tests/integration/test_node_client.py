"""A client in another language, written from ``protos/`` alone (issue 35): ``tests/node/``
(@grpc/grpc-js + @grpc/proto-loader) drives a real runner and a real controller server on
loopback, and this test asserts on the JSON it prints. ``.ci/run`` installs its packages."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, SqliteJobStore
from airlock.runner import RunnerConfig, RunnerServer
from airlock.state import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = ROOT / "tests" / "node"
NODE = shutil.which("node")

#: CI sets AIRLOCK_REQUIRE_NODE=1: there a missing node or node_modules fails instead of skipping.
pytestmark = pytest.mark.skipif(
    (NODE is None or not (NODE_DIR / "node_modules").is_dir()) and not os.environ.get("AIRLOCK_REQUIRE_NODE"),
    reason="needs node and tests/node/node_modules (npm ci --prefix tests/node; .ci/run does it)",
)


def _googleapis() -> str:
    sys.path.insert(0, str(ROOT / "scripts"))
    from gen_protos import googleapis_include

    return str(googleapis_include())


@pytest.fixture
async def servers(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """A runner and a controller (its job service not started: jobs stay QUEUED)."""
    token = secrets.token_urlsafe(24)
    (tmp_path / "s.yaml").write_text("steps: []\n")
    config = tmp_path / "airlock.yaml"
    config.write_text(
        "version: 1\nagents:\n  a:\n    provider: {kind: scripted, script: s.yaml}\n    backend: process\n"
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with (
        RunnerServer(RunnerConfig(token=token, workspace=workspace)) as runner,
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
    ):
        runner_address = await runner.start("127.0.0.1:0")
        service = JobService(store, AgentRunner(load_config(config)), state)
        async with ControllerServer(service, token, "127.0.0.1:0") as controller:
            assert controller.address is not None
            yield {
                "AIRLOCK_RUNNER": runner_address,
                "AIRLOCK_RUNNER_TOKEN": token,
                "AIRLOCK_CONTROLLER": controller.address,
                "AIRLOCK_CONTROLLER_TOKEN": token,
            }


@pytest.fixture
async def results(servers: dict[str, str]) -> dict[str, Any]:
    assert NODE is not None
    env = {
        **os.environ,
        **servers,
        "AIRLOCK_PROTOS": str(ROOT / "protos"),
        "AIRLOCK_GOOGLEAPIS": _googleapis(),
    }
    proc = await asyncio.create_subprocess_exec(
        NODE,
        str(NODE_DIR / "contract_client.js"),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return json.loads(out)  # type: ignore[no-any-return]


def _details(error: dict[str, Any]) -> dict[str, Any]:
    """The decoded google.rpc details (grpc-status-details-bin) by type."""
    assert error["details"], error
    return {d["type"]: d["value"] for d in error["details"]}


async def test_the_runner_executes_a_scripted_turn(results: dict[str, Any]) -> None:
    execute = results["runner"]["execute"]
    assert execute["error"] is None
    assert execute["kinds"][0] == "started" and execute["kinds"][-1] == "output"
    output = execute["last"]["output"]
    assert output["message"]["text"] == "done in node" and output["exit_reason"]["kind"] == "complete"


@pytest.mark.parametrize("control", ["step", "resume"])
async def test_a_paused_execution_is_stepped_or_resumed(results: dict[str, Any], control: str) -> None:
    paused = results["runner"][f"paused_{control}"]
    assert paused["error"] is None
    assert paused["kinds"][0] == "paused" and paused["kinds"][-1] == "output"
    (answer,) = paused["answers"]
    assert "ok" in answer, answer
    if control == "step":
        assert answer["ok"] == {"complete": True, "text": "after Step"}


@pytest.mark.parametrize("method", ["cancel", "pause", "resume", "step", "signal"])
async def test_controls_of_an_unknown_execution_are_not_found(results: dict[str, Any], method: str) -> None:
    error = results["runner"][f"{method}_unknown"]["error"]
    assert error["code"] == "NOT_FOUND" and "no-such-execution" in error["message"]
    assert error["reason"] == "not_found"  # the legacy trailer, superseded by ErrorInfo.reason
    info = _details(error)["google.rpc.ErrorInfo"]
    assert info == {"reason": "NOT_FOUND", "domain": "airlock.dev"}


MALFORMED_RUNNER = {
    "empty_execute": ("INVALID_ARGUMENT", ["agent", "input"]),
    "unknown_provider_kind": ("INVALID_ARGUMENT", ["agent.provider.kind"]),
    "bad_json_metadata": ("INVALID_ARGUMENT", ["input.metadata"]),
    "no_token": ("UNAUTHENTICATED", []),
    "wrong_token": ("UNAUTHENTICATED", []),
    "cancel_without_id": ("INVALID_ARGUMENT", ["execution_id"]),
    "step_without_id": ("INVALID_ARGUMENT", ["execution_id"]),
    "unknown_tool_choice": ("INVALID_ARGUMENT", ["agent.provider.tool_choice_first"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_RUNNER))
async def test_malformed_runner_requests(results: dict[str, Any], case: str) -> None:
    code, fields = MALFORMED_RUNNER[case]
    error = results["runner"]["malformed"][case]
    assert error["code"] == code
    for field in fields:
        assert f"{field}: " in error["message"]
    if fields:
        violations = _details(error)["google.rpc.BadRequest"]["fieldViolations"]
        assert {v["field"] for v in violations} >= set(fields)
        assert _details(error)["google.rpc.ErrorInfo"]["reason"]


async def test_the_controller_submits_lists_watches_and_cancels(results: dict[str, Any]) -> None:
    ctl = results["controller"]
    assert [a["name"] for a in ctl["agents"]["ok"]["agents"]] == ["a"]
    job = ctl["submit"]["ok"]
    assert job["state"] == "JOB_STATE_QUEUED" and job["input"]["message"]["text"] == "from node"
    assert ctl["get"]["ok"]["id"] == job["id"]
    assert [j["id"] for j in ctl["list"]["ok"]["jobs"]] == [job["id"]]
    assert ctl["artifacts"]["ok"].get("artifacts", []) == []
    assert ctl["cancel"]["ok"]["state"] == "JOB_STATE_CANCELLED"
    assert ctl["watch"]["error"] is None and ctl["watch"]["kinds"]
    assert ctl["approve_not_waiting"]["error"]["code"] == "FAILED_PRECONDITION"


MALFORMED_CONTROLLER = {
    "empty_submit": "INVALID_ARGUMENT",
    "unknown_agent": "NOT_FOUND",
    "unknown_job": "NOT_FOUND",
    "no_token": "UNAUTHENTICATED",
}


@pytest.mark.parametrize("case", sorted(MALFORMED_CONTROLLER))
async def test_malformed_controller_requests(results: dict[str, Any], case: str) -> None:
    error = results["controller"]["malformed"][case]
    assert error["code"] == MALFORMED_CONTROLLER[case], error
    if case == "empty_submit":
        assert "agent" in {v["field"] for v in _details(error)["google.rpc.BadRequest"]["fieldViolations"]}


async def test_a_paused_execution_takes_a_signal_and_is_cancelled(results: dict[str, Any]) -> None:
    run = results["runner"]["signal_cancel"]
    assert run["error"] is None
    assert [name for name, _ in run["answers"]] == ["Signal", "Cancel"]
    assert all("ok" in answer for _, answer in run["answers"]), run["answers"]
    assert run["kinds"][0] == "paused" and run["kinds"][-1] == "output"
    assert run["last"]["output"]["exit_reason"] == {"custom": "cancelled", "kind": "custom"}


async def test_files_go_up_in_chunks_and_come_back_as_artifacts(results: dict[str, Any]) -> None:
    files = results["runner"]["files"]
    assert files["put"]["ok"] == {"files": "2", "bytes": "15"}  # int64 reads as a string in JS
    assert files["error"] is None
    assert files["files"] == {"in/a.txt": "alpha beta", "in/b.txt": "gamma"}
