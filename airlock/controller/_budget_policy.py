"""The budget policy of a job tree: from what the tree spent, a layer0 :class:`BudgetDecision`
(continue, switch to the cheaper model past ``downgrade.at``, halt at exhaustion)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from airlock.config import TreeBudget
from layer0 import BudgetDecision


@dataclass(frozen=True)
class TreeUse:
    """What a tree spent: cost (USD), tokens (in + out) and wall time since its root started."""

    cost: Decimal = Decimal(0)
    tokens: int = 0
    elapsed_ms: int = 0

    def __add__(self, other: TreeUse) -> TreeUse:
        return TreeUse(
            self.cost + other.cost, self.tokens + other.tokens, max(self.elapsed_ms, other.elapsed_ms)
        )


def exhausted(budget: TreeBudget, use: TreeUse, extra: Decimal = Decimal(0)) -> str | None:
    """Which limit ``use`` reached (``extra``: cost granted on top), in words; None: none."""
    if budget.max_cost is not None and use.cost >= budget.max_cost + extra:
        return f"cost {use.cost} of max_cost {budget.max_cost + extra}"
    if budget.max_tokens is not None and use.tokens >= budget.max_tokens:
        return f"{use.tokens} tokens of max_tokens {budget.max_tokens}"
    if budget.max_duration is not None and use.elapsed_ms >= budget.max_duration:
        return f"{use.elapsed_ms} ms of max_duration {budget.max_duration} ms"
    return None


def past_threshold(budget: TreeBudget, use: TreeUse) -> bool:
    """Whether ``use`` passed the downgrade's fraction of the cost or token limit."""
    down = budget.downgrade
    if down is None:
        return False
    at = Decimal(str(down.at))
    by_cost = budget.max_cost is not None and use.cost >= at * budget.max_cost
    by_tokens = budget.max_tokens is not None and use.tokens >= at * budget.max_tokens
    return by_cost or by_tokens


def decide(
    budget: TreeBudget,
    use: TreeUse,
    *,
    model: str | None,
    downgraded: bool,
    extra: Decimal = Decimal(0),
    may_ask: bool = True,
) -> BudgetDecision:
    """The tree's budget decision: at a limit, ``request_increase`` when the cost limit alone
    is reached, ``increase`` is configured and ``may_ask``, else ``halt_workflow``; below,
    ``downgrade_model`` (from ``model``, the root's) once past the threshold and not yet
    downgraded, else ``continue``. ``extra``: cost granted by approved increases."""
    if exhausted(budget, use, extra) is not None:
        other = exhausted(budget.model_copy(update={"max_cost": None}), use)
        if budget.increase is not None and may_ask and other is None:
            return BudgetDecision.request_increase(budget.increase.amount)
        return BudgetDecision.halt_workflow()
    if budget.downgrade is not None and not downgraded and past_threshold(budget, use):
        return BudgetDecision.downgrade_model(model or "default", budget.downgrade.model)
    return BudgetDecision.continue_()
