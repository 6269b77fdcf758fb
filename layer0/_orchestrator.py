"""Protocol ②, Orchestration: how turns of different agents compose."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ._effect import SignalPayload
from ._error import OrchError
from ._id import AgentId, WorkflowId
from ._input import TurnInput
from ._turn import TurnOutput
from ._wire import Json, WireModel


class QueryPayload(WireModel):
    """A read-only query of a workflow's state."""

    query_type: str
    params: Json


@runtime_checkable
class Orchestrator(Protocol):
    """Protocol ②: dispatch turns to agents, signal and query workflows."""

    async def dispatch(self, agent: AgentId, input: TurnInput) -> TurnOutput:
        """Run one turn of ``agent``. Raises ``OrchError``."""
        ...

    async def dispatch_many(self, tasks: list[tuple[AgentId, TurnInput]]) -> list[TurnOutput | OrchError]:
        """Run several turns concurrently; results in input order, failures independent."""
        ...

    async def signal(self, target: WorkflowId, signal: SignalPayload) -> None:
        """Deliver a signal; returns when accepted, not when processed."""
        ...

    async def query(self, target: WorkflowId, query: QueryPayload) -> Any:
        """Read-only query of a workflow; the result's schema depends on the workflow."""
        ...
