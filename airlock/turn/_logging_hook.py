"""LoggingHook: logs every hook event and lifecycle event, and never intervenes."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from layer0 import HookAction, HookContext, HookContinue, HookPoint, ObservableEvent


class LoggingHook:
    """A ``layer0.Hook`` that fires at every ``HookPoint``, logs it, and continues.

    One record per event on ``logger`` (default ``airlock.turn.hooks``) at ``level``,
    with the point, counters, cost and tool name; the tool's input and result are
    never logged (they may carry secrets). The record's ``hook_context`` attribute
    holds the ``HookContext`` for structured handlers. As a lifecycle observer it also logs
    each budget and compaction event (the record's ``observable_event``: the ObservableEvent).
    """

    def __init__(self, *, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self._logger = logger or logging.getLogger("airlock.turn.hooks")
        self._level = level

    def points(self) -> Sequence[HookPoint]:
        """All of them."""
        return list(HookPoint)

    async def on_event(self, ctx: HookContext) -> HookAction:
        """Log the event; always ``HookContinue``."""
        self._logger.log(
            self._level,
            "hook %s: turns=%d tokens=%d cost=%s elapsed=%dms%s",
            ctx.point.value,
            ctx.turns_completed,
            ctx.tokens_used,
            ctx.cost,
            ctx.elapsed,
            f" tool={ctx.tool_name}" if ctx.tool_name else "",
            extra={"hook_context": ctx},
        )
        return HookContinue()

    async def observe(self, event: ObservableEvent) -> None:
        """Log a lifecycle event (budget, compaction) with its data."""
        if self._logger.isEnabledFor(self._level):
            self._logger.log(
                self._level,
                "lifecycle %s at %dms: %s",
                event.event_type,
                event.timestamp,
                event.data,
                extra={"observable_event": event},
            )
