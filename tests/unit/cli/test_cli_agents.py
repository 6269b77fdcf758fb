"""``airlock agents ls`` / ``show`` on the example configuration, and configuration errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from airlock.cli import app

from .clihelp import EXAMPLE


def test_ls_lists_every_agent_with_its_sandbox(runner: CliRunner) -> None:
    result = runner.invoke(app, ["agents", "ls", "--config", str(EXAMPLE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name in (
        "coder",
        "researcher",
        "budgeted",
        "demo",
        "demo-claude",
        "demo-scripted",
        "careful",
        "planner",
    ):
        assert name in result.stdout
    assert "api.anthropic.com:443" in result.stdout
    assert "anthropic-api-key (sidecar)" in result.stdout
    assert "cpu 1, memory 512Mi, disk 1Gi" in result.stdout
    assert "anthropic/claude-haiku-4-5" in result.stdout


def test_ls_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["agents", "ls", "--config", str(EXAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    agents = {a["name"]: a for a in json.loads(result.stdout)}
    assert set(agents) == {
        "coder",
        "researcher",
        "budgeted",
        "demo",
        "demo-claude",
        "demo-scripted",
        "offline-coder",
        "careful",
        "planner",
    }
    coder = agents["coder"]
    assert coder["backend"] == "docker"
    assert coder["provider"] == {"kind": "anthropic", "model": "claude-haiku-4-5", "base_url": None}
    assert coder["tools"] == ["bash", "read_file", "write_file", "list_files", "edit_file"]
    assert coder["network"] == "api.anthropic.com:443"
    assert coder["credentials"] == ["anthropic-api-key (sidecar)"]
    assert coder["resources"] == {"cpu": "1", "memory": "512Mi", "disk": "1Gi", "gpu": None}
    assert coder["limits"] == {"max_turns": 30, "max_cost": "1.00", "max_duration": "10m"}
    assert agents["demo"]["uses_local_model"] is True
    assert agents["demo-scripted"]["network"] == "none"
    assert coder["source"].endswith("airlock.yaml:23")


def test_show_prints_the_effective_policy(runner: CliRunner) -> None:
    result = runner.invoke(app, ["agents", "show", "researcher", "-c", str(EXAMPLE)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "egress (default deny" in out
    assert "api.github.com" in out and "api.anthropic.com" in out
    assert "everything else" in out  # the default-deny row
    assert "github-token" in out and "anthropic-api-key" in out
    assert "values never shown" in out
    assert "cpu 500m, memory 256Mi" in out
    assert "max_turns 12" in out and "max_duration 2m" in out


def test_show_json_has_spec_environment_and_plan(runner: CliRunner) -> None:
    result = runner.invoke(app, ["agents", "show", "coder", "-c", str(EXAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["name"] == "coder"
    assert data["spec"]["provider"]["model"] == "claude-haiku-4-5"
    assert data["environment"]["network"]["default"] == "deny"
    assert data["plan"]["egress_default"] == "deny"
    allow = [r for r in data["plan"]["egress"] if r["action"] == "allow"]
    assert [(r["destination"], r["port"]) for r in allow] == [("api.anthropic.com", "443")]
    assert data["plan"]["credentials"][0]["name"] == "anthropic-api-key"
    assert data["plan"]["credentials"][0]["in sandbox"] == "no"


def test_show_agent_without_network_or_credentials(runner: CliRunner) -> None:
    result = runner.invoke(app, ["agents", "show", "demo-scripted", "-c", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "credentials: none" in result.stdout
    assert "scripted" in result.stdout


def test_unknown_agent_exits_2_listing_the_valid_names(runner: CliRunner) -> None:
    for args in (["agents", "show", "nope"], ["run", "nope", "hi"]):
        result = runner.invoke(app, [*args, "--config", str(EXAMPLE)])
        assert result.exit_code == 2, result.output
        assert "unknown agent 'nope'" in result.stderr
        assert (
            "budgeted, careful, coder, demo, demo-claude, demo-scripted, offline-coder, planner, researcher"
            in result.stderr
        )


def test_invalid_config_exits_2_with_file_line_col(runner: CliRunner, write_config) -> None:  # type: ignore[no-untyped-def]
    path = write_config(
        """
        version: 1
        agents:
          a:
            provider: {kind: scripted, script: x.yaml}
            toolz: [calculator]
        """
    )
    for args in (["agents", "ls"], ["agents", "show", "a"], ["run", "a", "hi"]):
        result = runner.invoke(app, [*args, "--config", str(path)])
        assert result.exit_code == 2, result.output
        assert "invalid configuration" in result.stderr
        assert f"{path}:4:" in result.stderr  # the script line
        assert f"{path}:5:5" in result.stderr  # the unknown key
        assert "toolz" in result.stderr


def test_missing_config_exits_2(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["agents", "ls"])  # cwd is an empty tmp dir
    assert result.exit_code == 2
    assert "no airlock configuration found" in result.stderr
    result = runner.invoke(app, ["agents", "ls", "--config", str(tmp_path / "absent.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_discovers_airlock_yaml_in_the_working_directory(runner: CliRunner, write_config) -> None:  # type: ignore[no-untyped-def]
    write_config(
        """
        version: 1
        agents:
          only:
            provider: {kind: scripted, script: s.yaml}
            backend: process
        """,
        s__yaml="steps: []\n",
    )
    result = runner.invoke(app, ["agents", "ls", "--json"])
    assert result.exit_code == 0, result.output
    assert [a["name"] for a in json.loads(result.stdout)] == ["only"]
