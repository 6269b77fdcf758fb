"""The scripted-agent builders of airlock.testing: the steps they write, the script file they
render, and the calculator conversation (the one the example configuration's demo plays)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from airlock.build import build_turn
from airlock.testing import (
    bash_agent,
    calculator_agent,
    calculator_script,
    script_yaml,
    scripted_agent,
    text_step,
    tool_step,
    tools_step,
)
from layer0 import Content, TurnError, TurnInput

EXAMPLE_SCRIPT = Path(__file__).resolve().parents[3] / "examples" / "scripts" / "calculator.yaml"


def test_steps_carry_only_what_is_asked() -> None:
    assert text_step("hi") == {
        "response": {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}
    }
    assert tool_step("bash", {"command": "ls"}, id="x", text="Looking.", usage=(3, 1), cost="0.01") == {
        "response": {
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "x", "name": "bash", "input": {"command": "ls"}},
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 1},
            "cost": "0.01",
        }
    }
    both = tools_step([("a", {}), ("b", {"n": 1})], match={"messages": 1})
    assert both["match"] == {"messages": 1}
    assert [(c["id"], c["name"]) for c in both["response"]["content"]] == [("t0", "a"), ("t1", "b")]


def test_scripted_agent_takes_further_spec_fields() -> None:
    spec = scripted_agent([text_step("x")], name="n", tools=["calculator"], system="Be brief.")
    assert (spec.name, spec.tools, spec.system) == ("n", ["calculator"], "Be brief.")
    assert spec.provider.kind == "scripted" and spec.provider.script == [text_step("x")]


def test_bash_agent_scripts_each_command_then_the_answer() -> None:
    spec = bash_agent("true", "false", final="over")
    assert spec.tools == ["bash"]
    script = spec.provider.script
    assert isinstance(script, list) and len(script) == 3
    assert [s["response"]["content"][0].get("input") for s in script] == [  # type: ignore[index, union-attr]
        {"command": "true"},
        {"command": "false"},
        None,
    ]


def test_the_calculator_script_is_the_example_demos_conversation() -> None:
    example = yaml.safe_load(EXAMPLE_SCRIPT.read_text())["steps"]
    ours = calculator_script()
    for step in ours:  # the example's file records no usage or cost
        step["response"].pop("usage")
        step["response"].pop("cost")
    assert ours == example


def test_script_yaml_is_a_script_file_of_the_steps() -> None:
    steps = calculator_script()
    assert yaml.safe_load(script_yaml(steps)) == {"version": 1, "steps": steps}


async def test_the_calculator_agent_answers_and_reports_usage_and_cost() -> None:
    out = await build_turn(calculator_agent()).execute(TurnInput.new("What is 17 * 23?"))
    assert out.message == Content.text("17 x 23 = 391.")
    assert (out.metadata.tokens_in, out.metadata.tokens_out, out.metadata.cost) == (
        100,
        20,
        Decimal("0.0003"),
    )
    assert [(t.name, t.success) for t in out.metadata.tools_called] == [("calculator", True)]


async def test_the_calculator_script_refuses_an_agent_offered_other_tools() -> None:
    spec = scripted_agent(calculator_script(), tools=["calculator", "write_memory"])
    with pytest.raises(TurnError, match=r"step 1 of 2 expects tools=\[calculator\] messages=1"):
        await build_turn(spec).execute(TurnInput.new("What is 17 * 23?"))
