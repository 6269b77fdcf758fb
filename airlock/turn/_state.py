"""The serializable shapes of a stepped turn: its state snapshot and what one step did."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layer0 import Effect, ExitReason, Json, Money, ToolCallRecord, TurnInput, TurnOutput

from ._events import Checkpoint, PendingCall
from ._types import ContentPart, ProviderMessage, Role, StopReason, ToolUsePart


class SessionState(BaseModel):
    """Everything needed to continue a turn in another process (``NeuronTurn.resume``).

    JSON-serializable: ``state.model_dump_json()`` / ``SessionState.model_validate_json(text)``;
    the cost is written as a decimal string. Taken at step boundaries only.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    version: Literal[1] = 1
    #: The turn's input (its config and metadata are re-applied on resume).
    input: TurnInput
    #: Whether context was assembled (history read, input message appended).
    started: bool = False
    #: The conversation: history followed by this turn's messages.
    messages: list[ProviderMessage] = Field(default_factory=list)
    #: Model calls made.
    iterations: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Money = Decimal(0)
    tool_records: list[ToolCallRecord] = Field(default_factory=list)
    #: Milliseconds spent inside steps so far (time paused does not count).
    elapsed_ms: float = 0.0
    #: Failed tool calls in a row (for the circuit breaker).
    consecutive_failures: int = 0
    #: Signature (name + canonical JSON input) of the latest tool call, and how often in a row.
    last_call: str | None = None
    last_call_repeats: int = 0
    #: Effects declared so far (tool effects and log effects, without the history write).
    effects: list[Effect] = Field(default_factory=list)
    #: The latest assistant text.
    final_text: str = ""
    #: The text and image parts of the response that set ``final_text`` (the output message
    #: keeps its images).
    final_parts: list[ContentPart] = Field(default_factory=list)
    #: Set once the turn has ended.
    exit_reason: ExitReason | None = None
    #: The open step's tool calls that already ran (when the last message is the model's
    #: call for tools, the step is open: a resumed session runs only the calls not here).
    completed: list[ToolExecution] = Field(default_factory=list)
    #: Ids of the open step's calls a person approved (they run without asking again).
    approved: list[str] = Field(default_factory=list)
    #: Why the model stopped in its latest response (a resumed session whose last message is
    #: that response knows whether the turn had ended).
    last_stop: str | None = None
    #: Turn limits changed by ``budget`` signals (max_turns, max_cost, max_duration_ms).
    overrides: dict[str, Json] = Field(default_factory=dict)
    #: The fractions of ``max_cost`` a budget warning was emitted at.
    budget_warned: list[float] = Field(default_factory=list)
    #: Log effects declared while the turn ran (tool errors, compactions, retries), and
    #: those left out once there were too many (one summary line says how many).
    run_logs: int = 0
    run_logs_dropped: int = 0

    def open_uses(self) -> list[ToolUsePart]:
        """The tool calls of the open step: the last message's, when it is the model's
        call for tools that no result answers yet (empty when no step is open)."""
        if self.exit_reason is not None or not self.messages:
            return []
        last = self.messages[-1]
        if last.role is not Role.ASSISTANT:
            return []
        return [p for p in last.content if isinstance(p, ToolUsePart)]

    def checkpoint(self, messages_from: int, tool_records_from: int = 0) -> Checkpoint:
        """This state as a Checkpoint event carrying the messages from ``messages_from`` on and
        the tool records from ``tool_records_from`` on."""
        data = self.model_dump(mode="json", exclude={"messages", "tool_records"})
        data["messages"] = [m.model_dump(mode="json") for m in self.messages[messages_from:]]
        data["tool_records"] = [r.model_dump(mode="json") for r in self.tool_records[tool_records_from:]]
        return Checkpoint(messages_from=messages_from, tool_records_from=tool_records_from, state=data)

    @classmethod
    def from_checkpoint(cls, event: Checkpoint, previous: SessionState | None = None) -> SessionState:
        """The state a checkpoint describes, its unchanged messages taken from ``previous``.

        Raises:
            ValueError: the checkpoint keeps more messages than ``previous`` has, or its state
                does not validate.
        """
        kept = previous.messages[: event.messages_from] if previous is not None else []
        records = previous.tool_records[: event.tool_records_from] if previous is not None else []
        if len(kept) != event.messages_from or len(records) != event.tool_records_from:
            have = (len(previous.messages), len(previous.tool_records)) if previous is not None else (0, 0)
            raise ValueError(
                f"the checkpoint keeps the first {event.messages_from} message(s) and "
                f"{event.tool_records_from} tool record(s), but only {have[0]} and {have[1]} are known"
            )
        state = cls.model_validate(event.state)
        state.messages = [*kept, *state.messages]
        state.tool_records = [*records, *state.tool_records]
        return state


class ToolExecution(BaseModel):
    """One tool call of a step, as backfilled into the conversation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_use_id: str
    name: str
    #: The input the tool received (after any ModifyToolInput).
    input: Json
    output: str
    is_error: bool
    duration_ms: float = 0.0
    #: A hook skipped it (the output is the synthetic "skipped by policy" text).
    skipped: bool = False
    #: An effect tool: intercepted and declared as an Effect instead of run.
    effect: bool = False
    #: The Effect an effect tool's call declared (None when its input was refused).
    declared: Effect | None = None
    #: The custom effects the tool returned with its result (a ``ToolResult``'s).
    effects: list[Effect] = Field(default_factory=list)


class StepResult(BaseModel):
    """What one ``TurnLoop.step()`` did: one model call and the tools it asked for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The model call's number (1-based); 0 when the step ended the turn before calling.
    iteration: int
    #: The model's text in this step.
    text: str = ""
    stop_reason: StopReason | None = None
    tool_executions: list[ToolExecution] = Field(default_factory=list)
    is_complete: bool = False
    #: Why the turn ended, when ``is_complete``.
    exit_reason: ExitReason | None = None
    #: The turn's output, when ``is_complete``.
    output: TurnOutput | None = None
    #: Calls that need a person's approval before they run: the session is suspended.
    awaiting: list[PendingCall] = Field(default_factory=list)


SessionState.model_rebuild()
