"""What every part of a turn session shares: its time limit, events, hooks, checkpoints and
lifecycle notices (``TurnSession`` is built on it)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from layer0 import HookContext, HookPoint, LogLevel

from ._config import DeadlineReached, ResolvedConfig
from ._events import LifecycleEvent, LifecyclePayload, TurnEvent
from ._hooks import BudgetHook, HookDecision
from ._run_log import note
from ._state import SessionState

if TYPE_CHECKING:
    from ._events import EventSink
    from ._neuron import NeuronTurn


log = logging.getLogger("airlock.turn._session")


class SessionBase:
    """The session's state and the plumbing every step uses; the loop is ``TurnSession``."""

    _turn: NeuronTurn
    _state: SessionState
    _events: EventSink | None
    _cfg: ResolvedConfig
    #: Messages and tool records the latest checkpoint carried (a checkpoint sends only the
    #: ones after); whether the state changed since.
    _journaled: int | None
    _records_journaled: int
    _unsaved: bool
    _step_t0: float | None
    _step_base_ms: float
    #: A BudgetHook halted the turn (its exit is the budget's decision).
    _budget_halt: bool

    def _elapsed_ms(self) -> float:
        if self._step_t0 is None:
            return self._state.elapsed_ms
        return self._step_base_ms + (time.perf_counter() - self._step_t0) * 1000

    def _deadline(self) -> asyncio.Timeout:
        limit = self._cfg.max_duration_ms
        if limit is None:
            return asyncio.timeout(None)
        return asyncio.timeout(max(0.0, limit - self._elapsed_ms()) / 1000)

    def _run_log(self, level: LogLevel, message: str, data: JsonValue = None) -> None:
        """Declare a log effect while the turn runs (capped: see ``_run_log.note``)."""
        note(self._state, level, message, data)
        self._unsaved = True

    def _observed(self) -> bool:
        """Whether anyone receives lifecycle events (an event sink or an observer)."""
        return self._events is not None or bool(self._turn.hooks.observers)

    async def _observe(self, event: LifecyclePayload) -> None:
        """Emit a layer0 lifecycle event and hand it to the observers (within the time limit;
        observers still busy when it is reached are left behind, the loop ends the turn)."""
        if not self._observed():
            return
        notice = LifecycleEvent(event=event, agent=self._turn.name)
        await self._emit(notice)
        hooks = self._turn.hooks
        if not hooks.observers:
            return
        deadline = self._deadline()
        try:
            async with deadline:
                await hooks.notify(notice.observable(int(self._elapsed_ms())))
        except TimeoutError:
            if not deadline.expired():
                raise
            log.warning("observers of %s were cut short by the turn's time limit", notice.event.type)

    async def _fire(self, point: HookPoint, **fields: Any) -> HookDecision:
        hooks = self._turn.hooks
        if not hooks.has(point):
            return HookDecision()
        st = self._state
        ctx = HookContext(
            point=point,
            tokens_used=st.tokens_in + st.tokens_out,
            cost=st.cost,
            turns_completed=st.iterations,
            elapsed=int(self._elapsed_ms()),
            **fields,
        )
        deadline = self._deadline()
        try:
            async with deadline:
                decision = await hooks.fire(ctx)
        except TimeoutError:
            if deadline.expired():
                raise DeadlineReached from None
            raise
        if isinstance(decision.halted_by, BudgetHook):
            self._budget_halt = True
        return decision

    async def _emit(self, event: TurnEvent) -> None:
        if self._events is None:
            return
        try:
            await self._events(event)
        except Exception as e:
            log.warning("event sink failed on %s (ignored): %s", event.type, e)

    async def _checkpoint(self) -> None:
        """Report the state to resume from (the messages since the previous checkpoint)."""
        if self._events is None:
            return
        st = self._state
        since = 0 if self._journaled is None else min(self._journaled, len(st.messages))
        records = 0 if self._journaled is None else min(self._records_journaled, len(st.tool_records))
        await self._emit(st.checkpoint(since, records))
        self._journaled = len(st.messages)
        self._records_journaled = len(st.tool_records)
        self._unsaved = False
