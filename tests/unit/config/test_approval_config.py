"""An agent's ``approval:``, ``durability:`` and ``input_files:`` sections: the gate reaches
the spec, the rest stays with the controller (the runner never needs it), and every mistake
names its key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from airlock.behaviour import InputFilesPolicy
from airlock.config import load_config
from airlock.spec import ApprovalGate

Write = Callable[..., Path]
One = Callable[[Path], str]

AGENT = """\
agents:
  ops:
    provider: {kind: scripted, script: []}
    tools: [bash, read_file, write_file]
"""


def test_the_gate_goes_into_the_spec_and_the_approvers_stay_on_the_controller(write: Write) -> None:
    path = write(
        AGENT
        + """\
    approval:
      tools: [bash, "*_file"]
      risks: [external]
      approvers: [alice, bob, carol]
      strategy: majority
      timeout: 30m
      on_timeout: approve
    durability: {in_flight: rerun, max_resumes: 5}
"""
    )
    agent = load_config(path).agent("ops")
    assert agent.spec.approval == ApprovalGate(tools=["bash", "*_file"], risks=["external"])
    assert agent.approval is not None
    assert agent.approval.approvers == ("alice", "bob", "carol")
    assert agent.approval.needed == 2
    assert agent.approval.timeout_ms == 30 * 60_000 and agent.approval.on_timeout == "approve"
    assert agent.durability.in_flight == "rerun" and agent.durability.max_resumes == 5


def test_without_sections_nothing_waits_and_lost_calls_fail(write: Write) -> None:
    agent = load_config(write(AGENT)).agent("ops")
    assert agent.spec.approval is None and agent.approval is None
    assert agent.durability.in_flight == "fail" and agent.durability.max_resumes == 3


def test_input_files_reach_the_controller_and_default_to_nothing(write: Write) -> None:
    section = "    input_files: {show: content, max_bytes: 4096, lines: 2}\n"
    assert load_config(write(AGENT + section)).agent("ops").input_files == InputFilesPolicy(
        show="content", max_bytes=4096, lines=2
    )
    assert load_config(write(AGENT)).agent("ops").input_files.show == "none"


@pytest.mark.parametrize(
    ("section", "where", "what"),
    [
        ("approval: {approvers: [alice]}", "agents.ops.approval", "name the calls that wait"),
        (
            "approval: {tools: [bsh]}",
            "agents.ops.approval.tools[0]",
            "'bsh' matches none of the agent's tools",
        ),
        ("approval: {risks: [dangerous]}", "agents.ops.approval.risks[0]", "destructive"),
        ("approval: {tools: [bash], strategy: most}", "agents.ops.approval.strategy", "majority"),
        ("approval: {tools: [bash], approvers: [a, a]}", "agents.ops.approval", "listed twice"),
        ("approval: {tools: [bash], timeout: soon}", "agents.ops.approval.timeout", "duration"),
        ("durability: {in_flight: maybe}", "agents.ops.durability.in_flight", "rerun"),
        ("durability: {max_resumes: -1}", "agents.ops.durability.max_resumes", "0"),
        ("input_files: {show: all}", "agents.ops.input_files.show", "content"),
        ("input_files: {lines: 0}", "agents.ops.input_files.lines", "1"),
        ("input_files: {show: names, limit: 3}", "agents.ops.input_files.limit", "unknown key"),
    ],
)
def test_each_mistake_names_its_key(
    write: Write, one_issue: One, section: str, where: str, what: str
) -> None:
    message = one_issue(write(AGENT + "    " + section + "\n"))
    assert f" {where}: " in message and what in message, message
