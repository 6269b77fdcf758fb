"""HookRegistry: fires layer0 hooks at the loop's points and tells observers of the turn's
lifecycle events; BudgetHook as the example hook.

layer0's ``HookPoint`` has no point for lifecycle events (budget, compaction): they are
observed, not intervened in. An object with ``async observe(event: ObservableEvent)`` (a
:class:`LifecycleObserver`) registered in the registry, alone or as a hook too, receives
each one wrapped as layer0's ``ObservableEvent``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from layer0 import (
    Hook,
    HookAction,
    HookContext,
    HookContinue,
    HookHalt,
    HookModifyToolInput,
    HookPoint,
    HookSkipTool,
    ObservableEvent,
)

log = logging.getLogger(__name__)


@runtime_checkable
class LifecycleObserver(Protocol):
    """Observes a turn's lifecycle events (budget, compaction) as layer0 ``ObservableEvent``s.

    It cannot intervene; raising is logged and ignored. It must be quick: the loop awaits it
    (within the turn's time limit).
    """

    async def observe(self, event: ObservableEvent) -> None:
        """Take note of ``event``."""
        ...


@dataclass(frozen=True)
class HookDecision:
    """The combined verdict of every hook fired at one point."""

    #: Set when a hook halted the turn.
    halt: str | None = None
    #: Set when a hook skipped the tool call (PreToolUse only).
    skip: str | None = None
    #: Whether a hook replaced the tool input (PreToolUse only).
    modified: bool = False
    #: The replacement input, when ``modified``.
    new_input: JsonValue = None
    #: The hook that halted the turn, when one did.
    halted_by: Hook | None = None


_CONTINUE = HookDecision()


class HookRegistry:
    """Hooks in registration order; each fires only at the points it names.

    Hooks run one after the other. The first ``HookHalt`` (or, at PreToolUse, ``HookSkipTool``)
    ends the round; a ``HookModifyToolInput`` at PreToolUse replaces the input that later
    hooks see and the tool receives. ``SkipTool``/``ModifyToolInput`` anywhere else are
    ignored with a warning. A hook that raises is logged and ignored: hooks never halt by failing.
    Registered objects with an ``observe`` method (:class:`LifecycleObserver`) also receive
    the turn's lifecycle events (:meth:`notify`).
    """

    def __init__(self, hooks: Iterable[Hook | LifecycleObserver] = ()) -> None:
        self._hooks: list[Hook] = []
        self._observers: list[LifecycleObserver] = []
        self._by_point: dict[HookPoint, list[Hook]] = {p: [] for p in HookPoint}
        for h in hooks:
            self.add(h)

    def add(self, hook: Hook | LifecycleObserver) -> None:
        """Register a hook, a lifecycle observer, or an object that is both.

        Raises:
            TypeError: it is neither (no ``points``/``on_event`` and no ``observe``).
        """
        if not isinstance(hook, Hook | LifecycleObserver):
            raise TypeError(
                f"{type(hook).__name__} is neither a hook (points, on_event) "
                "nor a lifecycle observer (observe)"
            )
        if isinstance(hook, LifecycleObserver):
            self._observers.append(hook)
        if isinstance(hook, Hook):
            self._hooks.append(hook)
            for point in hook.points():
                self._by_point[HookPoint(point)].append(hook)

    @property
    def observers(self) -> Sequence[LifecycleObserver]:
        """Registered lifecycle observers."""
        return tuple(self._observers)

    async def notify(self, event: ObservableEvent) -> None:
        """Hand ``event`` to every observer in turn (one that raises is logged and skipped)."""
        for observer in self._observers:
            try:
                await observer.observe(event)
            except Exception as e:
                name = type(observer).__name__
                log.warning("observer %s failed on %s (ignored): %s", name, event.event_type, e)

    @property
    def hooks(self) -> Sequence[Hook]:
        """Registered hooks."""
        return tuple(self._hooks)

    def has(self, point: HookPoint) -> bool:
        """Whether any hook fires at ``point`` (lets the loop skip building contexts)."""
        return bool(self._by_point[point])

    async def fire(self, ctx: HookContext) -> HookDecision:
        """Run the hooks registered at ``ctx.point`` and combine their actions."""
        hooks = self._by_point[ctx.point]
        if not hooks:
            return _CONTINUE
        modified = False
        current_input: JsonValue = ctx.tool_input
        for hook in hooks:
            try:
                action: HookAction = await hook.on_event(ctx)
            except Exception as e:
                log.warning("hook %s failed at %s (ignored): %s", type(hook).__name__, ctx.point.value, e)
                continue
            if isinstance(action, HookContinue):
                continue
            if isinstance(action, HookHalt):
                return HookDecision(halt=action.reason, halted_by=hook)
            if ctx.point is not HookPoint.PRE_TOOL_USE:
                log.warning(
                    "hook %s returned %s at %s, where only continue/halt count; ignored",
                    type(hook).__name__,
                    action.action,
                    ctx.point.value,
                )
                continue
            if isinstance(action, HookSkipTool):
                return HookDecision(skip=action.reason)
            if isinstance(action, HookModifyToolInput):
                modified = True
                current_input = action.new_input
                ctx = ctx.model_copy(update={"tool_input": current_input})
                continue
            log.warning("hook %s returned an unknown action %r; ignored", type(hook).__name__, action)
        return HookDecision(modified=modified, new_input=current_input) if modified else _CONTINUE


class BudgetHook:
    """Halts the turn once its cost reaches ``max_cost`` (USD); warns once at ``warn_at``.

    Args:
        max_cost: the budget; a context with ``cost >= max_cost`` halts.
        warn_at: fraction of the budget (e.g. ``Decimal("0.8")``) at which one warning is logged;
            None for no warning.
    """

    def __init__(self, max_cost: Decimal, *, warn_at: Decimal | None = Decimal("0.8")) -> None:
        if max_cost < 0:
            raise ValueError("max_cost must not be negative")
        self.max_cost = max_cost
        self.warn_at = warn_at
        self._warned = False

    def points(self) -> Sequence[HookPoint]:
        """Before and after each model call, and at each exit check."""
        return (HookPoint.PRE_INFERENCE, HookPoint.POST_INFERENCE, HookPoint.EXIT_CHECK)

    async def on_event(self, ctx: HookContext) -> HookAction:
        """Halt at or over budget."""
        if ctx.cost >= self.max_cost:
            return HookHalt(reason=f"budget of ${self.max_cost} reached (spent ${ctx.cost})")
        if self.warn_at is not None and not self._warned and ctx.cost >= self.max_cost * self.warn_at:
            self._warned = True
            log.warning("turn has spent $%s of its $%s budget", ctx.cost, self.max_cost)
        return HookContinue()
