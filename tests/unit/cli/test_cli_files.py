"""Files in and out from the command line, on real runner processes: ``airlock run --in/--out``,
``airlock submit --in`` and ``airlock jobs artifacts [--download]``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app

from .test_cli_jobs import BackgroundController, no_reap  # noqa: F401 (an autouse fixture)

CONFIG = """
version: 1
agents:
  wc:
    provider: {kind: scripted, script: wc.yaml}
    tools: [bash]
    backend: process
    defaults: {max_turns: 4, max_duration: 30s}
"""

WC_SCRIPT = """\
steps:
  - response:
      content:
        - type: tool_use
          id: t1
          name: bash
          input: {command: "mkdir -p out && cat notes/*.txt | wc -w > out/count.txt && cp data.csv out/"}
      stop_reason: tool_use
  - response:
      content: [{type: text, text: "counted"}]
      stop_reason: end_turn
"""


@pytest.fixture
def config(write_config) -> Path:  # type: ignore[no-untyped-def]
    return write_config(CONFIG, wc__yaml=WC_SCRIPT)  # type: ignore[no-any-return]


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("one two three\n")
    (notes / "b.txt").write_text("four five\n")
    (tmp_path / "data.csv").write_text("x,y\n1,2\n")
    return ["--in", str(notes), "--in", str(tmp_path / "data.csv")]


def test_run_takes_files_in_and_writes_artifacts_out(
    runner: CliRunner, config: Path, inputs: list[str], tmp_path: Path
) -> None:
    result = runner.invoke(
        app, ["run", "wc", "count", "-c", str(config), *inputs, "--out", str(tmp_path / "res")]
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "res/out/count.txt").read_text().strip() == "5"
    assert (tmp_path / "res/out/data.csv").read_text() == "x,y\n1,2\n"
    assert "artifact out/count.txt (2 bytes)" in result.stderr


def test_run_without_out_lists_the_artifacts_and_says_how_to_keep_them(
    runner: CliRunner, config: Path, inputs: list[str]
) -> None:
    result = runner.invoke(app, ["run", "wc", "count", "-c", str(config), *inputs, "--json"])
    assert result.exit_code == 0, result.output
    artifacts = json.loads(result.stdout)["summary"]["artifacts"]
    assert [(a["path"], a["size"], a["written"]) for a in artifacts] == [
        ("out/count.txt", 2, None),
        ("out/data.csv", 8, None),
    ]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: tmp / "missing.txt", "no such file or directory"),
        (
            lambda tmp: (tmp / "big.bin").write_bytes(b"x" * 9_000_000) and tmp / "big.bin",
            "more than the cap",
        ),
    ],
)
def test_run_refuses_bad_inputs_before_any_sandbox(
    runner: CliRunner, config: Path, tmp_path: Path, make: object, message: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    result = runner.invoke(app, ["run", "wc", "count", "-c", str(config), "--in", str(path)])
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.fixture
def controller(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[BackgroundController]:
    data = tmp_path / "data"
    monkeypatch.setenv("AIRLOCK_DATA_DIR", str(data))
    monkeypatch.delenv("AIRLOCK_TOKEN", raising=False)
    with BackgroundController(config, data) as background:
        monkeypatch.setenv("AIRLOCK_CONTROLLER", background.address)
        yield background


def test_submit_in_then_jobs_artifacts_lists_and_downloads(
    runner: CliRunner, controller: BackgroundController, inputs: list[str], tmp_path: Path
) -> None:
    submitted = runner.invoke(app, ["submit", "wc", "count", *inputs, "--wait", "--json"])
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads(submitted.stdout)["job"]["id"]
    listed = runner.invoke(app, ["jobs", "artifacts", job_id, "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)["artifacts"]
    assert [(r["path"], r["size"]) for r in rows] == [("out/count.txt", 2), ("out/data.csv", 8)]
    fetched = runner.invoke(app, ["jobs", "artifacts", job_id, "--download", str(tmp_path / "dl")])
    assert fetched.exit_code == 0, fetched.output
    assert (tmp_path / "dl/out/count.txt").read_text().strip() == "5"
    assert "out/data.csv" in fetched.stdout
    unknown = runner.invoke(app, ["jobs", "artifacts", "no-such-job"])
    assert unknown.exit_code == 2
