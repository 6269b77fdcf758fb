"""A turn's resolved configuration (what the loop offers the model and the limits it applies)
and the session's error types: a leaf, importing nothing else from ``airlock.turn``."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from airlock.errors import AirlockError

#: Model calls allowed when neither TurnConfig nor the agent's defaults set ``max_turns``.
DEFAULT_MAX_TURNS = 25


class TurnLoopError(AirlockError):
    """Raised when a session is misused (e.g. ``step()`` while another step is running)."""


class DeadlineReached(Exception):
    """Internal: the turn's max_duration expired while awaiting a hook or compaction."""


class ToolSchema(BaseModel):
    """A tool as offered to the model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ResolvedConfig:
    """TurnConfig merged over the agent's defaults, as the loop uses it."""

    model: str | None
    system: str | None
    tools: list[ToolSchema]
    offered: frozenset[str]
    max_turns: int
    max_cost: Decimal | None
    max_duration_ms: int | None
    extra: dict[str, Any] = field(default_factory=dict)
