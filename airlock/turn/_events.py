"""Events a running turn reports to whoever watches it (the runner streams them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Annotated, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from airlock.errors import AirlockError
from layer0 import (
    AgentId,
    BudgetAction,
    BudgetWarning,
    CompactionComplete,
    ContextPressure,
    CostIncurred,
    EventSource,
    ObservableEvent,
    PreCompactionFlush,
    ProviderManaged,
)


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TurnStarted(_Event):
    """The turn began (``resumed``: it continues from a snapshot taken elsewhere)."""

    type: Literal["started"] = "started"
    resumed: bool = False


class InferenceStarted(_Event):
    """A model call is about to be made (``iteration`` counts from 1)."""

    type: Literal["inference_started"] = "inference_started"
    iteration: int
    model: str | None = None


class InferenceFinished(_Event):
    """A model call returned."""

    type: Literal["inference_finished"] = "inference_finished"
    iteration: int
    stop_reason: str
    tokens_in: int
    tokens_out: int
    #: Cost of this call, USD (None when unknown).
    cost: Decimal | None
    #: Running totals for the turn.
    total_tokens_in: int
    total_tokens_out: int
    total_cost: Decimal
    duration_ms: int


class TextDelta(_Event):
    """Text the model generated since the previous delta of the call (live only: never
    recorded; the call's text comes in the turn's output)."""

    type: Literal["text_delta"] = "text_delta"
    iteration: int
    text: str
    #: Characters left out before ``text`` because a reader fell behind.
    dropped_chars: int = 0


def joined_delta_text(first: str, second: str, dropped: int, max_chars: int) -> tuple[str, int]:
    """Two consecutive deltas' text as one waiting delta's: its end, at most ``max_chars``
    (what the model wrote last), and ``dropped`` (the characters both left out) raised by
    those cut now."""
    text = first + second
    cut = max(0, len(text) - max_chars)
    return text[cut:], dropped + cut


class ToolStarted(_Event):
    """A tool call begins."""

    type: Literal["tool_started"] = "tool_started"
    tool_use_id: str
    name: str
    input: JsonValue


class ToolFinished(_Event):
    """A tool call ended."""

    type: Literal["tool_finished"] = "tool_finished"
    tool_use_id: str
    name: str
    duration_ms: int
    #: The tool ran and returned a result (not an error result). A command that exited
    #: non-zero ran: ``success`` with its ``exit_code``.
    success: bool
    output: str
    #: A command's exit status (a result object with an integer ``exit_code``), else None.
    exit_code: int | None = None


class TurnLog(_Event):
    """A log line the turn wants observers to see."""

    type: Literal["log"] = "log"
    level: str
    message: str


class TurnPaused(_Event):
    """The turn stopped at a turn boundary because a pause was requested."""

    type: Literal["paused"] = "paused"
    iteration: int


class Checkpoint(_Event):
    """The session's state at a point a resumed session can continue from: after context
    assembly, after each model response, after each tool call, and at each step's end.

    ``state`` is the ``SessionState`` as JSON whose ``messages`` hold only the messages from
    index ``messages_from`` on (the ones before are unchanged since the previous checkpoint;
    0 after a compaction rewrote them), and ``tool_records`` those from ``tool_records_from``
    on: rebuild it with ``SessionState.from_checkpoint``.
    """

    type: Literal["checkpoint"] = "checkpoint"
    messages_from: int
    tool_records_from: int = 0
    state: dict[str, JsonValue]


class ContextCompacted(_Event):
    """The context strategy changed the conversation (a compaction; or the causal cone put
    before the input: ``cone_size`` of ``cone_total`` records, ``compression_ratio`` =
    1 - cone_size / cone_total)."""

    type: Literal["compacted"] = "compacted"
    strategy: str
    messages_before: int
    messages_after: int
    cone_size: int | None = None
    cone_total: int | None = None
    compression_ratio: float | None = None


#: The layer0 lifecycle events a turn emits: its BudgetEvents and CompactionEvents.
LifecyclePayload = Annotated[
    CostIncurred
    | BudgetWarning
    | BudgetAction
    | ContextPressure
    | PreCompactionFlush
    | CompactionComplete
    | ProviderManaged,
    Field(discriminator="type"),
]

#: The ``type`` tags of the BudgetEvent variants (the others are CompactionEvents).
BUDGET_EVENT_TYPES = frozenset({"cost_incurred", "budget_warning", "budget_action"})


class LifecycleEvent(_Event):
    """A layer0 lifecycle event as the turn emitted it:

    - BudgetEvent: ``cost_incurred`` after each model call (a compaction's summary call too),
      ``budget_warning`` once at each of the agent's ``limits.budget_warnings`` fractions of
      ``max_cost``, ``budget_action`` (``halt_workflow``) when the budget stops the turn;
    - CompactionEvent: ``context_pressure`` when the context strategy decides to compact,
      ``pre_compaction_flush`` just before, ``compaction_complete`` after (tokens freed),
      ``provider_managed`` when the provider compacted server-side.

    A budget event's ``workflow`` is the input's ``metadata.workflow`` when it is a string, else
    the session id, else the agent's name. :meth:`observable` wraps it as layer0's
    ``ObservableEvent``, which is what hook observers receive. It carries no time: the
    stream's consumer knows when it arrived (an observer is given the turn's elapsed time).
    """

    type: Literal["lifecycle"] = "lifecycle"
    event: LifecyclePayload
    #: The agent whose turn emitted it.
    agent: str

    @property
    def family(self) -> Literal["budget", "compaction"]:
        """``budget`` for a BudgetEvent, ``compaction`` for a CompactionEvent."""
        return "budget" if self.event.type in BUDGET_EVENT_TYPES else "compaction"

    def observable(self, timestamp_ms: int) -> ObservableEvent:
        """The event as layer0's ``ObservableEvent``: source ``turn``, ``event_type``
        ``budget.<type>`` or ``compaction.<type>``, ``timestamp`` the given ms (since the turn
        started, for the loop's observers), ``data`` the layer0 event's JSON."""
        workflow = getattr(self.event, "workflow", None)
        return ObservableEvent(
            source=EventSource.TURN,
            event_type=f"{self.family}.{self.event.type}",
            timestamp=timestamp_ms,
            data=self.event.model_dump(mode="json"),
            workflow_id=workflow,
            agent_id=AgentId(self.agent),
        )


class PendingCall(_Event):
    """A tool call of the open step that waits for a person's approval."""

    tool_use_id: str
    name: str
    input: JsonValue
    #: The risk classes the tool declares (``destructive``, ``external``).
    risks: list[str] = []


class TurnSuspended(_Event):
    """The turn stopped before tool calls that need a person's approval; the latest
    checkpoint holds the state to resume from once they are decided."""

    type: Literal["suspended"] = "suspended"
    iteration: int
    calls: list[PendingCall]


class SignalDelivered(_Event):
    """A signal reached the turn at a step boundary, and what it did (``feedback``: shown to
    the model; ``budget``: limits changed; ``cancel``: the turn ends; ``ignored``)."""

    type: Literal["signal"] = "signal"
    signal_type: str
    action: Literal["feedback", "budget", "cancel", "ignored"]
    detail: str = ""


class SuspendedForApproval(AirlockError):
    """Raised where a turn's output was expected: it stopped before tool calls that wait for a
    person's approval (``calls``); its latest Checkpoint is the state to resume from."""

    def __init__(self, event: TurnSuspended) -> None:
        names = ", ".join(c.name for c in event.calls)
        super().__init__(f"the turn waits for approval of {names}")
        self.event = event

    @property
    def calls(self) -> list[PendingCall]:
        """The calls waiting for approval."""
        return list(self.event.calls)


#: Everything a turn reports while it runs, as a bare union: the unions that extend it (a
#: sandbox's events add its proxies', a runner client's the final output) name it once.
AnyTurnEvent: TypeAlias = (
    TurnStarted
    | InferenceStarted
    | InferenceFinished
    | TextDelta
    | ToolStarted
    | ToolFinished
    | TurnLog
    | TurnPaused
    | Checkpoint
    | TurnSuspended
    | SignalDelivered
    | ContextCompacted
    | LifecycleEvent
)

#: Everything a turn reports while it runs (``"type"``-tagged).
TurnEvent = Annotated[AnyTurnEvent, Field(discriminator="type")]

#: A callback that receives turn events; it must be quick (it is awaited inline).
TurnEventSink = Callable[[TurnEvent], Awaitable[None]]
