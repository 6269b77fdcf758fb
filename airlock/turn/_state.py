"""The serializable shapes of a stepped turn: its state snapshot and what one step did."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from layer0 import Effect, ExitReason, Json, Money, ToolCallRecord, TurnInput, TurnOutput

from ._types import ProviderMessage, StopReason


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
    #: Set once the turn has ended.
    exit_reason: ExitReason | None = None


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


class StepResult(BaseModel):
    """What one ``TurnSession.step()`` did: one model call and the tools it asked for."""

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
