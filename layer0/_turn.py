"""Protocol ①, the Turn: what one agent does per cycle, and the values it exchanges."""

from __future__ import annotations

from decimal import Decimal
from typing import ClassVar, Protocol, Self, runtime_checkable

from pydantic import Field

from ._content import Content
from ._effect import Effect
from ._input import TurnConfig, TurnInput
from ._wire import U32, U64, DurationMs, ExternallyTagged, Money, WireModel


class ExitReason(ExternallyTagged):
    """Why a turn ended; the caller decides what happens next from it."""

    _variants: ClassVar[dict[str, str | dict[str, str] | None]] = {
        "complete": None,
        "max_turns": None,
        "budget_exhausted": None,
        "circuit_breaker": None,
        "timeout": None,
        "observer_halt": {"reason": "reason"},
        "error": None,
        "custom": "custom_name",
        "safety_stop": {"reason": "reason"},
    }
    reason: str | None = None
    custom_name: str | None = None

    @classmethod
    def complete(cls) -> Self:
        """The model produced a final answer."""
        return cls._make("complete")

    @classmethod
    def max_turns(cls) -> Self:
        """The iteration limit was reached."""
        return cls._make("max_turns")

    @classmethod
    def budget_exhausted(cls) -> Self:
        """The cost budget was reached."""
        return cls._make("budget_exhausted")

    @classmethod
    def circuit_breaker(cls) -> Self:
        """Too many consecutive failures."""
        return cls._make("circuit_breaker")

    @classmethod
    def timeout(cls) -> Self:
        """The wall-clock limit was reached."""
        return cls._make("timeout")

    @classmethod
    def observer_halt(cls, reason: str) -> Self:
        """A hook or guardrail halted the turn."""
        return cls._make("observer_halt", {"reason": reason})

    @classmethod
    def error(cls) -> Self:
        """An unrecoverable error ended the turn."""
        return cls._make("error")

    @classmethod
    def custom(cls, name: str) -> Self:
        """An exit reason layer0 does not name (e.g. ``cancelled``)."""
        return cls._make("custom", name)

    @classmethod
    def safety_stop(cls, reason: str) -> Self:
        """The model provider refused on safety grounds."""
        return cls._make("safety_stop", {"reason": reason})


class ToolCallRecord(WireModel):
    """One tool call made during a turn."""

    name: str
    #: Milliseconds.
    duration: DurationMs
    success: bool


class TurnMetadata(WireModel):
    """Execution metadata; every turn produces all of it (zero when unknown)."""

    tokens_in: U64
    tokens_out: U64
    cost: Money
    turns_used: U32
    tools_called: list[ToolCallRecord]
    #: Milliseconds.
    duration: DurationMs

    @classmethod
    def empty(cls) -> Self:
        """All counters zero, cost ``Decimal(0)``, no tools."""
        return cls(tokens_in=0, tokens_out=0, cost=Decimal(0), turns_used=0, tools_called=[], duration=0)


class TurnOutput(WireModel):
    """A turn's response, why it ended, its metadata and the effects it declares."""

    message: Content
    exit_reason: ExitReason
    metadata: TurnMetadata
    #: Side effects the caller executes; the turn never executes them itself.
    effects: list[Effect] = Field(default_factory=list)

    @classmethod
    def new(cls, message: str | Content, exit_reason: ExitReason | None = None) -> Self:
        """An output with empty metadata and no effects; exit reason defaults to complete."""
        return cls(
            message=message,
            exit_reason=exit_reason or ExitReason.complete(),
            metadata=TurnMetadata.empty(),
        )


@runtime_checkable
class Turn(Protocol):
    """Protocol ①: receive input, assemble context, reason, act, return output + effects.

    A turn MAY read state during context assembly and MUST NOT write it: writes are
    declared as effects in the output.
    """

    async def execute(self, input: TurnInput) -> TurnOutput:
        """Run one turn. Raises ``TurnError`` on failure."""
        ...


# The upstream crate later renamed Turn* to Operator*; both names are kept.
Operator = Turn
OperatorInput = TurnInput
OperatorOutput = TurnOutput
OperatorConfig = TurnConfig
OperatorMetadata = TurnMetadata
