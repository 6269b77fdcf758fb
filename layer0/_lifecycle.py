"""Interface ⑥, Lifecycle: the shared vocabulary of budget, compaction and observability events."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field

from ._content import Content
from ._effect import Scope
from ._id import AgentId, WorkflowId
from ._wire import U64, DurationMs, ExternallyTagged, Json, Money, WireModel


class BudgetDecision(ExternallyTagged):
    """An orchestrator's budget decision: ``"continue"``,
    ``{"downgrade_model": {"from", "to"}}``, ``"halt_workflow"`` or
    ``{"request_increase": {"amount"}}``."""

    _variants: ClassVar[dict[str, str | dict[str, str] | None]] = {
        "continue": None,
        "downgrade_model": {"from": "from_model", "to": "to_model"},
        "halt_workflow": None,
        "request_increase": {"amount": "amount"},
    }
    from_model: str | None = None
    to_model: str | None = None
    amount: Money | None = None

    @classmethod
    def continue_(cls) -> Self:
        """Keep going."""
        return cls._make("continue")

    @classmethod
    def downgrade_model(cls, from_model: str, to_model: str) -> Self:
        """Switch to a cheaper model."""
        return cls._make("downgrade_model", {"from": from_model, "to": to_model})

    @classmethod
    def halt_workflow(cls) -> Self:
        """Stop the workflow."""
        return cls._make("halt_workflow")

    @classmethod
    def request_increase(cls, amount: object) -> Self:
        """Ask for more budget (``amount`` a Decimal or decimal string)."""
        return cls._make("request_increase", {"amount": str(amount)})


class CostIncurred(WireModel):
    """Emitted by a turn after each model call."""

    type: Literal["cost_incurred"] = "cost_incurred"
    agent: AgentId
    cost: Money
    cumulative: Money


class BudgetWarning(WireModel):
    """Emitted by an orchestrator nearing a limit."""

    type: Literal["budget_warning"] = "budget_warning"
    workflow: WorkflowId
    spent: Money
    limit: Money


class BudgetAction(WireModel):
    """An orchestrator's decision for a workflow."""

    type: Literal["budget_action"] = "budget_action"
    workflow: WorkflowId
    action: BudgetDecision


#: Budget coordination events (``"type"``-tagged).
BudgetEvent = Annotated[CostIncurred | BudgetWarning | BudgetAction, Field(discriminator="type")]


class ContextPressure(WireModel):
    """Emitted by a turn when its context window is filling."""

    type: Literal["context_pressure"] = "context_pressure"
    agent: AgentId
    fill_percent: float = Field(allow_inf_nan=False)
    tokens_used: U64
    tokens_available: U64


class PreCompactionFlush(WireModel):
    """Emitted before compaction so memory can be flushed."""

    type: Literal["pre_compaction_flush"] = "pre_compaction_flush"
    agent: AgentId
    scope: Scope


class CompactionComplete(WireModel):
    """Emitted after client-side compaction."""

    type: Literal["compaction_complete"] = "compaction_complete"
    agent: AgentId
    strategy: str
    tokens_freed: U64


class ProviderManaged(WireModel):
    """The provider compacted the context server-side."""

    type: Literal["provider_managed"] = "provider_managed"
    agent: AgentId
    provider: str
    tokens_before: U64
    tokens_after: U64
    summary: Content | None = None


#: Compaction coordination events (``"type"``-tagged).
CompactionEvent = Annotated[
    ContextPressure | PreCompactionFlush | CompactionComplete | ProviderManaged,
    Field(discriminator="type"),
]


class EventSource(StrEnum):
    """Which protocol emitted an event."""

    TURN = "turn"
    ORCHESTRATION = "orchestration"
    STATE = "state"
    ENVIRONMENT = "environment"
    HOOK = "hook"


class ObservableEvent(WireModel):
    """The common observability vocabulary every layer emits."""

    source: EventSource
    #: Free-form, namespaced by convention (``turn.tool_called``).
    event_type: str
    #: Milliseconds since the workflow started (not wall clock).
    timestamp: DurationMs
    data: Json
    trace_id: str | None = None
    workflow_id: WorkflowId | None = None
    agent_id: AgentId | None = None
