"""What a turn session reads from its turn: ``NeuronTurn`` is one (the session never imports it)."""

from __future__ import annotations

from typing import Protocol

from airlock.spec import ApprovalGate, LoopLimits
from layer0 import StateReader, TurnInput

from ._config import ResolvedConfig
from ._context import ContextStrategy
from ._hooks import HookRegistry
from ._provider import Provider
from ._registry import ToolRegistry
from ._tool_choice import ToolChoicePolicy


class TurnParts(Protocol):
    """The parts of a turn a session runs with (read-only)."""

    @property
    def name(self) -> str: ...
    @property
    def provider(self) -> Provider: ...
    @property
    def tools(self) -> ToolRegistry: ...
    @property
    def memory(self) -> ToolRegistry: ...
    @property
    def effect_tools(self) -> tuple[str, ...]: ...
    @property
    def memory_keys(self) -> tuple[str, ...]: ...
    @property
    def tool_choice(self) -> ToolChoicePolicy: ...
    @property
    def context(self) -> ContextStrategy: ...
    @property
    def context_limit(self) -> int: ...
    @property
    def hooks(self) -> HookRegistry: ...
    @property
    def state(self) -> StateReader | None: ...
    @property
    def limits(self) -> LoopLimits: ...
    @property
    def approval(self) -> ApprovalGate | None: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def temperature(self) -> float | None: ...

    def resolve_config(self, input: TurnInput) -> ResolvedConfig:
        """The input's TurnConfig over the turn's defaults."""
        ...
