"""The README's "bring your own tools and files" example, as a user runs it: both example
packages built into wheels and into one sandbox image, then ``airlock run`` of
examples/toolbox with a file in (``--in``) and its artifact out (``--out``): the custom tool,
the MCP server's tool inside the sandbox and the file tools all answer."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import app

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "toolbox"
#: Builds a wheel with what this venv holds: no index, no isolated build environment.
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", "-q", "--no-index", "--no-deps", "--no-build-isolation")


def wheel_of(package: str, work: Path) -> Path:
    source = work / package
    shutil.copytree(
        ROOT / "examples" / package,
        source,
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [*PIP_WHEEL, "-w", str(work / "dist"), str(source)], check=True, capture_output=True, timeout=120
    )
    return next((work / "dist").glob(f"{'wordcount' if package == 'custom_tools' else 'notes_mcp'}-*.whl"))


@pytest.fixture(scope="module")
def toolbox_image(
    runner_image: str, docker_client: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    import docker.errors

    work = tmp_path_factory.mktemp("toolbox")
    wheels = [wheel_of("custom_tools", work), wheel_of("mcp", work)]
    name = f"airlock-test-toolbox:{os.getpid()}-{uuid.uuid4().hex[:6]}"
    args = ["images", "build", "--name", name, "--base", runner_image, "--no-index"]
    try:
        result = CliRunner().invoke(app, [*args, *(a for w in wheels for a in ("--wheel", str(w)))])
        assert result.exit_code == 0, result.output
        yield name
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(name, force=True)


def test_the_toolbox_example_uses_its_tools_and_hands_back_its_artifact(
    toolbox_image: str, state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRLOCK_STATE_DIR", str(state_dir))
    monkeypatch.delenv("AIRLOCK_CONFIG", raising=False)
    config = tmp_path / "airlock.yaml"
    config.write_text((EXAMPLE / "airlock.yaml").read_text().replace("airlock-toolbox:0.1.0", toolbox_image))
    shutil.copy(EXAMPLE / "script.yaml", tmp_path / "script.yaml")
    out = tmp_path / "results"
    result = CliRunner().invoke(
        app,
        [
            "run", "toolbox", "Summarise the report.", "-c", str(config),
            "--in", str(EXAMPLE / "report.txt"), "--out", str(out), "--json",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    summary = document["summary"]
    assert summary["exit_reason"] == "complete"
    assert summary["tools_called"] == {"read_file": 1, "count_words": 1, "notes.add_note": 1, "write_file": 1}
    assert summary["tool_failures"] == 0
    assert (out / "out/summary.txt").read_text() == "report.txt: 10 words\n"
    assert [a["path"] for a in summary["artifacts"]] == ["out/summary.txt"]
