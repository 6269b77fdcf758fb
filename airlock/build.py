"""The composition root: an AgentSpec built into a running NeuronTurn.

The one place that knows the tool catalog (:mod:`airlock.tools`), the provider factory
(:mod:`airlock.providers`) and the hooks and context strategies of :mod:`airlock.turn`; it
imports them, and none of them imports this. It imports them when it builds, not when it is
imported: a runner serves health before it builds its first turn.
"""

from __future__ import annotations

import logging
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.errors import SpecError
from airlock.spec import EFFECT_TOOLS, HOOK_NAMES, MEMORY_TOOLS, AgentSpec, ContextSpec, HookSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airlock.turn import ContextStrategy, NeuronTurn, Provider, ToolDyn, TurnEventSink
    from layer0 import Hook, StateReader

__all__ = ["HOOK_NAMES", "build_context", "build_hook", "build_turn"]


def build_turn(
    spec: AgentSpec,
    *,
    state: StateReader | None = None,
    workspace: Path | None = None,
    provider: Provider | None = None,
    events: TurnEventSink | None = None,
    mcp_tools: Sequence[ToolDyn] = (),
) -> NeuronTurn:
    """Build the turn an AgentSpec describes.

    Args:
        spec: the blueprint.
        state: read-only state: the session history, the memory of ``spec.memory.context_keys``
            and of the memory tools.
        workspace: the directory workspace tools (bash, files) are confined to.
        provider: use this provider instead of building one from ``spec.provider``.
        events: default event sink.
        mcp_tools: the tools of ``spec.mcp_servers``, opened by the caller (``await
            airlock.tools.open_mcp_tools(spec.mcp_servers, workspace=workspace)``), who closes
            them when the turn is over. Empty: the turn offers no MCP tool (a turn built here
            to run in a sandbox: its runner opens them there).

    Raises:
        SpecError: an unknown tool or hook (the message lists the valid ones), invalid
            tool or hook options, or a provider the spec cannot build.
    """
    from airlock.providers import create_provider
    from airlock.tools import build_tools, load_custom_tools
    from airlock.turn import NeuronTurn, ToolChoicePolicy

    if provider is None:
        provider = create_provider(spec.provider)
    # the memory tools are the turn's own, like the effect tools
    custom = spec.custom_tools
    built_in = [t for t in spec.tools if t not in MEMORY_TOOLS and t not in custom]
    tools = build_tools(built_in, dict(spec.tool_options), workspace)
    tools += load_custom_tools(custom, agent=spec.name)
    tools += mcp_tools
    return NeuronTurn(
        provider,
        tools=tools,
        system=spec.system,
        model=spec.provider.model,
        max_tokens=spec.provider.max_tokens,
        temperature=spec.provider.temperature,
        tool_choice=ToolChoicePolicy(
            first=spec.provider.tool_choice_first,
            after_failure=spec.provider.tool_choice_after_failure,
            parallel=spec.provider.parallel_tool_calls,
        ),
        context=build_context(spec.context, provider),
        context_limit=spec.context.max_tokens,
        hooks=[build_hook(h) for h in spec.hooks],
        state=state,
        defaults=spec.defaults,
        effect_tools=[t for t in spec.tools if t in EFFECT_TOOLS],
        memory_tools=[t for t in spec.tools if t in MEMORY_TOOLS],
        memory_keys=spec.memory.context_keys,
        limits=spec.limits,
        name=spec.name,
        events=events,
        spec=spec,
        approval=spec.approval,
    )


def build_context(spec: ContextSpec, provider: Provider) -> ContextStrategy:
    """The context strategy a ContextSpec names (``composite``: sliding window, then summarization)."""
    from airlock.turn import CausalCone, Composite, NoCompaction, SlidingWindow, Summarization

    if spec.strategy == "sliding_window":
        return SlidingWindow(keep_last=spec.keep_last, max_tokens=spec.max_tokens)
    if spec.strategy == "summarization":
        return Summarization(provider, keep_last=spec.keep_last, max_tokens=spec.max_tokens)
    if spec.strategy == "causal_cone":
        return CausalCone()
    if spec.strategy == "composite":
        return Composite(
            [
                Summarization(provider, keep_last=spec.keep_last, max_tokens=spec.max_tokens),
                SlidingWindow(keep_last=spec.keep_last, max_tokens=spec.max_tokens),
            ],
            limit=spec.max_tokens,
        )
    return NoCompaction()


def build_hook(spec: HookSpec) -> Hook:
    """The hook a HookSpec names: ``budget`` (options ``max_cost``, ``warn_at``) or ``logging`` (``level``).

    Raises:
        SpecError: an unknown hook name (the message lists the valid ones) or invalid options.
    """
    from airlock.turn import BudgetHook, LoggingHook

    options: dict[str, Any] = dict(spec.options)
    if spec.name == "budget":
        unknown = set(options) - {"max_cost", "warn_at"}
        if unknown or "max_cost" not in options:
            raise SpecError("hook 'budget' takes options max_cost (required) and warn_at")
        try:
            max_cost = Decimal(str(options["max_cost"]))
            warn_at = Decimal(str(options["warn_at"])) if options.get("warn_at") is not None else None
            return BudgetHook(max_cost, warn_at=warn_at if "warn_at" in options else Decimal("0.8"))
        except (InvalidOperation, ValueError) as e:
            raise SpecError(f"hook 'budget': invalid options {options}: {e}") from e
    if spec.name == "logging":
        unknown = set(options) - {"level"}
        if unknown:
            raise SpecError("hook 'logging' takes only the option level")
        level = logging.getLevelName(str(options.get("level", "INFO")).upper())
        if not isinstance(level, int):
            raise SpecError(f"hook 'logging': unknown level {options.get('level')!r}")
        return LoggingHook(level=level)
    raise SpecError(f"unknown hook {spec.name!r}; valid hooks: {', '.join(HOOK_NAMES)}")
