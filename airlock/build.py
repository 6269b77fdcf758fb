"""The composition root: an AgentSpec built into a running NeuronTurn (or its custom turn).

The one place that knows the tool catalog (:mod:`airlock.tools`), the provider factory
(:mod:`airlock.providers`), the hooks and context strategies of :mod:`airlock.turn`, and the
extensions the installed packages register by entry point (``airlock.turn._extensions``); it
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

    from airlock.turn import (
        ContextStrategy,
        ExtensionTurn,
        ImageTurn,
        NeuronTurn,
        Provider,
        ToolDyn,
        ToolRegistry,
        TurnEventSink,
    )
    from layer0 import Hook, StateReader

__all__ = [
    "HOOK_NAMES",
    "build_agent",
    "build_context",
    "build_custom_turn",
    "build_hook",
    "build_provider",
    "build_turn",
    "image_turn",
]


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
            tool or hook options, a provider the spec cannot build, an extension it names
            that no installed package registers (one line each), or a custom turn named.
    """
    from airlock.turn import NeuronTurn, ToolChoicePolicy

    if spec.turn is not None:
        raise SpecError(
            f"agent {spec.name!r} names the custom turn {spec.turn.entry_point!r}: build it with "
            "build_custom_turn (or build_agent)"
        )
    _check_extensions(spec, provider_given=provider is not None)
    if provider is None:
        provider = build_provider(spec)
    tools = _tool_registry(spec, workspace, mcp_tools)
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
        context=build_context(spec.context, provider, agent=spec.name),
        context_limit=spec.context.max_tokens,
        hooks=[build_hook(h, agent=spec.name) for h in spec.hooks],
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


def build_agent(
    spec: AgentSpec,
    *,
    state: StateReader | None = None,
    workspace: Path | None = None,
    provider: Provider | None = None,
    mcp_tools: Sequence[ToolDyn] = (),
) -> NeuronTurn | ExtensionTurn:
    """The spec's custom turn when it names one (``spec.turn``), else its NeuronTurn."""
    if spec.turn is not None:
        return build_custom_turn(
            spec, state=state, workspace=workspace, provider=provider, mcp_tools=mcp_tools
        )
    return build_turn(spec, state=state, workspace=workspace, provider=provider, mcp_tools=mcp_tools)


def image_turn(spec: AgentSpec, *, state: StateReader | None = None) -> ImageTurn:
    """The agent of a spec naming a custom turn, to hand a sandbox environment: the turn is
    built in the sandbox, from the entry point its image registers (nothing is loaded here).

    Raises:
        SpecError: the spec names no custom turn.
    """
    from airlock.turn import ImageTurn

    return ImageTurn(spec, state)


def build_custom_turn(
    spec: AgentSpec,
    *,
    state: StateReader | None = None,
    workspace: Path | None = None,
    provider: Provider | None = None,
    mcp_tools: Sequence[ToolDyn] = (),
) -> ExtensionTurn:
    """The turn the entry point ``spec.turn.entry_point`` of ``airlock.turns`` builds, given
    the spec and its parts (provider, tools with their middleware, state, workspace).

    Raises:
        SpecError: no custom turn named, an extension of the spec not registered here or not
            loading, or a factory that fails.
    """
    from airlock.turn import CustomTurnParts, ExtensionTurn, call_extension_factory, load_extension

    if spec.turn is None:
        raise SpecError(f"agent {spec.name!r} names no custom turn")
    _check_extensions(spec, provider_given=provider is not None)
    factory = load_extension("turn", spec.turn.entry_point, agent=spec.name)
    parts = CustomTurnParts(
        provider=provider if provider is not None else build_provider(spec),
        tools=_tool_registry(spec, workspace, mcp_tools),
        state=state,
        workspace=workspace,
        options=dict(spec.turn.options),
    )
    inner = call_extension_factory(
        factory, f"agent {spec.name!r}: turn {spec.turn.entry_point!r}", spec, parts
    )
    if not callable(getattr(inner, "execute", None)):
        raise SpecError(
            f"agent {spec.name!r}: turn {spec.turn.entry_point!r}: its factory returned a "
            f"{type(inner).__name__}, which has no execute(input) method"
        )
    return ExtensionTurn(inner, spec, state)


def build_provider(spec: AgentSpec) -> Provider:
    """The provider ``spec.provider`` names: a built-in kind, or a custom one by entry point."""
    from airlock.providers import create_provider
    from airlock.turn import call_extension_factory, load_extension

    p = spec.provider
    if p.kind != "custom" or p.name is None:
        return create_provider(p)
    factory = load_extension("provider", p.name, agent=spec.name)
    built: Provider = call_extension_factory(factory, f"agent {spec.name!r}: provider {p.name!r}", p)
    return built


def _check_extensions(spec: AgentSpec, *, provider_given: bool) -> None:
    """Every extension the spec names loads here (a provider given instead is not asked for).

    Raises:
        SpecError: one line per extension that does not.
    """
    from airlock.turn import check_extensions

    problems = check_extensions(spec, skip=("provider",) if provider_given else ())
    if problems:
        raise SpecError("\n".join(problems))


def _tool_registry(spec: AgentSpec, workspace: Path | None, mcp_tools: Sequence[ToolDyn]) -> ToolRegistry:
    """The spec's tools (built-in sandbox tools, custom tools, MCP tools) behind its middleware."""
    from airlock.tools import build_tools, load_custom_tools
    from airlock.turn import ToolRegistry, as_tool_middleware, build_extensions

    # the memory tools are the turn's own, like the effect tools
    custom = spec.custom_tools
    built_in = [t for t in spec.tools if t not in MEMORY_TOOLS and t not in custom]
    tools = build_tools(built_in, dict(spec.tool_options), workspace)
    tools += load_custom_tools(custom, agent=spec.name)
    tools += mcp_tools
    found = build_extensions(
        "tool middleware", [(m.name, m.options) for m in spec.middleware], agent=spec.name
    )
    middleware = [
        as_tool_middleware(m, f"agent {spec.name!r}: tool middleware {spec.middleware[i].name!r}")
        for i, m in enumerate(found)
    ]
    return ToolRegistry(tools, middleware)


def build_context(spec: ContextSpec, provider: Provider, *, agent: str = "agent") -> ContextStrategy:
    """The context strategy a ContextSpec names (``composite``: summarization, then a sliding
    window while the summarized history is still over the limit; ``custom``: the entry point
    ``spec.name`` of ``airlock.context_strategies``)."""
    from airlock.turn import (
        CausalCone,
        Composite,
        NoCompaction,
        SlidingWindow,
        Summarization,
        call_extension_factory,
        load_extension,
    )

    if spec.strategy == "custom" and spec.name is not None:
        factory = load_extension("context strategy", spec.name, agent=agent)
        built: ContextStrategy = call_extension_factory(
            factory, f"agent {agent!r}: context strategy {spec.name!r}", spec, provider
        )
        return built

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


def build_hook(spec: HookSpec, *, agent: str = "agent") -> Hook:
    """The hook a HookSpec names: ``budget`` (options ``max_cost``, ``warn_at``), ``logging``
    (``level``), or ``custom`` (the entry point ``spec.custom`` of ``airlock.hooks``).

    Raises:
        SpecError: an unknown hook name (the message lists the valid ones), invalid options,
            or a custom hook not registered here.
    """
    from airlock.turn import BudgetHook, LoggingHook, build_extensions

    options: dict[str, Any] = dict(spec.options)
    if spec.name == "custom" and spec.custom is not None:
        hook: Hook = build_extensions("hook", [(spec.custom, options)], agent=agent)[0]
        return hook
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
