"""A budget across a delegation tree: declared on the agent that is a tree's root, drawn from
by every job of the tree (the ``tree_budget:`` key of an agent entry)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, model_validator

from layer0 import Money

from ._values import parse_duration

_Name = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TreeDowngrade(_Frozen):
    """Switch the tree's turns to a cheaper ``model`` once spend passes ``at`` of a limit."""

    #: The fraction of the limit (cost or tokens) past which the cheaper model is used.
    at: Annotated[float, Field(gt=0, lt=1)]
    model: _Name


class TreeIncrease(_Frozen):
    """At exhaustion of the cost limit, ask ``approvers`` (any one decides) to grow it by
    ``amount``: the tree's running turns pause until one does; no decision within ``timeout``
    halts the tree as a rejection does."""

    amount: Annotated[Money, Field(gt=Decimal(0))]
    approvers: Annotated[list[_Name], Field(min_length=1)]
    #: Milliseconds (``"30m"`` in YAML); default one hour.
    timeout: Annotated[int, BeforeValidator(parse_duration)] = 3_600_000

    @model_validator(mode="after")
    def _distinct(self) -> TreeIncrease:
        if len(set(self.approvers)) != len(self.approvers):
            raise ValueError("an approver is listed twice")
        return self


class TreeBudget(_Frozen):
    """What a tree rooted at the agent may spend in total: cost (USD), tokens (in + out) and
    wall time since the root started; at least one of them."""

    max_cost: Annotated[Money, Field(gt=Decimal(0))] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    #: Milliseconds (``"10m"``, ``"90s"`` or integer milliseconds in YAML).
    max_duration: Annotated[int, BeforeValidator(parse_duration)] | None = None
    downgrade: TreeDowngrade | None = None
    increase: TreeIncrease | None = None

    @model_validator(mode="after")
    def _limits(self) -> TreeBudget:
        if self.max_cost is None and self.max_tokens is None and self.max_duration is None:
            raise ValueError("give at least one of max_cost, max_tokens, max_duration")
        if self.downgrade is not None and self.max_cost is None and self.max_tokens is None:
            raise ValueError("downgrade needs max_cost or max_tokens (its `at` is a fraction of them)")
        if self.increase is not None and self.max_cost is None:
            raise ValueError("increase needs max_cost (its amount grows the cost limit)")
        return self
