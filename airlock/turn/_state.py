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

    model_config = ConfigDict(extra="forbid", validate_assignment=False, use_attribute_docstrings=True)

    version: Literal[1] = 1
    """The shape's version; a resumed runner refuses any other."""
    input: TurnInput
    """The turn's input (its config and metadata are re-applied on resume)."""
    started: bool = False
    """Whether context was assembled (history read, input message appended)."""
    messages: list[ProviderMessage] = Field(default_factory=list)
    """The conversation: history followed by this turn's messages."""
    iterations: int = 0
    """Model calls made."""
    tokens_in: int = 0
    """Input tokens of every model call so far."""
    tokens_out: int = 0
    """Output tokens of every model call so far."""
    cost: Money = Decimal(0)
    """The cost so far, in dollars (written as a decimal string)."""
    tool_records: list[ToolCallRecord] = Field(default_factory=list)
    """One record per tool call so far (name, success, duration)."""
    elapsed_ms: float = 0.0
    """Milliseconds spent inside steps so far (time paused does not count)."""
    consecutive_failures: int = 0
    """Failed tool calls in a row (for the circuit breaker)."""
    last_call: str | None = None
    """Signature (name + canonical JSON input) of the latest tool call."""
    last_call_repeats: int = 0
    """How often in a row ``last_call`` was made (for the stuck detector)."""
    effects: list[Effect] = Field(default_factory=list)
    """Effects declared so far (tool effects and log effects, without the history write)."""
    final_text: str = ""
    """The latest assistant text."""
    final_parts: list[ContentPart] = Field(default_factory=list)
    """The text and image parts of the response that set ``final_text`` (the output message
    keeps its images)."""
    exit_reason: ExitReason | None = None
    """Set once the turn has ended."""
    completed: list[ToolExecution] = Field(default_factory=list)
    """The open step's tool calls that already ran (when the last message is the model's call
    for tools, the step is open: a resumed session runs only the calls not here)."""
    approved: list[str] = Field(default_factory=list)
    """Tool-call ids (``tool_use_id``) of the open step's calls a person approved: they run
    without asking again."""
    last_stop: str | None = None
    """Why the model stopped in its latest response (a resumed session whose last message is
    that response knows whether the turn had ended)."""
    overrides: dict[str, Json] = Field(default_factory=dict)
    """Turn limits changed by ``budget`` signals (max_turns, max_cost, max_duration_ms)."""
    budget_warned: list[float] = Field(default_factory=list)
    """The fractions of ``max_cost`` a budget warning was emitted at."""
    run_logs: int = 0
    """Log effects declared while the turn ran (tool errors, compactions, retries)."""
    run_logs_dropped: int = 0
    """Log effects left out once there were too many (one summary line says how many)."""

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

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    tool_use_id: str
    """The id of the model's call (``ToolUsePart.id``)."""
    name: str
    """The tool's name."""
    input: Json
    """The input the tool received (after any ModifyToolInput)."""
    output: str
    """The result text the model receives."""
    is_error: bool
    """The call failed (the model receives the output as an error result)."""
    duration_ms: float = 0.0
    """How long the call took, in milliseconds."""
    skipped: bool = False
    """A hook skipped it (the output is the synthetic "skipped by policy" text)."""
    effect: bool = False
    """An effect tool: intercepted and declared as an Effect instead of run."""
    declared: Effect | None = None
    """The Effect an effect tool's call declared (None when its input was refused)."""
    effects: list[Effect] = Field(default_factory=list)
    """The custom effects the tool returned with its result (a ``ToolResult``'s)."""


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
