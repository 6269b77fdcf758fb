"""AgentSpec: the declarative, serializable blueprint a NeuronTurn is built from.

It crosses the wire to the runner, so it is plain data: validated, with unknown
keys rejected (a typo in a YAML file fails loudly).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from layer0 import TurnConfig

PROVIDER_KINDS = ("anthropic", "openai_compat", "scripted")
EFFECT_TOOLS = ("write_memory", "delete_memory", "delegate", "handoff", "signal")


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProviderSpec(_Spec):
    """Which model provider, which model, and where to reach it."""

    kind: str
    model: str | None = None
    #: API base URL (e.g. a credential proxy, or a local OpenAI-compatible server).
    base_url: str | None = None
    #: Name of the environment variable holding the API key inside the runner (None: no key,
    #: e.g. when a sidecar proxy injects it).
    api_key_env: str | None = None
    #: Scripted provider only: the recorded conversation (inline) or a path to its file.
    script: JsonValue = None
    max_tokens: int = Field(default=4096, gt=0)
    temperature: float | None = None
    #: Request timeout in seconds.
    timeout_s: float = Field(default=120.0, gt=0)
    #: Retries the SDK itself makes on 429/5xx/connection errors before raising (0: none;
    #: the orchestrator's retry policy still applies on top).
    max_retries: int = Field(default=2, ge=0)
    #: openai_compat only: USD per million prompt / completion tokens (``0`` for a free
    #: local model). Unset: cost is None (unknown), never a guess.
    price_per_mtok_in: Decimal | None = Field(default=None, ge=0)
    price_per_mtok_out: Decimal | None = Field(default=None, ge=0)

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in PROVIDER_KINDS:
            raise ValueError(f"unknown provider {value!r}; valid providers: {', '.join(PROVIDER_KINDS)}")
        return value


class ContextSpec(_Spec):
    """How the conversation is kept within the model's window."""

    strategy: Literal["none", "sliding_window", "summarization", "composite"] = "none"
    #: Token budget the strategy compacts to.
    max_tokens: int = Field(default=100_000, gt=0)
    #: sliding_window: messages kept at the end (tool pairs never split).
    keep_last: int = Field(default=20, gt=0)


class HookSpec(_Spec):
    """A hook to enable by name, with its options (e.g. ``{"name": "budget", "max_cost": "1.00"}``)."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class LoopLimits(_Spec):
    """Loop guards beyond TurnConfig."""

    #: Consecutive failed tool calls that trip the circuit breaker.
    circuit_breaker_threshold: int = Field(default=5, gt=0)
    #: Identical tool calls (same name and input) in a row that count as stuck.
    stuck_threshold: int = Field(default=4, gt=1)


class AgentSpec(_Spec):
    """Everything needed to build a NeuronTurn, as data."""

    name: str = Field(min_length=1)
    provider: ProviderSpec
    system: str = ""
    #: Tool names: sandbox tools (``airlock.tools``) and effect tools (write_memory, …).
    tools: list[str] = Field(default_factory=list)
    #: Per-tool options, keyed by tool name (e.g. ``{"bash": {"timeout_s": 30}}``).
    tool_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    context: ContextSpec = Field(default_factory=ContextSpec)
    #: Defaults applied under any per-turn TurnConfig.
    defaults: TurnConfig = Field(default_factory=TurnConfig)
    hooks: list[HookSpec] = Field(default_factory=list)
    limits: LoopLimits = Field(default_factory=LoopLimits)

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, value: list[str]) -> list[str]:
        from airlock.tools import available_tools  # lazy: tools import turn types

        valid = sorted(set(available_tools()) | set(EFFECT_TOOLS))
        unknown = [t for t in value if t not in valid]
        if unknown:
            raise ValueError(f"unknown tool(s) {', '.join(unknown)}; valid tools: {', '.join(valid)}")
        if len(set(value)) != len(value):
            raise ValueError("a tool is listed twice")
        return value
