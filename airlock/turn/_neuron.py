"""NeuronTurn: the ReAct loop (call model, run tools, repeat) as a ``layer0.Turn``."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from airlock.errors import SpecError
from airlock.spec import EFFECT_TOOLS, MEMORY_TOOLS, AgentSpec, ApprovalGate, LoopLimits
from layer0 import Hook, StateReader, TurnConfig, TurnInput, TurnOutput

from ._config import DEFAULT_MAX_TURNS, ResolvedConfig, TurnLoopError
from ._context import ContextStrategy, NoCompaction
from ._effect_tools import EFFECT_TOOL_SCHEMAS
from ._events import TurnEventSink
from ._hooks import HookRegistry, LifecycleObserver
from ._loop import TurnLoop
from ._memory_tools import make_memory_tools
from ._provider import Provider
from ._registry import ToolRegistry
from ._state import SessionState
from ._tool import ToolDyn
from ._tool_choice import ToolChoicePolicy


def _merge(defaults: TurnConfig, override: TurnConfig | None) -> TurnConfig:
    if override is None:
        return defaults
    updates = {k: v for k, v in override if v is not None}
    return defaults.model_copy(update=updates)


class NeuronTurn:
    """A ``layer0.Turn`` running the ReAct loop over a Provider, tools, hooks and a context strategy.

    Args:
        provider: the model.
        tools: a ToolRegistry, or tools to register in one.
        system: the base system prompt (``TurnConfig.system_addendum`` is appended after a newline).
        model: default model (``TurnConfig.model`` overrides it; None: the provider's own).
        max_tokens: output token limit per call.
        temperature: sampling temperature.
        tool_choice: which model calls must call a tool (default: none; the model decides).
        context: the compaction strategy (default: none).
        context_limit: the token limit handed to the strategy.
        hooks: a HookRegistry, or hooks (and lifecycle observers) to register in one.
        state: read-only state for context assembly (the session history and memory) and the
            memory tools.
        defaults: TurnConfig defaults under each input's config.
        effect_tools: effect tools offered and intercepted (subset of ``EFFECT_TOOLS``).
        memory_tools: memory tools offered, answered from ``state`` (subset of ``MEMORY_TOOLS``).
        memory_keys: memory keys whose values start the context, before the input (the
            session's, then the global ones; ``AgentSpec.memory.context_keys``).
        limits: circuit breaker and loop detection thresholds.
        name: the agent's name (tool contexts, logs).
        events: default event sink for ``execute`` and ``start``.
        spec: the AgentSpec this turn was built from, if any (kept as ``.spec``).
        approval: tool calls that wait for a person's approval: the session suspends before
            them (``TurnLoop.awaiting``) until it is resumed with them decided.

    Raises:
        SpecError: an unknown effect or memory tool, or a tool named like one.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        tools: ToolRegistry | Sequence[ToolDyn] = (),
        system: str = "",
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        tool_choice: ToolChoicePolicy | None = None,
        context: ContextStrategy | None = None,
        context_limit: int = 100_000,
        hooks: HookRegistry | Sequence[Hook | LifecycleObserver] = (),
        state: StateReader | None = None,
        defaults: TurnConfig | None = None,
        effect_tools: Sequence[str] = (),
        memory_tools: Sequence[str] = (),
        memory_keys: Sequence[str] = (),
        limits: LoopLimits | None = None,
        name: str = "agent",
        events: TurnEventSink | None = None,
        spec: AgentSpec | None = None,
        approval: ApprovalGate | None = None,
    ) -> None:
        self.provider = provider
        self.tools = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)
        unknown = [t for t in effect_tools if t not in EFFECT_TOOLS]
        if unknown:
            raise SpecError(f"unknown effect tool(s) {', '.join(unknown)}; valid: {', '.join(EFFECT_TOOLS)}")
        unknown = [t for t in memory_tools if t not in MEMORY_TOOLS]
        if unknown:
            raise SpecError(f"unknown memory tool(s) {', '.join(unknown)}; valid: {', '.join(MEMORY_TOOLS)}")
        clash = [t for t in self.tools.names() if t in EFFECT_TOOLS or t in MEMORY_TOOLS]
        if clash:
            raise SpecError(f"tool name(s) {', '.join(clash)} are reserved for the turn's own tools")
        self.effect_tools: tuple[str, ...] = tuple(dict.fromkeys(effect_tools))
        #: The memory tools, answered from ``state`` (apart from ``tools``: the turn owns them).
        self.memory = ToolRegistry(make_memory_tools(tuple(dict.fromkeys(memory_tools)), state))
        self.memory_keys: tuple[str, ...] = tuple(dict.fromkeys(memory_keys))
        self.system = system
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.tool_choice = tool_choice or ToolChoicePolicy()
        self.context: ContextStrategy = context or NoCompaction()
        self.context_limit = context_limit
        self.hooks = hooks if isinstance(hooks, HookRegistry) else HookRegistry(hooks)
        self.state = state
        self.defaults = defaults or TurnConfig()
        self.limits = limits or LoopLimits()
        self.name = name
        self.events = events
        self.spec = spec
        self.approval = approval

    # -- layer0.Turn --------------------------------------------------------------------

    async def execute(self, input: TurnInput) -> TurnOutput:
        """Run the turn to its end: ``start(input)`` then ``run()``.

        Raises:
            layer0.TurnError: provider failures (never retried here), truncated output,
                exceeded context window, unreadable history.
        """
        session = self.start(input)
        output = await session.run()
        if output is None:  # nobody else holds this session, so nobody can pause it
            if session.awaiting:
                names = ", ".join(c.name for c in session.awaiting)
                raise TurnLoopError(
                    f"the turn waits for approval of {names}: run it with start()/run() and resume "
                    "its state with the calls decided"
                )
            raise TurnLoopError("the turn paused without a pause request")
        return output

    # -- stepping -------------------------------------------------------------------------

    def start(self, input: TurnInput, events: TurnEventSink | None = None) -> TurnLoop:
        """A session for ``input``; nothing runs (and no state is read) until ``step``/``run``."""
        return TurnLoop(self, SessionState(input=input), events or self.events)

    def resume(self, state: SessionState | str | bytes, events: TurnEventSink | None = None) -> TurnLoop:
        """A session continuing from a snapshot (a SessionState or its JSON).

        Raises:
            TurnLoopError: the JSON is not a valid snapshot.
        """
        if not isinstance(state, SessionState):
            try:
                state = SessionState.model_validate_json(state)
            except ValidationError as e:
                raise TurnLoopError(f"not a valid session snapshot: {e}") from e
        else:
            state = state.model_copy(deep=True)
        return TurnLoop(self, state, events or self.events)

    def resolve_config(self, input: TurnInput) -> ResolvedConfig:
        """The input's TurnConfig over this turn's defaults, as the loop applies it."""
        cfg = _merge(self.defaults, input.config)
        system = self.system
        if cfg.system_addendum:
            system = f"{system}\n{cfg.system_addendum}" if system else cfg.system_addendum
        allowed = cfg.allowed_tools
        schemas = self.tools.schemas(allowed)
        schemas += [EFFECT_TOOL_SCHEMAS[n] for n in self.effect_tools if allowed is None or n in allowed]
        schemas += self.memory.schemas(allowed)
        return ResolvedConfig(
            model=cfg.model or self.model,
            system=system or None,
            tools=schemas,
            offered=frozenset(s.name for s in schemas),
            max_turns=cfg.max_turns if cfg.max_turns is not None else DEFAULT_MAX_TURNS,
            max_cost=cfg.max_cost,
            max_duration_ms=cfg.max_duration,
            extra={"metadata": input.metadata} if input.metadata is not None else {},
        )
