"""An agent's ``tree_budget:``: limits of the whole tree it roots, each mistake naming its key."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

from airlock.config import ConfigIssue, load_config

Write = Callable[..., Path]
Issues = Callable[[Path], list[ConfigIssue]]

AGENT = """\
agents:
  lead:
    provider: {kind: scripted, script: []}
    tools: [bash]
"""


def test_a_tree_budget_is_read_with_its_downgrade_and_increase(write: Write) -> None:
    path = write(
        AGENT
        + """\
    tree_budget:
      max_cost: "2.00"
      max_tokens: 200000
      max_duration: 10m
      downgrade: {at: 0.8, model: cheaper-model}
      increase: {amount: "1.00", approvers: [alice, bob]}
"""
    )
    budget = load_config(path).agent("lead").tree_budget
    assert budget is not None
    assert budget.max_cost == Decimal("2.00") and budget.max_tokens == 200_000
    assert budget.max_duration == 600_000
    assert budget.downgrade is not None and budget.downgrade.model == "cheaper-model"
    assert budget.increase is not None and budget.increase.approvers == ["alice", "bob"]


def test_without_one_an_agent_has_no_tree_budget(write: Write) -> None:
    assert load_config(write(AGENT)).agent("lead").tree_budget is None


def test_mistakes_name_their_key(write: Write, issues: Issues) -> None:
    cases = {
        "tree_budget: {}": "at least one of max_cost",
        "tree_budget: {max_cost: '-1'}": "max_cost",
        "tree_budget: {max_cost: '1', downgrade: {at: 1.5, model: m}}": "at",
        "tree_budget: {max_duration: 5m, downgrade: {at: 0.5, model: m}}": "downgrade needs",
        "tree_budget: {max_tokens: 10, increase: {amount: '1', approvers: [a]}}": "increase needs",
        "tree_budget: {max_cost: '1', increase: {amount: '1', approvers: []}}": "approvers",
        "tree_budget: {max_cost: '1', bogus: 1}": "bogus",
    }
    for text, expected in cases.items():
        found = issues(write(AGENT + "    " + text + "\n"))
        rendered = " | ".join(str(i) for i in found)
        assert "tree_budget" in rendered and expected in rendered, (text, rendered)
