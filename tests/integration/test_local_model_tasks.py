"""One task of the local model battery (``bench/local_model_tasks.py``), as CI runs it.

The battery is a benchmark; this runs one of its tasks so that it cannot rot:
``offline-coder`` of ``examples/airlock.yaml`` on the REAL local model, in a Docker sandbox
through ``airlock run``, with the model server's defaults (tool calls under a grammar,
trimmed schemas). The task (create a file with given content) is checked by the battery's
own program; generation is deterministic (temperature 0), and the task passed in every run
measured on this machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1200)
def test_one_battery_task_passes_with_every_call_generated_under_the_grammar(tmp_path: Path) -> None:
    report_path = tmp_path / "battery.json"
    argv = [
        sys.executable, str(ROOT / "bench" / "local_model_tasks.py"),
        "--runs", "1", "--task", "create_file", "--json", str(report_path),
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=1100, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(report_path.read_text())
    assert (report["grammar"], report["trim"]) == ("on", "on")
    (row,) = report["rows"]
    assert row["errors"] == 0, row
    assert row["calls_ran"] >= 1 and row["calls_refused"] == 0 and row["schema_echoes"] == 0, row
    assert row["passed"] == 1, f"the offline coder failed the task: {row['failure']}"
    server = report["server"]
    assert server["completions"] >= 2 and server["constrained"] == server["completions"], server
    assert "| create_file | 1/1 |" in done.stdout or "create_file  1/1" in done.stdout
