"""A tree budget's policy: layer0 BudgetDecisions from what a tree spent."""

from __future__ import annotations

from decimal import Decimal

from airlock.config import TreeBudget
from airlock.controller._budget_policy import TreeUse, decide, exhausted
from layer0 import BudgetDecision

BUDGET = TreeBudget.model_validate(
    {
        "max_cost": "2.00",
        "max_tokens": 1000,
        "max_duration": "10m",
        "downgrade": {"at": 0.8, "model": "cheaper-model"},
        "increase": {"amount": "1.00", "approvers": ["ana"]},
    }
)


def test_under_the_threshold_the_tree_continues() -> None:
    use = TreeUse(cost=Decimal("1.00"), tokens=100)
    assert decide(BUDGET, use, model="big", downgraded=False) == BudgetDecision.continue_()


def test_past_the_threshold_of_either_limit_it_downgrades_once() -> None:
    for use in (TreeUse(cost=Decimal("1.60")), TreeUse(tokens=800)):
        assert decide(BUDGET, use, model="big", downgraded=False) == BudgetDecision.downgrade_model(
            "big", "cheaper-model"
        )
        assert decide(BUDGET, use, model="big", downgraded=True) == BudgetDecision.continue_()


def test_at_the_cost_limit_it_asks_for_more_and_halts_when_it_may_not() -> None:
    use = TreeUse(cost=Decimal("2.00"))
    assert decide(BUDGET, use, model=None, downgraded=True) == BudgetDecision.request_increase("1.00")
    assert decide(BUDGET, use, model=None, downgraded=True, may_ask=False) == BudgetDecision.halt_workflow()
    granted = decide(BUDGET, use, model=None, downgraded=True, extra=Decimal("1.00"))
    assert granted == BudgetDecision.continue_()


def test_tokens_or_wall_time_halt_at_once_more_money_would_not_help() -> None:
    for use in (TreeUse(tokens=1000), TreeUse(elapsed_ms=600_000)):
        assert decide(BUDGET, use, model=None, downgraded=True) == BudgetDecision.halt_workflow()
    assert exhausted(BUDGET, TreeUse(tokens=1000)) == "1000 tokens of max_tokens 1000"
    assert exhausted(BUDGET, TreeUse(cost=Decimal("1.99"))) is None
