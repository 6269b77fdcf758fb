"""Interface ⑤, Hooks: observation and intervention inside a turn's loop."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Literal, Protocol, Self, runtime_checkable

from pydantic import Field

from ._content import Content
from ._wire import U32, U64, DurationMs, Json, Money, WireModel


class HookPoint(StrEnum):
    """Where in the loop a hook fires."""

    PRE_INFERENCE = "pre_inference"
    POST_INFERENCE = "post_inference"
    PRE_TOOL_USE = "pre_tool_use"
    POST_TOOL_USE = "post_tool_use"
    EXIT_CHECK = "exit_check"


class HookContext(WireModel):
    """What a hook sees at its firing point (read-only)."""

    point: HookPoint
    #: The tool being called (Pre/PostToolUse only).
    tool_name: str | None = None
    #: The tool's input (PreToolUse only).
    tool_input: Json = None
    #: The tool's result (PostToolUse only).
    tool_result: str | None = None
    #: The model's response (PostInference only).
    model_output: Content | None = None
    tokens_used: U64
    cost: Money
    turns_completed: U32
    #: Milliseconds since the turn started.
    elapsed: DurationMs

    @classmethod
    def new(cls, point: HookPoint) -> Self:
        """A context at ``point`` with zero counters."""
        return cls(point=point, tokens_used=0, cost=Decimal(0), turns_completed=0, elapsed=0)


class HookContinue(WireModel):
    """Continue normally."""

    action: Literal["continue"] = "continue"


class HookHalt(WireModel):
    """Halt the turn; it exits with ``ExitReason.observer_halt``."""

    action: Literal["halt"] = "halt"
    reason: str


class HookSkipTool(WireModel):
    """Skip this tool call (PreToolUse only); a "skipped by policy" result is backfilled."""

    action: Literal["skip_tool"] = "skip_tool"
    reason: str


class HookModifyToolInput(WireModel):
    """Replace the tool's input before it runs (PreToolUse only)."""

    action: Literal["modify_tool_input"] = "modify_tool_input"
    new_input: Json


#: What a hook decides (``"action"``-tagged).
HookAction = Annotated[
    HookContinue | HookHalt | HookSkipTool | HookModifyToolInput, Field(discriminator="action")
]


@runtime_checkable
class Hook(Protocol):
    """Observes and may intervene at the points it names.

    Raising ``HookError`` (or anything else) does not halt the turn: the error is
    logged and the turn continues. Return ``HookHalt`` to halt.
    """

    def points(self) -> Sequence[HookPoint]:
        """The points this hook fires at."""
        ...

    async def on_event(self, ctx: HookContext) -> HookAction:
        """Decide what to do at ``ctx.point``."""
        ...
