"""Protocol ①, the Turn's input: what starts a turn (its trigger, its config, its message).

Its own module so that :mod:`._effect` (a delegation carries a TurnInput) and :mod:`._turn`
(a TurnOutput carries effects) import it without importing each other.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from ._content import Content
from ._id import SessionId
from ._wire import U32, DurationMs, ExternallyTagged, Json, Money, WireModel


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
