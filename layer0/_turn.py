"""Protocol ①, the Turn: the values one agent's cycle takes in and reports (its input, why it
ended, its metadata); the output is in ``_output``, the protocol in ``_operator``."""

from __future__ import annotations

from decimal import Decimal
from typing import Any, ClassVar, Self

from ._content import Content
from ._id import SessionId
from ._wire import U32, U64, DurationMs, ExternallyTagged, Json, Money, WireModel


class TriggerType(ExternallyTagged):
    """What started a turn: ``"user"``, ``"task"``, ``"signal"``, ``"schedule"``,
    ``"system_event"`` or ``{"custom": "…"}``."""

    _variants: ClassVar[dict[str, str | dict[str, str] | None]] = {
        "user": None,
        "task": None,
        "signal": None,
        "schedule": None,
        "system_event": None,
        "custom": "custom_name",
    }
    custom_name: str | None = None

    @classmethod
    def user(cls) -> Self:
        """A human sent a message."""
        return cls._make("user")

    @classmethod
    def task(cls) -> Self:
        """Another agent assigned a task."""
        return cls._make("task")

    @classmethod
    def signal(cls) -> Self:
        """A signal from another workflow or agent."""
        return cls._make("signal")

    @classmethod
    def schedule(cls) -> Self:
        """A schedule fired."""
        return cls._make("schedule")

    @classmethod
    def system_event(cls) -> Self:
        """A system event (file change, webhook, …)."""
        return cls._make("system_event")

    @classmethod
    def custom(cls, name: str) -> Self:
        """A trigger layer0 does not name."""
        return cls._make("custom", name)


class TurnConfig(WireModel):
    """Per-turn overrides; every field None means "use the implementation's default"."""

    max_turns: U32 | None = None
    max_cost: Money | None = None
    #: Wall-clock limit in milliseconds.
    max_duration: DurationMs | None = None
    model: str | None = None
    #: None: the default tools; a list: only these tools.
    allowed_tools: list[str] | None = None
    #: Appended to (never replacing) the turn's base system prompt.
    system_addendum: str | None = None


class TurnInput(WireModel):
    """What a turn needs: the new message and how it was triggered (not the history)."""

    message: Content
    trigger: TriggerType
    session: SessionId | None = None
    config: TurnConfig | None = None
    #: Opaque metadata passed through unchanged (trace ids, priority, …).
    metadata: Json = None

    @classmethod
    def new(cls, message: str | Content, trigger: TriggerType | None = None, **kwargs: Any) -> Self:
        """A turn input with the given message; the trigger defaults to ``user``."""
        return cls(message=message, trigger=trigger or TriggerType.user(), **kwargs)


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
