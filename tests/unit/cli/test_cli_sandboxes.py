"""``airlock sandboxes …`` and ``airlock submit --sandbox`` through CliRunner against a real
in-process Controller (real gRPC, SQLite, the default blob store in its data dir) whose agent
runs in ``backend: process`` boxes: jobs share the box's workspace, a pause keeps it across a
controller restart, a resume restores it, ``rm`` forgets the sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.jobs import SandboxActivity
from airlock.turn import ToolFinished

from .test_cli_jobs import BackgroundController, invoke, invoke_json

CONFIG = """
version: 1
agents:
  shell:
    provider: {kind: scripted, script: count.yaml}
    tools: [bash]
    backend: process
    defaults: {max_turns: 4, max_duration: 30s}
"""

COUNT_SCRIPT = """\
steps:
  - response:
      content:
        - {type: tool_use, id: t1, name: bash, input: {command: "echo job >> log.txt && wc -l < log.txt"}}
      stop_reason: tool_use
  - response:
      content: [{type: text, text: counted}]
      stop_reason: end_turn
"""


@pytest.fixture
def config(write_config) -> Path:  # type: ignore[no-untyped-def]
    return write_config(CONFIG, count__yaml=COUNT_SCRIPT)  # type: ignore[no-any-return]


def _started(config: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> BackgroundController:
    background = BackgroundController(config, data_dir).__enter__()
    monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
    return background


def _count(runner: CliRunner, background: BackgroundController, sandbox: str) -> str:
    """Submit a job in ``sandbox``, wait for it, and return the line count its tool printed."""
    job = invoke_json(runner, "submit", "shell", "count", "--sandbox", sandbox, "--wait")["job"]
    assert job["state"] == "succeeded" and job["sandbox"] == sandbox, job
    service = background.controller.service
    assert service is not None
    events: list[Any] = background.call(service.store.events(job["id"], kind="sandbox"))
    [done] = [
        e.data.event
        for e in events
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolFinished)
    ]
    return str(json.loads(done.output)["stdout"]).strip()


def test_jobs_share_a_sandbox_that_a_pause_keeps_across_a_restart(
    runner: CliRunner, config: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    controller = _started(config, data_dir, monkeypatch)
    try:
        sandbox, paused = _two_jobs_then_pause(runner, controller)
    finally:
        controller.__exit__(None, None, None)  # a restart: the sandbox stays paused
    again = _started(config, data_dir, monkeypatch)
    try:
        [kept] = invoke_json(runner, "sandboxes", "ls")["sandboxes"]
        assert (kept["state"], kept["manifest"]) == ("paused", paused["manifest"])
        shown = invoke(runner, "sandboxes", "resume", sandbox)
        assert shown.exit_code == 0 and f"sandbox {sandbox} of agent shell: running" in shown.stdout
        assert _count(runner, again, sandbox) == "3", "the workspace came back in a fresh box"
        gone = invoke(runner, "sandboxes", "rm", sandbox)
        assert gone.exit_code == 0 and f"removed sandbox {sandbox}" in gone.stdout
        assert invoke_json(runner, "sandboxes", "ls")["sandboxes"] == []
        unknown = invoke(runner, "submit", "shell", "count", "--sandbox", sandbox)
        assert unknown.exit_code != 0 and f"no sandbox {sandbox}" in unknown.output
    finally:
        again.__exit__(None, None, None)


def _two_jobs_then_pause(runner: CliRunner, controller: BackgroundController) -> tuple[str, dict[str, Any]]:
    created = invoke_json(runner, "sandboxes", "create", "shell", "--ttl", "1h")["sandbox"]
    sandbox = created["id"]
    assert (created["state"], created["ttl_s"], created["agent"]) == ("running", 3600, "shell")
    assert [_count(runner, controller, sandbox) for _ in range(2)] == ["1", "2"]
    [listed] = invoke_json(runner, "sandboxes", "ls")["sandboxes"]
    assert (listed["id"], listed["state"]) == (sandbox, "running")
    paused = invoke_json(runner, "sandboxes", "pause", sandbox)["sandbox"]
    assert paused["state"] == "paused" and paused["manifest"].startswith("sha256:")

    return sandbox, paused
