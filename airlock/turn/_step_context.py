"""A turn in progress as every part of a step sees it: its state and configuration, its clock
and time limit, events, hooks, run log and checkpoints."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from pydantic import JsonValue

from layer0 import HookContext, HookPoint, LogLevel

from ._config import DeadlineReached, ResolvedConfig
from ._events import LifecycleEvent, LifecyclePayload, TurnEvent, TurnEventSink
from ._hooks import BudgetHook, HookDecision
from ._parts import TurnParts
from ._run_log import note
from ._state import SessionState

log = logging.getLogger("airlock.turn._loop")

T = TypeVar("T")


class StepContext:
    """The session's state and the plumbing every step uses (shared by the session's parts)."""

    def __init__(
        self, turn: TurnParts, state: SessionState, events: TurnEventSink | None, cfg: ResolvedConfig
    ) -> None:
        self.turn = turn
        self.state = state
        self.events = events
        #: The effective configuration (budget signals replace it).
        self.cfg = cfg
        #: Messages and tool records the latest checkpoint carried (a checkpoint sends only the
        #: ones after); whether the state changed since.
        self.journaled: int | None = None
        self.records_journaled = 0
        self.unsaved = False
        #: A BudgetHook halted the turn (its exit is the budget's decision).
        self.budget_halt = False
        self._step_t0: float | None = None
        self._step_base_ms = 0.0

    # -- the clock ------------------------------------------------------------------------

    @property
    def stepping(self) -> bool:
        """Whether a step is running (its clock started)."""
        return self._step_t0 is not None

    def start_clock(self) -> None:
        """A step begins: time runs from the state's elapsed time."""
        self._step_base_ms = self.state.elapsed_ms
        self._step_t0 = time.perf_counter()

    def stop_clock(self) -> None:
        """A step ends: its time joins the state's."""
        self.state.elapsed_ms = self.elapsed_ms()
        self._step_t0 = None

    def elapsed_ms(self) -> float:
        """The turn's time so far (its steps', the running one's included)."""
        if self._step_t0 is None:
            return self.state.elapsed_ms
        return self._step_base_ms + (time.perf_counter() - self._step_t0) * 1000

    def deadline(self) -> asyncio.Timeout:
        """A timeout at the turn's time limit (none without one)."""
        limit = self.cfg.max_duration_ms
        if limit is None:
            return asyncio.timeout(None)
        return asyncio.timeout(max(0.0, limit - self.elapsed_ms()) / 1000)

    async def within_deadline(self, work: Awaitable[T]) -> T:
        """Await ``work`` within the time limit; DeadlineReached when it expires."""
        deadline = self.deadline()
        try:
            async with deadline:
                return await work
        except TimeoutError:
            if deadline.expired():
                raise DeadlineReached from None
            raise

    # -- what the turn says -----------------------------------------------------------------

    def run_log(self, level: LogLevel, message: str, data: JsonValue = None) -> None:
        """Declare a log effect while the turn runs (capped: see ``_run_log.note``)."""
        note(self.state, level, message, data)
        self.unsaved = True

    def observed(self) -> bool:
        """Whether anyone receives lifecycle events (an event sink or an observer)."""
        return self.events is not None or bool(self.turn.hooks.observers)

    async def observe(self, event: LifecyclePayload) -> None:
        """Emit a layer0 lifecycle event and hand it to the observers (within the time limit;
        observers still busy when it is reached are left behind, the loop ends the turn)."""
        if not self.observed():
            return
        notice = LifecycleEvent(event=event, agent=self.turn.name)
        await self.emit(notice)
        hooks = self.turn.hooks
        if not hooks.observers:
            return
        deadline = self.deadline()
        try:
            async with deadline:
                await hooks.notify(notice.observable(int(self.elapsed_ms())))
        except TimeoutError:
            if not deadline.expired():
                raise
            log.warning("observers of %s were cut short by the turn's time limit", notice.event.type)

    async def fire(self, point: HookPoint, **fields: Any) -> HookDecision:
        """Consult the hooks at ``point`` (within the time limit: DeadlineReached)."""
        hooks = self.turn.hooks
        if not hooks.has(point):
            return HookDecision()
        st = self.state
        ctx = HookContext(
            point=point,
            tokens_used=st.tokens_in + st.tokens_out,
            cost=st.cost,
            turns_completed=st.iterations,
            elapsed=int(self.elapsed_ms()),
            **fields,
        )
        decision = await self.within_deadline(hooks.fire(ctx))
        if isinstance(decision.halted_by, BudgetHook):
            self.budget_halt = True
        return decision

    async def emit(self, event: TurnEvent) -> None:
        """Hand ``event`` to the event sink (its failures are logged and ignored)."""
        if self.events is None:
            return
        try:
            await self.events(event)
        except Exception as e:
            log.warning("event sink failed on %s (ignored): %s", event.type, e)

    async def checkpoint(self) -> None:
        """Report the state to resume from (the messages since the previous checkpoint)."""
        if self.events is None:
            return
        st = self.state
        since = 0 if self.journaled is None else min(self.journaled, len(st.messages))
        records = 0 if self.journaled is None else min(self.records_journaled, len(st.tool_records))
        await self.emit(st.checkpoint(since, records))
        self.journaled = len(st.messages)
        self.records_journaled = len(st.tool_records)
        self.unsaved = False
