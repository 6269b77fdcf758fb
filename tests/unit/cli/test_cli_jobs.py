"""``airlock submit`` and ``airlock jobs …`` through CliRunner against a real in-process
Controller (its own thread and event loop, real gRPC on loopback, real SQLite store).

The agents are ``backend: process`` on the scripted provider: each job's turn runs in a
real local runner process, no Docker.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.cli._common import EXIT_CANCELLED, EXIT_ENV, EXIT_INCOMPLETE, EXIT_TURN, EXIT_USAGE
from airlock.config import load_config
from airlock.controller import (
    Controller,
    ControllerOptions,
    ServerTls,
    ServiceSettings,
    SqliteJobStore,
    _execute,
)
from airlock.jobs import JobState, SandboxActivity
from airlock.turn import ToolStarted
from layer0 import TurnInput

from .clihelp import CALC_SCRIPT

CONFIG = """
version: 1
agents:
  calc:
    provider: {kind: scripted, script: calc.yaml}
    system: Use the calculator.
    tools: [calculator]
    backend: process
    defaults: {max_turns: 6, max_duration: 30s}
  slow:
    provider: {kind: scripted, script: slow.yaml}
    tools: [bash]
    backend: process
    defaults: {max_turns: 4, max_duration: 2m}
  boss:
    provider: {kind: scripted, script: boss.yaml}
    tools: [delegate]
    effects: {delegate: [calc]}
    backend: process
    defaults: {max_turns: 4, max_duration: 30s}
  broken:
    provider: {kind: scripted, script: bad.yaml}
    backend: process
"""

SLOW_SCRIPT = """\
steps:
  - response:
      content:
        - {type: tool_use, id: t1, name: bash, input: {command: "sleep 30"}}
      stop_reason: tool_use
  - response:
      content: [{type: text, text: "slept"}]
      stop_reason: end_turn
"""

BOSS_SCRIPT = """\
steps:
  - response:
      content:
        - {type: tool_use, id: d1, name: delegate, input: {agent: calc, message: "What is 17 * 23?"}}
      stop_reason: tool_use
  - response:
      content: [{type: text, text: "delegated to calc"}]
      stop_reason: end_turn
"""


class BackgroundController:
    """A Controller served from its own thread and event loop (the CLI runs its own loop)."""

    def __init__(self, config: Path, data_dir: Path, tls: ServerTls | None = None, **settings: Any) -> None:
        options = ControllerOptions(
            data_dir=data_dir, address="127.0.0.1:0", settings=ServiceSettings(**settings), tls=tls
        )
        self.controller = Controller(load_config(config), options)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="controller", daemon=True)

    def call(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def __enter__(self) -> BackgroundController:
        self.thread.start()
        self.call(self.controller.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.call(self.controller.__aexit__(None, None, None))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    @property
    def address(self) -> str:
        return self.controller.address


@pytest.fixture(autouse=True)
def no_reap(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_reap(self: Any) -> list[str]:  # recovery must not touch this machine's Docker
        return []

    monkeypatch.setattr(_execute.AgentRunner, "reap", no_reap)


@pytest.fixture
def config(write_config) -> Path:  # type: ignore[no-untyped-def]
    return write_config(  # type: ignore[no-any-return]
        CONFIG,
        calc__yaml=CALC_SCRIPT,
        slow__yaml=SLOW_SCRIPT,
        boss__yaml=BOSS_SCRIPT,
        bad__yaml="responses: []\n",
    )


@pytest.fixture
def controller(
    config: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[BackgroundController]:
    with BackgroundController(config, data_dir) as background:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
        yield background


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def invoke_json(runner: CliRunner, *args: str, code: int = 0) -> dict[str, Any]:
    result = invoke(runner, *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def wait_for_state(runner: CliRunner, job_id: str, state: JobState, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = invoke_json(runner, "jobs", "show", job_id)["job"]
        if job["state"] == state.value or time.monotonic() > deadline:
            assert job["state"] == state.value, job
            return job  # type: ignore[no-any-return]
        time.sleep(0.1)


# -- submit ------------------------------------------------------------------------------------------


def test_submit_wait_shows_progress_answer_and_summary(
    runner: CliRunner, controller: BackgroundController
) -> None:
    result = invoke(runner, "submit", "calc", "What is 17 * 23?", "--wait")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"to {controller.address}" in out
    assert "queued" in out
    assert "calc: provisioning a process sandbox (scripted/-)" in out
    assert "sandbox ready in" in out
    # the recorded InferenceFinished's costs came back as Decimals
    assert "model call 1: 40 in / 12 out tokens, $0.0001" in out
    assert "tool calculator" in out and '"17 * 23"' in out
    assert "✓ calculator" in out
    assert "succeeded: exit reason complete" in out
    assert "17 x 23 = 391." in out
    assert "100 / 20" in out and "$0.0003" in out and "calculator x1" in out


def test_submit_wait_json_is_one_document(runner: CliRunner, controller: BackgroundController) -> None:
    data = invoke_json(runner, "submit", "calc", "What is 17 * 23?", "--wait", "--session", "s-1")
    job = data["job"]
    assert job["state"] == "succeeded"
    assert job["output"]["message"] == "17 x 23 = 391."
    assert job["output"]["metadata"]["cost"] == "0.0003"
    assert job["input"]["session"] == "s-1"
    assert data["exit_code"] == 0
    summary = data["summary"]
    assert summary["job"] == job["id"] and summary["state"] == "succeeded"
    assert summary["exit_reason"] == "complete" and summary["exit_code"] == 0
    assert summary["tools_called"] == {"calculator": 1}
    assert (summary["turns"], summary["tokens_in"], summary["tokens_out"]) == (2, 100, 20)
    assert summary["backend"] == "process"
    assert summary["effects"] == {"ok": 1}  # the session history, written back


def test_submit_prints_only_the_id_then_watch_replays_the_finished_job(
    runner: CliRunner, controller: BackgroundController
) -> None:
    result = invoke(runner, "submit", "calc", "What is 17 * 23?", "--queue", "team-a", "--timeout", "45s")
    assert result.exit_code == 0, result.output
    job_id = result.stdout.strip()
    assert job_id.startswith("j") and "\n" not in job_id
    assert f"airlock jobs watch {job_id}" in result.stderr
    job = wait_for_state(runner, job_id, JobState.SUCCEEDED)
    assert job["queue"] == "team-a"
    assert job["max_duration_ms"] == 45_000
    watched = invoke(runner, "jobs", "watch", job_id)
    assert watched.exit_code == 0, watched.output
    assert "✓ calculator" in watched.stdout
    assert "sandbox ready in" in watched.stdout
    assert "17 x 23 = 391." in watched.stdout
    streamed = invoke(runner, "jobs", "watch", job_id, "--json")
    assert streamed.exit_code == 0, streamed.output
    *events, data = [json.loads(line) for line in streamed.stdout.splitlines()]
    assert events and all(e["event"]["job_id"] == job_id for e in events)
    assert data["job"]["id"] == job_id and data["summary"]["exit_reason"] == "complete"


def test_submit_json_without_wait_returns_the_queued_job(
    runner: CliRunner, controller: BackgroundController
) -> None:
    job = invoke_json(runner, "submit", "calc", "hi")["job"]
    assert job["agent"] == "calc"
    assert job["state"] in {"queued", "provisioning", "running"}
    assert job["input"]["message"] == "hi"
    wait_for_state(runner, job["id"], JobState.SUCCEEDED)


def test_failed_job_exits_4_with_its_error(runner: CliRunner, controller: BackgroundController) -> None:
    result = invoke(runner, "submit", "broken", "hi", "--wait")
    assert result.exit_code == EXIT_TURN, result.output
    assert "✗ job" in result.stdout and "failed" in result.stdout
    assert "bad.yaml" in result.stdout
    assert "ended failed" in result.stderr and "exit code 4" in result.stderr
    data = invoke_json(runner, "submit", "broken", "hi", "--wait", code=EXIT_TURN)
    assert data["job"]["state"] == "failed"
    assert "bad.yaml" in data["job"]["error"]["message"]
    assert data["exit_code"] == EXIT_TURN


def test_timed_out_job_exits_1(runner: CliRunner, controller: BackgroundController) -> None:
    data = invoke_json(runner, "submit", "slow", "sleep", "--timeout", "2s", "--wait", code=EXIT_INCOMPLETE)
    assert data["job"]["state"] == "timed_out"
    assert data["job"]["error"]["kind"] == "timeout"
    assert data["summary"]["exit_code"] == EXIT_INCOMPLETE


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["submit", "nobody", "hi"], "nobody"),
        (["submit", "calc", "hi", "--timeout", "soon"], "--timeout"),
        (["jobs", "show", "j-none"], "j-none"),
        (["jobs", "watch", "j-none"], "j-none"),
        (["jobs", "logs", "j-none"], "j-none"),
        (["jobs", "cancel", "j-none"], "j-none"),
        (["jobs", "ls", "--state", "bogus"], "bogus"),
    ],
)
def test_unknown_agent_job_or_bad_flag_exits_2(
    runner: CliRunner, controller: BackgroundController, args: list[str], message: str
) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == EXIT_USAGE, result.output
    assert message in result.output


def test_controller_errors_in_json(runner: CliRunner, controller: BackgroundController) -> None:
    data = invoke_json(runner, "jobs", "show", "j-none", code=EXIT_USAGE)
    assert data == {"error": {"code": "NOT_FOUND", "message": "no job 'j-none'"}, "exit_code": EXIT_USAGE}


# -- auth and reachability -----------------------------------------------------------------------


def test_wrong_or_missing_token_exits_2(
    runner: CliRunner, controller: BackgroundController, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = invoke(runner, "jobs", "ls", "--token", "not-the-token")
    assert result.exit_code == EXIT_USAGE, result.output
    assert "UNAUTHENTICATED" in result.stderr and "invalid credentials" in result.stderr
    assert "not-the-token" not in result.output
    monkeypatch.setenv("AIRLOCK_TOKEN", "also-wrong")
    assert invoke(runner, "jobs", "ls").exit_code == EXIT_USAGE
    monkeypatch.delenv("AIRLOCK_TOKEN")
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(tmp_path / "elsewhere"))  # no token file there
    data = invoke_json(runner, "jobs", "ls", code=EXIT_USAGE)
    assert data["error"]["code"] == "UNAUTHENTICATED"
    assert "no controller token" in data["error"]["message"]
    token = controller.controller.token
    assert invoke(runner, "jobs", "ls", "--token", token).exit_code == 0


def test_no_controller_exits_3(runner: CliRunner, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRLOCK_CONTROLLER", raising=False)
    result = invoke(runner, "jobs", "ls", "--address", "127.0.0.1:1", "--token", "t")
    assert result.exit_code == EXIT_ENV, result.output
    assert "no controller at 127.0.0.1:1" in result.stderr and "airlock serve" in result.stderr
    data = invoke_json(
        runner, "submit", "calc", "hi", "--address", "127.0.0.1:1", "--token", "t", code=EXIT_ENV
    )
    assert data["error"]["code"] == "UNAVAILABLE"


# -- jobs ls / show / logs / cancel ------------------------------------------------------------------


def test_jobs_ls_filters_and_table(runner: CliRunner, controller: BackgroundController) -> None:
    first = invoke_json(runner, "submit", "calc", "one", "--wait")["job"]["id"]
    second = invoke_json(runner, "submit", "calc", "two", "--wait", "--session", "s-ls")["job"]["id"]
    failed = invoke_json(runner, "submit", "broken", "three", "--wait", code=EXIT_TURN)["job"]["id"]
    jobs = invoke_json(runner, "jobs", "ls")["jobs"]
    assert [j["id"] for j in jobs] == [failed, second, first]  # most recent first
    assert [j["id"] for j in invoke_json(runner, "jobs", "ls", "--limit", "1")["jobs"]] == [failed]
    assert [j["id"] for j in invoke_json(runner, "jobs", "ls", "--agent", "broken")["jobs"]] == [failed]
    assert [j["id"] for j in invoke_json(runner, "jobs", "ls", "--session", "s-ls")["jobs"]] == [second]
    by_state = invoke_json(runner, "jobs", "ls", "--state", "succeeded", "--state", "FAILED")["jobs"]
    assert len(by_state) == 3
    assert [j["id"] for j in invoke_json(runner, "jobs", "ls", "--state", "failed")["jobs"]] == [failed]
    assert invoke_json(runner, "jobs", "ls", "--state", "running")["jobs"] == []
    table = invoke(runner, "jobs", "ls")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["id", "agent", "state", "origin", "created", "duration", "exit", "reason"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert rows[first][1:4] == ["calc", "succeeded", "submit"]
    assert rows[first][-1] == "complete"
    assert rows[failed][1:3] == ["broken", "failed"] and rows[failed][-1] == "controller"
    assert "no jobs match" in invoke(runner, "jobs", "ls", "--agent", "slow").stdout


def test_jobs_ls_fits_a_narrow_terminal(runner: CliRunner, controller: BackgroundController) -> None:
    job_id = invoke_json(runner, "submit", "calc", "one", "--wait")["job"]["id"]
    result = runner.invoke(app, ["jobs", "ls"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert job_id in result.stdout and "succeeded" in result.stdout  # whole, not "su…"
    assert all(len(line) <= 80 for line in result.stdout.splitlines())


def test_jobs_show_with_children_and_effects(runner: CliRunner, controller: BackgroundController) -> None:
    data = invoke_json(runner, "submit", "boss", "delegate it", "--wait")
    job = data["job"]
    assert job["output"]["message"] == "delegated to calc"
    assert data["summary"]["effects"] == {"ok": 1}
    [child_id] = job["children"]
    shown = invoke_json(runner, "jobs", "show", job["id"])
    assert shown["children"] == [
        {"id": child_id, "agent": "calc", "origin": "delegate", "state": "succeeded"}
    ]
    assert shown["effects_summary"]["by_status"] == {"ok": 1}
    assert shown["effects_summary"]["outcomes"][0]["effect"] == "delegate"
    result = invoke(runner, "jobs", "show", job["id"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in (job["id"], "boss", "succeeded", "complete", "submit", "delegate it", "delegated to calc"):
        assert text in out
    assert f"{child_id} (calc, delegate) succeeded" in out
    assert "1 ok" in out and "#0 delegate ok → calc" in out
    assert "tools called" in out and "delegate x1" in out
    child = invoke(runner, "jobs", "show", child_id)
    assert f"delegate ← {job['id']}" in child.stdout
    assert "17 x 23 = 391." in child.stdout
    ls = invoke(runner, "jobs", "ls")
    assert f"delegate ← {job['id']}" in ls.stdout
    watched = invoke(runner, "jobs", "watch", job["id"])
    assert f"child job {child_id} (calc, delegate) started" in watched.stdout
    assert "finished: succeeded" in watched.stdout
    assert "effect delegate ok → calc" in watched.stdout


def wait_for_a_tool_start(controller: BackgroundController, job_id: str, timeout: float = 30) -> None:
    """Until the job's record shows a tool call started (running is not enough: the turn may
    still be asking its model)."""
    service = controller.controller.service
    assert service is not None
    deadline = time.monotonic() + timeout
    while not any(
        isinstance(e.data, SandboxActivity) and isinstance(e.data.event, ToolStarted)
        for e in controller.call(service.store.events(job_id))
    ):
        assert time.monotonic() < deadline, f"no tool started in job {job_id} within {timeout:g}s"
        time.sleep(0.05)


def test_cancel_a_running_job(runner: CliRunner, controller: BackgroundController) -> None:
    job_id = invoke_json(runner, "submit", "slow", "sleep")["job"]["id"]
    wait_for_state(runner, job_id, JobState.RUNNING)
    wait_for_a_tool_start(controller, job_id)
    result = invoke(runner, "jobs", "cancel", job_id, "--reason", "no longer needed")
    assert result.exit_code == 0, result.output
    assert f"cancelled job {job_id} (it was running); its sandbox was removed" in result.stdout
    job = invoke_json(runner, "jobs", "show", job_id)["job"]
    assert job["state"] == "cancelled"
    assert "no longer needed" in job["error"]["message"]
    again = invoke_json(runner, "jobs", "cancel", job_id)
    assert again["cancelled"] is False and again["previous_state"] == "cancelled"
    assert "already finished" in invoke(runner, "jobs", "cancel", job_id).stdout
    watched = invoke(runner, "jobs", "watch", job_id)
    assert watched.exit_code == EXIT_CANCELLED, watched.output
    assert "tool bash" in watched.stdout and "cancelled" in watched.stdout


def test_cancel_a_queued_job_json(
    runner: CliRunner, config: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with BackgroundController(config, data_dir, concurrency=1) as background:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
        busy = invoke_json(runner, "submit", "slow", "sleep")["job"]["id"]
        waiting = invoke_json(runner, "submit", "calc", "hi")["job"]["id"]
        wait_for_state(runner, busy, JobState.RUNNING)
        data = invoke_json(runner, "jobs", "cancel", waiting)
        assert data["cancelled"] is True and data["previous_state"] == "queued"
        assert data["job"]["state"] == "cancelled" and data["job"]["started_at"] is None
        assert invoke_json(runner, "jobs", "cancel", busy)["cancelled"] is True


def test_jobs_logs_after_a_restart_interrupted_a_job(
    runner: CliRunner, config: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir.mkdir(parents=True)

    async def leave_a_running_job() -> str:  # as if a previous controller died mid-job
        async with SqliteJobStore(data_dir / "jobs.db") as store:
            job, _ = await store.create(agent="calc", input=TurnInput.new("hi"))
            await store.transition(job.id, JobState.PROVISIONING)
            await store.transition(job.id, JobState.RUNNING)
            # applying its effects: a job that far is interrupted (a running turn would resume)
            await store.transition(job.id, JobState.APPLYING_EFFECTS)
            return job.id

    job_id = asyncio.run(leave_a_running_job())
    with BackgroundController(config, data_dir) as background:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
        assert [j.id for j in background.controller.service.recovered] == [job_id]  # type: ignore[union-attr]
        result = invoke(runner, "jobs", "logs", job_id)
        assert result.exit_code == 0, result.output
        assert "WARN" in result.stdout and "controller:" in result.stdout
        assert "interrupted: the controller stopped while this job ran" in result.stdout
        data = invoke_json(runner, "jobs", "logs", job_id)
        [line] = data["lines"]
        assert (line["level"], line["source"]) == ("warn", "controller")
        assert "orphaned sandboxes reaped at restart" in line["message"]
        watched = invoke(runner, "jobs", "watch", job_id)
        assert watched.exit_code == EXIT_ENV, watched.output
        assert "log warn (controller)" in watched.stdout
        ok = invoke_json(runner, "submit", "calc", "hi", "--wait")["job"]["id"]
        assert "has no log lines" in invoke(runner, "jobs", "logs", ok).stdout
        assert invoke_json(runner, "jobs", "logs", ok) == {"job": ok, "lines": []}


def test_watch_reports_a_controller_that_stops(
    runner: CliRunner, config: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    background = BackgroundController(config, data_dir).__enter__()
    try:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
        job_id = invoke_json(runner, "submit", "slow", "sleep")["job"]["id"]
        wait_for_state(runner, job_id, JobState.RUNNING)
        stopper = threading.Timer(1.0, background.__exit__, (None, None, None))
        stopper.start()
        result = invoke(runner, "jobs", "watch", job_id)
        stopper.join()
    finally:
        if background.thread.is_alive() and not background.loop.is_closed():
            background.__exit__(None, None, None)
    assert result.exit_code == EXIT_ENV, result.output
    assert "tool bash" in result.stdout
    assert f"lost the controller at {background.address} while watching job {job_id}" in result.stderr


# -- help ------------------------------------------------------------------------------------------


def test_the_cli_offers_job_states_without_importing_the_controller() -> None:
    code = (
        "import sys, airlock.cli; from airlock.jobs import JobState; "
        "assert airlock.cli.JobState is JobState; "
        "print(sorted(m for m in ('grpc', 'sqlite3', 'airlock.controller') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_help_documents_exit_codes_and_ctrl_c(runner: CliRunner) -> None:
    for args in (["submit", "--help"], ["jobs", "watch", "--help"]):
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0
        text = " ".join(result.stdout.split())
        assert "timed out" in text and "130" in text and "stops watching" in text
    serve_help = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    text = " ".join(serve_help.stdout.split())
    for flag in ("--address", "--data-dir", "--concurrency", "--max-follow-ups", "--max-depth", "--json"):
        assert flag in text
    assert "prints it once" in text


def test_fork_a_finished_job_at_its_last_checkpoint_and_a_point_it_does_not_have(
    runner: CliRunner, controller: BackgroundController
) -> None:
    job_id = invoke_json(runner, "submit", "calc", "What is 17 * 23?", "--wait")["job"]["id"]
    fork = invoke_json(runner, "jobs", "fork", job_id)["job"]
    assert fork["forked_from"] == job_id and fork["fork_point"].split("@")[0].isdigit()
    wait_for_state(runner, fork["id"], JobState.SUCCEEDED)
    said = invoke(runner, "jobs", "fork", job_id, "--message", "and 18 * 23?")
    assert said.exit_code == 0, said.output
    assert f"forked job {job_id} at " in said.stdout
    refused = invoke(runner, "jobs", "fork", job_id, "--at", "99")
    assert refused.exit_code != 0
    assert "no checkpoint 99" in refused.output
