"""``airlock run`` on real sandboxes (scripted provider): through CliRunner and as a real
process, ``--json``, the example configuration, and Ctrl-C removing the sandbox."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.cli._common import EXIT_CANCELLED
from airlock.sandbox.docker._labels import LABEL_OWNER, LABEL_SANDBOX
from airlock.testing import calculator_script, script_yaml, text_step, tool_step
from tests.support.containers import assert_clean

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "airlock.yaml"
QUESTION = "What is 17 * 23? Use the calculator."

#: examples/scripts/calculator.yaml's conversation, with usage and costs.
CALC_SCRIPT = script_yaml(calculator_script())
SLOW_SCRIPT = script_yaml([tool_step("bash", {"command": "sleep 30"}), text_step("slept")])

CONFIG = """\
version: 1
agents:
  # examples/airlock.yaml's demo-scripted agent
  demo-scripted:
    provider: {kind: scripted, script: calculator.yaml}
    system: You are a helpful assistant. Use the calculator for arithmetic, then answer in one sentence.
    tools: [calculator]
    backend: docker
    resources: {cpu: "1", memory: 256Mi}
    defaults: {max_turns: 6, max_duration: 30s}
  slow:
    provider: {kind: scripted, script: slow.yaml}
    tools: [bash]
    backend: docker
    defaults: {max_turns: 4, max_duration: 2m}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "calculator.yaml").write_text(CALC_SCRIPT)
    (tmp_path / "slow.yaml").write_text(SLOW_SCRIPT)
    path = tmp_path / "airlock.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    return path


@pytest.fixture
def cli_env(
    runner_image: str, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """The environment for the command: our own state directory, no ambient configuration."""
    monkeypatch.setenv("AIRLOCK_STATE_DIR", str(state_dir))
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(tmp_path / "data"))  # not the user's own
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)
    env = dict(os.environ)
    env["COLUMNS"] = "120"
    return env


def assert_answered(stdout: str) -> None:
    assert "17 x 23 = 391." in stdout
    assert "complete" in stdout
    assert "calculator x1" in stdout
    assert "✓ calculator" in stdout
    assert "sandbox ready" in stdout


def test_run_through_clirunner(
    config: Path, cli_env: dict[str, str], docker_client: Any, state_dir: Path
) -> None:
    result = CliRunner().invoke(app, ["run", "demo-scripted", QUESTION, "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert_answered(result.stdout)
    assert "provisioning a docker sandbox" in result.stdout
    assert_clean(docker_client, state_dir)


def test_run_json_through_clirunner(
    config: Path, cli_env: dict[str, str], docker_client: Any, state_dir: Path
) -> None:
    result = CliRunner().invoke(app, ["run", "demo-scripted", QUESTION, "-c", str(config), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"]["message"] == "17 x 23 = 391."
    assert data["output"]["exit_reason"] == "complete"
    assert data["summary"]["tools_called"] == {"calculator": 1}
    assert data["summary"]["backend"] == "docker"
    assert_clean(docker_client, state_dir)


def _commands() -> list[Any]:
    commands = [pytest.param([sys.executable, "-m", "airlock"], id="python-m-airlock")]
    script = Path(sys.executable).with_name("airlock")
    if script.exists():
        commands.append(pytest.param([str(script)], id="console-script"))
    return commands


@pytest.mark.parametrize("command", _commands())
def test_run_as_a_real_process(
    command: list[str], config: Path, cli_env: dict[str, str], docker_client: Any, state_dir: Path
) -> None:
    proc = subprocess.run(
        [*command, "run", "demo-scripted", QUESTION, "--config", str(config)],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert_answered(proc.stdout)
    proc = subprocess.run(
        [*command, "run", "demo-scripted", QUESTION, "--config", str(config), "--json"],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["exit_reason"] == "complete"
    assert proc.stderr == ""  # no progress when stderr is not a terminal
    assert list(state_dir.iterdir()) == []


def test_run_the_example_configuration(cli_env: dict[str, str], docker_client: Any, state_dir: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--config", str(EXAMPLE), "demo-scripted", QUESTION])
    assert result.exit_code == 0, result.output
    assert "17 x 23 = 391." in result.stdout
    assert "complete" in result.stdout
    assert "calculator x1" in result.stdout
    assert "✓ calculator" in result.stdout
    assert_clean(docker_client, state_dir)
    result = CliRunner().invoke(app, ["run", "-c", str(EXAMPLE), "demo-scripted", QUESTION, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["output"]["message"] == "17 x 23 = 391."
    assert data["summary"]["exit_reason"] == "complete"
    assert data["summary"]["tools_called"] == {"calculator": 1}
    assert data["summary"]["network"]["credential_proxy"] == []  # no network at all
    assert "local_model" not in data["summary"]
    assert_clean(docker_client, state_dir)


def _sandboxes_of(client: Any, owner: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={owner}"}))


def test_ctrl_c_cancels_the_turn_and_removes_the_sandbox(
    config: Path, cli_env: dict[str, str], docker_client: Any, state_dir: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "airlock", "run", "slow", "sleep please", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    owner = f"{socket.gethostname()}:{proc.pid}"
    try:
        deadline = time.monotonic() + 60
        running: list[Any] = []
        while time.monotonic() < deadline and proc.poll() is None:
            running = [c for c in _sandboxes_of(docker_client, owner) if c.status == "running"]
            if running:
                break
            time.sleep(0.1)
        assert running, "the sandbox container never appeared"
        assert running[0].labels[LABEL_SANDBOX].startswith("sb-")
        time.sleep(1.0)  # let the turn reach its `sleep 30` tool call
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        elapsed = time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == EXIT_CANCELLED, stderr
    assert elapsed < 20, "cancellation waited for the tool instead of cancelling it"
    assert "cancelled" in stderr
    assert "tool bash" in stdout
    assert _sandboxes_of(docker_client, owner) == []
    networks = docker_client.networks.list(filters={"label": f"{LABEL_OWNER}={owner}"})
    assert networks == []
    assert list(state_dir.iterdir()) == []
