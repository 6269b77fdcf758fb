"""Constants shared by the CLI tests."""

from __future__ import annotations

from pathlib import Path

from airlock.testing import calculator_script, script_yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "airlock.yaml"

#: The calculator conversation (airlock.testing's) as a script file.
CALC_SCRIPT = script_yaml(calculator_script())
