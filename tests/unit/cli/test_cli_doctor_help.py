"""``airlock doctor`` (against the real engine where marked) and the documented exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app

from .clihelp import EXAMPLE


def test_run_help_documents_the_exit_codes(runner: CliRunner) -> None:
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for fragment in (
        "0 complete",
        "1 ended without completing",
        "2 usage or configuration error",
        "3 environment or provisioning error",
        "4 the turn failed",
        "130 cancelled by Ctrl-C",
    ):
        assert fragment in text


def test_top_level_help_lists_the_verbs(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for verb in ("run", "agents", "doctor", "images", "gc"):
        assert verb in result.stdout


@pytest.mark.docker
def test_doctor_with_the_real_engine(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", "--config", str(EXAMPLE)])
    lines = result.stdout.splitlines()
    docker_line = next(line for line in lines if "docker:" in line)
    assert docker_line.strip().startswith("OK") and "reachable" in docker_line
    assert any("image:" in line for line in lines)
    assert any("gvisor" in line for line in lines)
    assert any("config:" in line and "is valid (6 agent(s)" in line for line in lines)
    # the model cache is a private empty dir (conftest): a warning, never an error
    assert any(line.startswith("WARN local model:") for line in lines)
    assert result.exit_code == (1 if any(line.startswith("FAIL") for line in lines) else 0)


@pytest.mark.docker
def test_doctor_json_with_the_real_engine(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", "--config", str(EXAMPLE), "--json"])
    data = json.loads(result.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["docker"]["status"] == "ok"
    assert {"docker", "image", "gvisor", "kata", "local model", "model runtime", "config"} <= set(checks)
    assert checks["local model"]["status"] == "warning"
    assert checks["gvisor"]["status"] in ("ok", "warning")  # absent runsc is never an error
    if checks["gvisor"]["status"] == "warning":
        assert checks["gvisor"]["message"] == "gvisor isolation unavailable: install runsc"
    if checks["image"]["status"] == "error":
        assert checks["image"]["hint"] == "run: airlock images build"
    assert data["ok"] == all(c["status"] != "error" for c in data["checks"])
    assert result.exit_code == (0 if data["ok"] else 1)


def test_doctor_without_an_engine_fails(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    result = runner.invoke(app, ["doctor", "--config", str(EXAMPLE), "--json"])
    assert result.exit_code == 1
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["docker"]["status"] == "error"
    assert "image" not in checks  # nothing to ask without an engine
    assert checks["config"]["status"] == "ok"


def test_doctor_reports_an_invalid_config(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, write_config
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    path = write_config("version: 1\nagents:\n  a:\n    provider: {kind: nope}\n")
    result = runner.invoke(app, ["doctor", "--config", str(path)])
    assert result.exit_code == 1
    config_line = next(line for line in result.stdout.splitlines() if "config:" in line)
    assert config_line.startswith("FAIL")
    assert f"{path}:4:" in result.stdout
