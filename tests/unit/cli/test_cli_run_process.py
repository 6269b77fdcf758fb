"""``airlock run`` end to end with a real local runner process (no Docker), and the exit codes.

The exit-code tests swap the agent's sandbox for one that fails or returns a given exit
reason; everything else (the controller's service, the state store, the runner) is real.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import _run, app
from airlock.controller import _execute
from airlock.sandbox import Sandbox, SandboxRequest, process
from layer0 import EnvError, ExitReason, TurnError, TurnOutput

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
  broken-script:
    provider: {kind: scripted, script: bad.yaml}
    backend: process
  intro:
    provider: {kind: scripted, script: intro.yaml}
    backend: process
  recall:
    provider: {kind: scripted, script: recall.yaml}
    backend: process
"""


class _FailingSandbox:
    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def run(self, request: SandboxRequest) -> TurnOutput:
        raise self.error

    async def host_address(self) -> str:
        return "127.0.0.1"


class _ReturningSandbox(_FailingSandbox):
    def __init__(self, reason: ExitReason) -> None:
        self.reason = reason

    async def run(self, request: SandboxRequest) -> TurnOutput:
        return TurnOutput.new("partial", self.reason)


def use_sandbox(monkeypatch: pytest.MonkeyPatch, sandbox: Sandbox) -> None:
    """Every agent's backend builds ``sandbox`` (the registry entry, with another factory)."""
    fake = dataclasses.replace(process.BACKEND, factory=lambda **_: sandbox)
    monkeypatch.setattr(_execute, "backend", lambda name: fake)


@pytest.fixture(autouse=True)
def private_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """``airlock run`` keeps session histories in the data dir: a private one per test."""
    data = tmp_path / "data"
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(data))
    return data


@pytest.fixture
def config(write_config) -> Path:  # type: ignore[no-untyped-def]
    return write_config(  # type: ignore[no-any-return]
        CONFIG,
        calc__yaml=CALC_SCRIPT,
        bad__yaml="responses: []\n",
        intro__yaml=_answer(messages=1, text="Nice to meet you, Ada."),
        recall__yaml=_answer(messages=3, text="You are Ada."),
    )


def _answer(*, messages: int, text: str) -> str:
    """A script whose one step answers ``text`` to a request of exactly ``messages`` messages."""
    return (
        f"steps:\n  - match: {{messages: {messages}}}\n"
        f"    response: {{content: [{{type: text, text: {json.dumps(text)}}}], stop_reason: end_turn}}\n"
    )


def test_run_with_a_session_sees_the_previous_runs_conversation(
    runner: CliRunner, config: Path, private_data_dir: Path
) -> None:
    first = runner.invoke(app, ["run", "intro", "My name is Ada.", "-c", str(config), "--session", "s1"])
    assert first.exit_code == 0, first.output
    # recall's only step wants 3 messages: the first run's user + assistant, and the new one.
    second = runner.invoke(
        app, ["run", "recall", "Who am I?", "-c", str(config), "--session", "s1", "--json"]
    )
    assert second.exit_code == 0, second.output
    assert json.loads(second.stdout)["output"]["message"] == "You are Ada."
    assert (private_data_dir / "state.db").is_file()
    # Another session has no history: the same agent fails on its 1-message request.
    other = runner.invoke(app, ["run", "recall", "Who am I?", "-c", str(config), "--session", "s2"])
    assert other.exit_code == 4, other.output
    assert "messages=1" in other.stderr  # type: ignore[no-any-return]


def test_run_keeps_its_data_dir_private_and_names_what_is_not(
    runner: CliRunner, config: Path, private_data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = os.umask(0o022)  # the common umask: what is not created private is readable by others
    try:
        result = runner.invoke(app, ["run", "intro", "My name is Ada.", "-c", str(config), "--session", "s1"])
        assert result.exit_code == 0, result.output
        made = {
            p.name: stat.S_IMODE(p.stat().st_mode) for p in [private_data_dir, *private_data_dir.iterdir()]
        }
        assert "state.db" in made and {n: oct(m) for n, m in made.items() if m & 0o077} == {}
        os.chmod(private_data_dir / "state.db", 0o644)  # as an earlier version left it
        with caplog.at_level(logging.WARNING, logger="airlock.controller"):
            again = runner.invoke(app, ["run", "recall", "Who am I?", "-c", str(config), "--session", "s1"])
        assert again.exit_code == 0, again.output
    finally:
        os.umask(old)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"{private_data_dir / 'state.db'} in the controller's data directory is mode 0644" in w
        and w.endswith(f"chmod 600 {private_data_dir / 'state.db'}")
        for w in warned
    ), warned


def test_run_prints_progress_answer_and_summary(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["run", "calc", "What is 17 * 23?", "-c", str(config)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "provisioning a process sandbox" in out
    assert "sandbox ready" in out
    assert "model call 1: 40 in / 12 out tokens, $0.0001" in out
    assert "tool calculator" in out and '"17 * 23"' in out
    assert "✓ calculator" in out
    assert "17 x 23 = 391." in out
    assert "complete" in out
    assert "100 / 20" in out  # tokens in / out
    assert "$0.0003" in out
    assert "calculator x1" in out


def test_run_json_is_one_object_with_the_wire_output(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["run", "calc", "What is 17 * 23?", "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # nothing but the object on stdout
    assert data["output"]["message"] == "17 x 23 = 391."
    assert data["output"]["exit_reason"] == "complete"
    assert data["output"]["metadata"]["cost"] == "0.0003"
    assert data["output"]["metadata"]["tools_called"][0]["name"] == "calculator"
    summary = data["summary"]
    assert summary["exit_code"] == 0
    assert summary["tools_called"] == {"calculator": 1}
    assert (summary["turns"], summary["tokens_in"], summary["tokens_out"]) == (2, 100, 20)


def test_turn_that_does_not_complete_exits_1(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config), "--max-turns", "1", "--json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert data["output"]["exit_reason"] == "max_turns"
    assert data["summary"]["exit_code"] == 1


def test_budget_override_exits_1(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config), "--max-cost", "0.00005"])
    assert result.exit_code == 1, result.output
    assert "budget_exhausted" in result.stdout


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--max-cost", "lots", "is not a number"), ("--timeout", "soon", "--timeout"), ("--max-turns", "0", "")],
)
def test_bad_flags_exit_2(runner: CliRunner, config: Path, flag: str, value: str, message: str) -> None:
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config), flag, value])
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (EnvError.provision_failed("sandbox image x is missing; build it with: airlock images build"), 3),
        (EnvError.isolation_violation("gvisor isolation needs runsc"), 3),
        (EnvError.credential_failed("secret 'k' is not set"), 3),
        (EnvError.resource_exceeded("memory"), 3),
        (EnvError.from_turn_error(TurnError.model("overloaded")), 4),
        (TurnError.non_retryable("bad"), 4),
    ],
)
def test_environment_errors_map_to_exit_codes(
    runner: CliRunner, config: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException, code: int
) -> None:
    use_sandbox(monkeypatch, _FailingSandbox(error))
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config)])
    assert result.exit_code == code, result.output
    assert str(error) in result.stderr
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config), "--json"])
    assert result.exit_code == code
    body = json.loads(result.stdout)
    assert body["exit_code"] == code and body["error"]["message"] == str(error)


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        (ExitReason.complete(), 0),
        (ExitReason.max_turns(), 1),
        (ExitReason.budget_exhausted(), 1),
        (ExitReason.timeout(), 1),
        (ExitReason.circuit_breaker(), 1),
        (ExitReason.safety_stop("refused"), 1),
        (ExitReason.observer_halt("hook"), 1),
        (ExitReason.custom("cancelled"), 1),
        (ExitReason.error(), 4),
    ],
)
def test_exit_reasons_map_to_exit_codes(
    runner: CliRunner, config: Path, monkeypatch: pytest.MonkeyPatch, reason: ExitReason, code: int
) -> None:
    use_sandbox(monkeypatch, _ReturningSandbox(reason))
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config), "--json"])
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["summary"]["exit_code"] == code


def test_cancelled_job_exits_130_after_its_teardown(
    runner: CliRunner, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torn_down: list[bool] = []

    class Slow(_FailingSandbox):
        async def run(self, request: SandboxRequest) -> TurnOutput:
            try:
                await asyncio.sleep(60)
            finally:
                await asyncio.sleep(0.05)  # teardown takes a moment; the command waits for it
                torn_down.append(True)
            raise AssertionError("not cancelled")

    async def cancel_soon(job: Any, view: Any) -> Any:
        task = asyncio.ensure_future(real_supervise(job, view))
        await asyncio.sleep(0.2)
        import os
        import signal

        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C delivers
        return await task

    real_supervise = _run._supervise
    use_sandbox(monkeypatch, Slow(AssertionError()))
    monkeypatch.setattr(_run, "_supervise", cancel_soon)
    result = runner.invoke(app, ["run", "calc", "hi", "-c", str(config)])
    assert result.exit_code == 130, result.output
    assert torn_down == [True]
    assert "cancelled" in result.stderr


def test_invalid_script_exits_2(runner: CliRunner, config: Path) -> None:
    result = runner.invoke(app, ["run", "broken-script", "hi", "-c", str(config)])
    assert result.exit_code == 2, result.output
    assert "bad.yaml" in result.stderr


def test_an_unknown_backend_is_a_config_error(runner: CliRunner, write_config) -> None:  # type: ignore[no-untyped-def]
    path = write_config(
        "version: 1\nagents:\n  a: {provider: {kind: scripted, script: []}, backend: local}\n"
    )
    result = runner.invoke(app, ["run", "a", "hi", "-c", str(path)])
    assert result.exit_code == 2, result.output
    assert "unknown backend 'local'; valid backends: docker, kubernetes, process" in result.stderr
