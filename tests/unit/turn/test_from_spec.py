"""Building a NeuronTurn from an AgentSpec (real scripted provider, real sandbox tools), YAML loading."""

from __future__ import annotations

import logging
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.build import build_context, build_hook, build_turn
from airlock.errors import SpecError
from airlock.providers import ScriptedProvider
from airlock.spec import AgentSpec, HookSpec
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    BudgetHook,
    Composite,
    LoggingHook,
    NoCompaction,
    SlidingWindow,
    Summarization,
)
from layer0 import Content, ExitReason, Scope, SessionId, TurnError, TurnInput, WriteMemory

SPEC_YAML = """
name: calc-agent
provider:
  kind: scripted
  model: scripted-1
  script:
    - match: {tools: [calculator, write_memory], messages: 1}
      response:
        content:
          - {type: text, text: "Computing."}
          - {type: tool_use, id: c1, name: calculator, input: {expression: "6*7"}}
        stop_reason: tool_use
        usage: {input_tokens: 30, output_tokens: 12}
        cost: "0.000090"
    - match: {messages: 3}
      response:
        content:
          - {type: tool_use, id: m1, name: write_memory, input: {key: answer, value: 42}}
        stop_reason: tool_use
        usage: {input_tokens: 50, output_tokens: 10}
        cost: "0.000100"
    - response:
        content: [{type: text, text: "6*7 = 42"}]
        stop_reason: end_turn
        usage: {input_tokens: 60, output_tokens: 8}
        cost: "0.000100"
system: You are a calculator.
tools: [calculator, write_memory]
defaults: {max_turns: 5, system_addendum: Be exact.}
hooks:
  - {name: budget, options: {max_cost: "1.00"}}
  - {name: logging}
context: {strategy: sliding_window, keep_last: 8}
limits: {stuck_threshold: 3}
"""


async def test_agent_from_yaml_runs_on_the_scripted_provider() -> None:
    spec = AgentSpec.from_yaml(SPEC_YAML)
    turn = build_turn(spec)
    assert turn.spec is spec and turn.name == "calc-agent"
    assert isinstance(turn.provider, ScriptedProvider)
    assert isinstance(turn.context, SlidingWindow) and turn.context.keep_last == 8
    assert [type(h) for h in turn.hooks.hooks] == [BudgetHook, LoggingHook]
    assert turn.limits.stuck_threshold == 3
    out = await turn.execute(TurnInput.new("what is 6*7?", session=SessionId("s")))
    assert out.exit_reason == ExitReason.complete()
    assert out.message == Content.text("6*7 = 42")
    assert out.metadata.cost == Decimal("0.000290")
    assert (out.metadata.tokens_in, out.metadata.tokens_out, out.metadata.turns_used) == (140, 30, 3)
    assert [(r.name, r.success) for r in out.metadata.tools_called] == [
        ("calculator", True),
        ("write_memory", True),
    ]
    assert out.effects[0] == WriteMemory(scope=Scope.session("s"), key="answer", value=42)
    request = turn.provider.requests[0]  # type: ignore[attr-defined]
    assert request.system == "You are a calculator.\nBe exact."
    assert request.model == "scripted-1"
    second = turn.provider.requests[1]  # type: ignore[attr-defined]
    assert second.messages[2].content[0].content == "42"


def test_from_yaml_reads_files_and_reports_errors(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(SPEC_YAML)
    assert AgentSpec.from_yaml(path).name == "calc-agent"
    assert AgentSpec.from_yaml(str(path)).name == "calc-agent"
    with pytest.raises(SpecError, match="not valid YAML"):
        AgentSpec.from_yaml("name: [unclosed\n")
    with pytest.raises(SpecError, match="must be a mapping"):
        AgentSpec.from_yaml("- a\n- b\n")
    with pytest.raises(SpecError, match=r"provider\.kind.*unknown provider 'gpt'"):
        AgentSpec.from_yaml("name: x\nprovider: {kind: gpt}\n")
    with pytest.raises(SpecError, match="unknown tool"):
        AgentSpec.from_yaml("name: x\nprovider: {kind: scripted}\ntools: [rm_rf]\n")
    with pytest.raises(SpecError, match="cannot read"):
        AgentSpec.from_yaml(tmp_path / "missing.yaml")


def spec(**fields: object) -> AgentSpec:
    return AgentSpec.model_validate({"name": "a", "provider": {"kind": "scripted", "script": []}} | fields)


async def test_injected_provider_and_workspace_tools(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("hello from the workspace")
    provider = FakeProvider(
        [tool_response(("r1", "read_file", {"path": "note.txt"})), text_response("read it")]
    )
    turn = build_turn(spec(tools=["read_file"]), workspace=tmp_path, provider=provider)
    out = await turn.execute(TurnInput.new("read the note"))
    assert out.exit_reason == ExitReason.complete()
    result = provider.requests[1].messages[2].content[0]
    assert result.type == "tool_result" and "hello from the workspace" in result.content


def test_workspace_tools_need_a_workspace() -> None:
    with pytest.raises(SpecError, match="workspace"):
        build_turn(spec(tools=["bash"]), provider=FakeProvider())


@pytest.mark.parametrize(
    ("strategy", "kind"),
    [
        ("none", NoCompaction),
        ("sliding_window", SlidingWindow),
        ("summarization", Summarization),
        ("composite", Composite),
    ],
)
def test_context_strategy_from_spec(strategy: str, kind: type) -> None:
    turn = build_turn(spec(context={"strategy": strategy}), provider=FakeProvider())
    assert isinstance(turn.context, kind)


def test_composite_summarizes_first_then_slides_as_its_docstring_says() -> None:
    turn = build_turn(spec(context={"strategy": "composite"}), provider=FakeProvider())
    assert isinstance(turn.context, Composite)
    assert [type(s) for s in turn.context.strategies] == [Summarization, SlidingWindow]
    doc = " ".join((build_context.__doc__ or "").split())
    assert "``composite``: summarization, then a sliding window" in doc


def test_hooks_by_name() -> None:
    budget = build_hook(HookSpec(name="budget", options={"max_cost": "0.50", "warn_at": "0.9"}))
    assert isinstance(budget, BudgetHook)
    assert budget.max_cost == Decimal("0.50") and budget.warn_at == Decimal("0.9")
    logging_hook = build_hook(HookSpec(name="logging", options={"level": "debug"}))
    assert isinstance(logging_hook, LoggingHook)
    with pytest.raises(SpecError, match="valid hooks: budget, logging"):
        build_hook(HookSpec(name="telepathy"))
    with pytest.raises(SpecError, match="max_cost"):
        build_hook(HookSpec(name="budget"))
    with pytest.raises(SpecError, match="invalid options"):
        build_hook(HookSpec(name="budget", options={"max_cost": "lots"}))
    with pytest.raises(SpecError, match="unknown level"):
        build_hook(HookSpec(name="logging", options={"level": "loud"}))
    assert logging_hook._level == logging.DEBUG


async def test_budget_hook_from_spec_halts() -> None:
    provider = FakeProvider(
        [tool_response(("t", "calculator", {"expression": "1+1"}), cost=Decimal("0.6")), text_response("2")]
    )
    s = spec(tools=["calculator"], hooks=[{"name": "budget", "options": {"max_cost": "0.5"}}])
    out = await build_turn(s, provider=provider).execute(TurnInput.new("x"))
    assert out.exit_reason.kind == "observer_halt" and provider.calls == 1


async def test_scripted_signature_mismatch_fails_loudly() -> None:
    bad = AgentSpec.from_yaml(
        SPEC_YAML.replace("tools: [calculator, write_memory], messages: 1", "messages: 7")
    )
    turn = build_turn(bad)
    with pytest.raises(TurnError, match="step"):
        await turn.execute(TurnInput.new("x"))
