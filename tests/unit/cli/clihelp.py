"""Constants shared by the CLI tests (a uniquely named module: test dirs have no packages)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "airlock.yaml"

#: The calculator conversation in the scripted provider's format.
CALC_SCRIPT = """\
steps:
  - response:
      content:
        - {type: tool_use, id: call_1, name: calculator, input: {expression: "17 * 23"}}
      stop_reason: tool_use
      usage: {input_tokens: 40, output_tokens: 12}
      cost: "0.0001"
  - response:
      content:
        - {type: text, text: "17 x 23 = 391."}
      stop_reason: end_turn
      usage: {input_tokens: 60, output_tokens: 8}
      cost: "0.0002"
"""
