"""The README's quickstart (examples/quickstart.py) runs and prints what the README says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"


def test_quickstart_prints_answer_tokens_cost_tools() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "17 x 23 = 391. | 100 in 20 out | $ 0.0003 | ['calculator']"
