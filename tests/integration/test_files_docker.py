"""Files in and out of a real Docker sandbox (read-only root, the runner's workspace):
``airlock run --in/--out`` with links and a FIFO planted among the outputs, and a set over
the agent's cap refused whole."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.testing import script_yaml, text_step, tool_step

pytestmark = pytest.mark.docker

PLANT = (
    "mkdir -p out && wc -w < notes/a.txt > out/count.txt && cp data.csv out/ "
    "&& ln -s /etc/passwd out/leak && ln -s / out/root && mkfifo out/pipe"
)
CONFIG = """\
version: 1
agents:
  files:
    provider: {kind: scripted, script: files.yaml}
    tools: [bash]
    backend: docker
    defaults: {max_turns: 4, max_duration: 60s}
  spill:
    provider: {kind: scripted, script: spill.yaml}
    tools: [bash]
    backend: docker
    artifacts: {max_total_bytes: 1000}
    defaults: {max_turns: 4, max_duration: 60s}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    (tmp_path / "files.yaml").write_text(
        script_yaml([tool_step("bash", {"command": PLANT}), text_step("ok")])
    )
    spill = "mkdir -p out && head -c 2000 /dev/zero > out/big.bin"
    (tmp_path / "spill.yaml").write_text(
        script_yaml([tool_step("bash", {"command": spill}), text_step("ok")])
    )
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes/a.txt").write_text("one two three four\n")
    (tmp_path / "data.csv").write_text("x,y\n1,2\n")
    path = tmp_path / "airlock.yaml"
    path.write_text(textwrap.dedent(CONFIG))
    return path


@pytest.fixture
def env(runner_image: str, state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_STATE_DIR", str(state_dir))
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)


def test_files_in_and_artifacts_out_of_a_docker_sandbox(env: None, config: Path, tmp_path: Path) -> None:
    inputs = ["--in", str(tmp_path / "notes"), "--in", str(tmp_path / "data.csv")]
    out = tmp_path / "res"
    result = CliRunner().invoke(
        app, ["run", "files", "go", "-c", str(config), *inputs, "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert (out / "out/count.txt").read_text().strip() == "4"
    assert (out / "out/data.csv").read_text() == "x,y\n1,2\n"
    assert sorted(os.listdir(out / "out")) == ["count.txt", "data.csv"]
    summary = json.loads(result.stdout)["summary"]
    assert [a["path"] for a in summary["artifacts"]] == ["out/count.txt", "out/data.csv"]
    assert summary["artifact_warnings"] == [
        "artifact out/leak not collected: a symbolic link (never followed)",
        "artifact out/pipe not collected: not a regular file",
        "artifact out/root not collected: a symbolic link (never followed)",
    ]


def test_artifacts_over_the_cap_are_refused_with_the_cap_named(
    env: None, config: Path, tmp_path: Path
) -> None:
    out = tmp_path / "res"
    result = CliRunner().invoke(app, ["run", "spill", "go", "-c", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "artifacts refused: 2000 bytes in all, more than the cap of 1000 bytes" in result.stderr
    assert not out.exists()
