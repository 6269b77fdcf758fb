"""``airlock doctor`` against the real Docker engine, as text and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.config import load_config

pytestmark = pytest.mark.docker

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "airlock.yaml"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ambient configuration, and a private model cache (nothing is ever downloaded)."""
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)


def test_doctor_with_the_real_engine(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", "--config", str(EXAMPLE)])
    lines = result.stdout.splitlines()
    docker_line = next(line for line in lines if "docker:" in line)
    assert docker_line.strip().startswith("OK") and "reachable" in docker_line
    assert any("image:" in line for line in lines)
    assert any("gvisor" in line for line in lines)
    agents = len(load_config(EXAMPLE).agents)
    assert any("config:" in line and f"is valid ({agents} agent(s)" in line for line in lines)
    # the model cache is a private empty dir (see _isolated): a warning, never an error
    assert any(line.startswith("WARN local model:") for line in lines)
    assert result.exit_code == (1 if any(line.startswith("FAIL") for line in lines) else 0)


def test_doctor_json_with_the_real_engine(runner: CliRunner) -> None:
    result = runner.invoke(app, ["doctor", "--config", str(EXAMPLE), "--json"])
    data = json.loads(result.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["docker"]["status"] == "ok"
    names = {"docker", "image", "gvisor", "gvisor-networked", "micro_vm", "local model", "model runtime"}
    names.add("config")
    assert names <= set(checks)
    assert checks["local model"]["status"] == "warning"
    for name in ("gvisor", "gvisor-networked"):
        assert checks[name]["status"] in ("ok", "warning")  # absent runsc is never an error
        if checks[name]["status"] == "warning":
            assert "not registered" in checks[name]["message"] and "daemon.json" in checks[name]["hint"]
    if checks["gvisor"]["status"] == "ok":  # registered: one sandbox really started under it
        assert checks["gvisor-start"]["status"] == "ok"
        assert "its kernel reports 4.4.0" in checks["gvisor-start"]["message"]
    assert checks["micro_vm"]["status"] == "warning"  # no Kata here; the hint says what to use instead
    assert "gvisor" in checks["micro_vm"]["hint"]
    if checks["image"]["status"] == "error":
        assert checks["image"]["hint"] == "run: airlock images build"
    assert data["ok"] == all(c["status"] != "error" for c in data["checks"])
    assert result.exit_code == (0 if data["ok"] else 1)
