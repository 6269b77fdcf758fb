"""A turn's output: its message, why it ended, its metadata and the effects it declares."""

from __future__ import annotations

from typing import Self

from pydantic import Field

from ._content import Content
from ._effect import Effect
from ._turn import ExitReason, TurnMetadata
from ._wire import WireModel


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
