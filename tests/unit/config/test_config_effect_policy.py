"""The ``effects:`` key of an agent entry: its defaults, its validation, and where errors point."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from airlock.config import ConfigIssue, load_config
from airlock.policy.effects import EffectPolicy

Write = Callable[..., Path]

One = Callable[[Path], str]
Issues = Callable[[Path], list[ConfigIssue]]

TWO = """\
agents:
  boss:
    provider: {kind: scripted, script: []}
    tools: [delegate, handoff, signal, write_memory]
    effects:
      delegate: [worker]
      handoff: [worker]
      memory: [session, global]
      signal: [wf-reports]
      custom: [notify]
      max_effects: 8
      max_value_bytes: 4096
  worker:
    provider: {kind: scripted, script: []}
"""


def test_an_agent_without_effects_gets_the_secure_default(write: Write) -> None:
    config = load_config(write(TWO))
    assert config.agent("worker").effects == EffectPolicy()
    assert config.agent("worker").effects.memory == ("session",)
    assert config.agent("worker").effects.delegate == ()


def test_the_policy_is_compiled_into_the_agent(write: Write) -> None:
    boss = load_config(write(TWO)).agent("boss")
    assert boss.effects == EffectPolicy(
        delegate=("worker",),
        handoff=("worker",),
        memory=("session", "global"),
        signal=("wf-reports",),
        custom=("notify",),
        max_effects=8,
        max_value_bytes=4096,
    )


def test_an_unknown_delegate_or_handoff_target_is_an_error_at_its_item(write: Write, issues: Issues) -> None:
    path = write(
        TWO.replace("delegate: [worker]", "delegate: [worker, admn]").replace(
            "handoff: [worker]", "handoff: [ghost]"
        )
    )
    found = [str(i) for i in issues(path)]
    assert found == [
        f"{path}:6:26: agents.boss.effects.delegate[1]: unknown agent 'admn'; defined agents: boss, worker",
        f"{path}:7:17: agents.boss.effects.handoff[0]: unknown agent 'ghost'; defined agents: boss, worker",
    ]


def test_an_agent_defined_in_another_file_is_a_valid_target(write: Write) -> None:
    write("agents:\n  worker:\n    provider: {kind: scripted, script: []}\n", "airlock.d/b.yaml")
    boss = "agents:\n  boss:\n    provider: {kind: scripted, script: []}\n    effects: {delegate: [worker]}\n"
    path = write(boss, "airlock.d/a.yaml")
    config = load_config(path.parent)
    assert config.agent("boss").effects.delegate == ("worker",)


def test_an_effect_tool_with_nothing_granted_is_an_error_at_the_tool(write: Write, issues: Issues) -> None:
    path = write(
        """
        agents:
          lone:
            provider: {kind: scripted, script: []}
            tools: [bash, delegate, signal, write_memory]
            effects: {memory: []}
        """
    )
    found = issues(path)
    assert [(i.line, i.column, i.key) for i in found] == [
        (4, 19, "agents.lone.tools[1]"),
        (4, 29, "agents.lone.tools[2]"),
        (4, 37, "agents.lone.tools[3]"),
    ]
    assert found[0].message == (
        "tool 'delegate' is offered but effects.delegate grants no agent, so every call would be "
        "refused; list what it may use under effects.delegate, or remove the tool"
    )
    assert "effects.signal grants no workflow" in found[1].message
    assert "effects.memory grants no scope" in found[2].message


def test_memory_tools_work_with_the_default_session_grant(write: Write) -> None:
    path = write(
        "agents:\n  memo:\n    provider: {kind: scripted, script: []}\n"
        "    tools: [write_memory, delete_memory]\n"
    )
    assert load_config(path).agent("memo").effects.memory == ("session",)


def test_bad_values_point_at_their_key(write: Write, issues: Issues) -> None:
    path = write(
        """
        agents:
          a:
            provider: {kind: scripted, script: []}
            effects:
              memory: [workflows]
              max_effects: 0
              max_value_bytes: "64k"
              delegates: [b]
        """
    )
    found = {i.key: i for i in issues(path)}
    assert sorted(found) == [
        "agents.a.effects.delegates",
        "agents.a.effects.max_effects",
        "agents.a.effects.max_value_bytes",
        "agents.a.effects.memory[0]",
    ]
    assert found["agents.a.effects.memory[0]"].line == 5
    assert "unknown memory scope 'workflows'" in found["agents.a.effects.memory[0]"].message
    assert "greater than or equal to 1" in found["agents.a.effects.max_effects"].message
    assert found["agents.a.effects.delegates"].message == (
        "unknown key 'delegates'; valid keys: custom, delegate, handoff, max_effects, "
        "max_value_bytes, memory, signal"
    )
