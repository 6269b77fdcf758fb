"""Events a running turn reports to whoever watches it (the runner streams them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TurnStarted(_Event):
    """The turn began."""

    type: Literal["started"] = "started"


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
    success: bool
    output: str


class TurnLog(_Event):
    """A log line the turn wants observers to see."""

    type: Literal["log"] = "log"
    level: str
    message: str


class TurnPaused(_Event):
    """The turn stopped at a turn boundary because a pause was requested."""

    type: Literal["paused"] = "paused"
    iteration: int


#: Everything a turn reports while it runs (``"type"``-tagged).
TurnEvent = Annotated[
    TurnStarted | InferenceStarted | InferenceFinished | ToolStarted | ToolFinished | TurnLog | TurnPaused,
    Field(discriminator="type"),
]

#: A callback that receives turn events; it must be quick (it is awaited inline).
EventSink = Callable[[TurnEvent], Awaitable[None]]
