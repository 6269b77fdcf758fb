"""``airlock doctor`` without an engine (tests/integration/test_cli_doctor.py has the real one)
and the documented exit codes."""

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
