"""EffectExecutor: apply the effects a turn declared, in order, and report on each.

A turn never writes state itself; it declares effects in its ``TurnOutput`` and the
caller runs them through an ``EffectExecutor``:

- ``WriteMemory`` / ``DeleteMemory`` → the ``StateStore``;
- ``Delegate`` → ``orchestrator.dispatch(agent, input)``; the child's output is kept
  and its own effects are applied as a follow-up. Consecutive delegates of one output run
  concurrently, as layer0's ``dispatch_many`` does (each child, then its follow-ups, in a task
  of its own); their outcomes are reported, recorded and told of in the order the turn
  declared them. With ``stop_on_error`` they run one after another;
- ``Handoff`` → ``orchestrator.dispatch(agent, …)`` with the handed-off state as the
  input message (text) and in ``metadata["handoff_state"]``; follow-up as above;
- ``Signal`` → ``orchestrator.signal``;
- ``Log`` → Python ``logging`` at the mapped level (trace → DEBUG, warn → WARNING);
- ``CustomEffect`` → a handler registered for its ``effect_type``, else logged as
  unhandled.

Every effect first passes the executor's ``gate`` (when one is given), with the agent
that declared it: a child's follow-up effects are checked as that child's. An effect the
gate refuses is not applied; its outcome says ``refused`` and why.

With a ``ledger``, each effect has an address (its index, prefixed by the addresses of the
delegates that led to it: ``2.0.1``) and an effect the ledger already records is not applied
again: a job whose effects were interrupted (its controller died) applies only the rest.

Follow-ups are bounded twice, so self-delegation cannot loop forever: by depth
(``max_depth`` levels of dispatched children) and by count (``max_follow_ups``
dispatches per ``apply``). A delegate or handoff beyond either bound is not
dispatched; its outcome says ``limit_reached`` and why, and a warning is logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue, ValidationError

from airlock.errors import ConfigError
from airlock.jobs import EffectOutcome, EffectReport, OutcomeStatus
from airlock.policy.effects import EffectContext
from layer0 import (
    AgentId,
    Content,
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    Handoff,
    Log,
    LogLevel,
    Orchestrator,
    SessionId,
    Signal,
    StateStore,
    TriggerType,
    TurnInput,
    TurnOutput,
    WriteMemory,
)

#: A handler for one ``CustomEffect.effect_type``; may return a JSON result for the report.
CustomHandler = Callable[[CustomEffect], Awaitable[JsonValue]]
#: Told of each outcome as soon as its effect is applied: ``(outcome, depth, source)``.
OutcomeListener = Callable[[EffectOutcome, int, AgentId | None], Awaitable[None]]
#: Receives each ``Log`` effect with the agent that declared it (besides Python logging).
LogListener = Callable[[Log, AgentId | None], Awaitable[None]]
#: Decides, before an effect is applied, whether it may be: the reason it is refused, or None.
EffectGate = Callable[[Effect, EffectContext], str | None]


_ADDRESS: ContextVar[str | None] = ContextVar("airlock_effect_address", default=None)


def effect_address() -> str | None:
    """The address of the effect being applied now (an orchestrator or store called for it
    learns which effect asks: a ledger keys what that effect did by it)."""
    return _ADDRESS.get()


class EffectLedger(Protocol):
    """Which effects of a tree were applied already (by address), and the record of each new one."""

    def applied(self, address: str) -> EffectOutcome | None:
        """The recorded outcome of the effect at ``address``; None: not applied yet."""
        ...

    async def record(self, address: str, outcome: EffectOutcome) -> None:
        """Record the effect at ``address`` as applied, before anything else hears of it."""
        ...


LOG_LEVELS: dict[LogLevel, int] = {
    LogLevel.TRACE: logging.DEBUG,
    LogLevel.DEBUG: logging.DEBUG,
    LogLevel.INFO: logging.INFO,
    LogLevel.WARN: logging.WARNING,
    LogLevel.ERROR: logging.ERROR,
}


@dataclass
class _Budget:
    follow_ups_left: int


#: Outcomes that count as a failed effect.
_FAILED = ("error", "limit_reached", "refused")


@dataclass
class _Run:
    """One output's effects being applied: where they come from, and whether one failed."""

    source: AgentId | None
    session: SessionId | None
    depth: int
    budget: _Budget
    path: str
    count: int
    failed: bool = False


class EffectExecutor:
    """Applies a turn's effects in order against a store and an orchestrator.

    Args:
        store: where ``WriteMemory``/``DeleteMemory`` go (None: they are errors).
        orchestrator: runs delegates and handoffs and receives signals (None: those
            effects are errors).
        max_depth: levels of follow-up dispatch allowed (0: none at all).
        max_follow_ups: dispatches allowed per ``apply`` call, across all levels.
        stop_on_error: after a failed effect, mark the rest of that output ``skipped``.
        logger: where ``Log`` effects and executor diagnostics go.
        gate: called with each effect (follow-ups' included) and where it comes from before
            it is applied; a reason it returns refuses the effect.
        on_outcome: awaited with each outcome as soon as its effect is applied (a follow-up's
            outcomes come before the outcome of the delegate that caused them).
        on_log: awaited with each ``Log`` effect (e.g. to append it to a job's log).
        ledger: the effects applied already (skipped) and where each new one is recorded.
    """

    def __init__(
        self,
        store: StateStore | None,
        orchestrator: Orchestrator | None,
        *,
        max_depth: int = 4,
        max_follow_ups: int = 64,
        stop_on_error: bool = False,
        custom_handlers: dict[str, CustomHandler] | None = None,
        logger: logging.Logger | None = None,
        on_outcome: OutcomeListener | None = None,
        on_log: LogListener | None = None,
        gate: EffectGate | None = None,
        ledger: EffectLedger | None = None,
    ) -> None:
        if max_depth < 0 or max_follow_ups < 0:
            raise ConfigError("max_depth and max_follow_ups must not be negative")
        self._store = store
        self._orchestrator = orchestrator
        self._max_depth = max_depth
        self._max_follow_ups = max_follow_ups
        self._stop_on_error = stop_on_error
        self._handlers: dict[str, CustomHandler] = dict(custom_handlers or {})
        self._log = logger or logging.getLogger("airlock.effects")
        self._on_outcome = on_outcome
        self._on_log = on_log
        self._gate = gate
        self._ledger = ledger

    def register_custom(self, effect_type: str, handler: CustomHandler) -> None:
        """Handle ``CustomEffect``s whose ``effect_type`` is ``effect_type``."""
        self._handlers[effect_type] = handler

    async def apply(
        self, output: TurnOutput, *, source: AgentId | None = None, session: SessionId | None = None
    ) -> EffectReport:
        """Apply ``output.effects`` in order and report on each; never raises for an effect.

        Args:
            output: the turn's output.
            source: the agent that produced it (used in logs and handoff metadata).
            session: the session a handoff continues (passed to the next agent).
        """
        return await self._apply(output, source, session, 0, _Budget(self._max_follow_ups), "")

    async def _apply(
        self,
        output: TurnOutput,
        source: AgentId | None,
        session: SessionId | None,
        depth: int,
        budget: _Budget,
        path: str,
    ) -> EffectReport:
        effects = output.effects
        run = _Run(source, session, depth, budget, path, len(effects))
        outcomes: list[EffectOutcome] = []
        index = 0
        while index < len(effects):
            end = self._batch_end(effects, index)
            if end - index == 1:
                outcomes.append(await self._step(index, effects[index], run))
            else:
                outcomes.extend(await self._concurrently(effects, index, end, run))
            index = end
        return EffectReport(depth=depth, outcomes=outcomes)

    def _batch_end(self, effects: list[Effect], start: int) -> int:
        """The end of the run of consecutive delegates at ``start`` (they run concurrently),
        or ``start + 1``. With ``stop_on_error`` every effect waits for the one before it."""
        end = start + 1
        if self._stop_on_error or not isinstance(effects[start], Delegate):
            return end
        while end < len(effects) and isinstance(effects[end], Delegate):
            end += 1
        return end

    async def _concurrently(
        self, effects: list[Effect], start: int, end: int, run: _Run
    ) -> list[EffectOutcome]:
        """Delegates ``start..end`` applied at once (each child and its follow-ups in a task of its
        own); each is told of in the order the turn declared them."""
        told = [asyncio.Event() for _ in range(start, end)]
        steps = [
            self._step(
                i, effects[i], run, after=told[i - start - 1] if i > start else None, told=told[i - start]
            )
            for i in range(start, end)
        ]
        tasks = [asyncio.ensure_future(step) for step in steps]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:  # one failed or all are cancelled: none outlives this call
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _step(
        self,
        index: int,
        effect: Effect,
        run: _Run,
        *,
        after: asyncio.Event | None = None,
        told: asyncio.Event | None = None,
    ) -> EffectOutcome:
        """One effect: skipped when the ledger holds it (or an earlier one failed, with
        ``stop_on_error``), else gated, applied, recorded and told of (after ``after`` is set;
        ``told`` is set once this one was, or was not to be, told of)."""
        try:
            address = f"{run.path}{index}"
            done = self._ledger.applied(address) if self._ledger is not None else None
            if done is not None:  # applied before this execution: counted, not applied again
                run.budget.follow_ups_left -= _dispatches(done)
                run.failed = run.failed or done.status in _FAILED
                return done
            if run.failed and self._stop_on_error:
                detail = "an earlier effect failed"
                return EffectOutcome(index=index, effect=effect.type, status="skipped", detail=detail)
            context = EffectContext(run.source, run.session, index, run.count, run.depth)
            outcome = await self._gated(index, effect, context, run.budget, address)
            self._logged(index, effect, outcome, run)
            if self._ledger is not None:
                await self._ledger.record(address, outcome)
            if after is not None:
                await after.wait()
            if self._on_outcome is not None:
                token = _ADDRESS.set(address)
                try:
                    await self._on_outcome(outcome, run.depth, run.source)
                finally:
                    _ADDRESS.reset(token)
            return outcome
        finally:
            if told is not None:
                told.set()

    def _logged(self, index: int, effect: Effect, outcome: EffectOutcome, run: _Run) -> None:
        who = run.source or "turn"
        if outcome.status in _FAILED:
            run.failed = True
            self._log.warning("effect %d (%s) from %s: %s", index, effect.type, who, outcome.detail)
        else:
            self._log.debug("effect %d (%s) from %s: %s", index, effect.type, who, outcome.status)

    async def _gated(
        self, index: int, effect: Effect, context: EffectContext, budget: _Budget, address: str
    ) -> EffectOutcome:
        """The effect applied, unless the gate refuses it; a failure is its outcome, not raised."""
        try:
            refusal = self._gate(effect, context) if self._gate is not None else None
            if refusal is not None:
                return EffectOutcome(
                    index=index,
                    effect=effect.type,
                    status="refused",
                    detail=refusal,
                    agent=effect.agent if isinstance(effect, (Delegate, Handoff)) else None,
                )
            token = _ADDRESS.set(address)
            try:
                return await self._one(
                    index, effect, context.agent, context.session, context.depth, budget, address
                )
            finally:
                _ADDRESS.reset(token)
        except Exception as e:  # a store/orchestrator/handler failure is reported, not raised
            return EffectOutcome(
                index=index, effect=effect.type, status="error", detail=f"{type(e).__name__}: {e}"
            )

    async def _one(
        self,
        index: int,
        effect: Effect,
        source: AgentId | None,
        session: SessionId | None,
        depth: int,
        budget: _Budget,
        address: str,
    ) -> EffectOutcome:
        def done(status: OutcomeStatus = "ok", detail: str | None = None) -> EffectOutcome:
            return EffectOutcome(index=index, effect=effect.type, status=status, detail=detail)

        match effect:
            case WriteMemory(scope=scope, key=key, value=value):
                if self._store is None:
                    return done("error", "no StateStore configured")
                await self._store.write(scope, key, value)
                return done()
            case DeleteMemory(scope=scope, key=key):
                if self._store is None:
                    return done("error", "no StateStore configured")
                await self._store.delete(scope, key)
                return done()
            case Signal(target=target, payload=payload):
                if self._orchestrator is None:
                    return done("error", "no Orchestrator configured")
                await self._orchestrator.signal(target, payload)
                return done()
            case Delegate(agent=agent, input=child_input):
                return await self._follow_up(index, "delegate", agent, child_input, depth, budget, address)
            case Handoff(agent=agent, state=state):
                child_input = _handoff_input(state, source, session)
                return await self._follow_up(index, "handoff", agent, child_input, depth, budget, address)
            case Log(level=level, message=message, data=data):
                if self._on_log is not None:
                    await self._on_log(effect, source)
                self._log.log(
                    LOG_LEVELS[level],
                    "[%s] %s",
                    source or "turn",
                    message,
                    extra={"effect_data": data, "effect_level": level.value},
                )
                return done()
            case CustomEffect(effect_type=effect_type):
                handler = self._handlers.get(effect_type)
                if handler is None:
                    self._log.warning("unhandled custom effect %r from %s", effect_type, source or "turn")
                    return done("unhandled", f"no handler registered for custom effect {effect_type!r}")
                result = await handler(effect)
                try:
                    return EffectOutcome(index=index, effect=effect.type, status="ok", result=result)
                except ValidationError:
                    return done("error", f"handler for {effect_type!r} returned a non-JSON result")
        return done("error", f"unknown effect {effect!r}")  # pragma: no cover - the union is closed

    async def _follow_up(
        self,
        index: int,
        kind: str,
        agent: AgentId,
        child_input: TurnInput,
        depth: int,
        budget: _Budget,
        address: str,
    ) -> EffectOutcome:
        if self._orchestrator is None:
            return EffectOutcome(
                index=index, effect=kind, status="error", detail="no Orchestrator configured", agent=agent
            )
        if depth >= self._max_depth:
            detail = f"follow-up depth limit ({self._max_depth}) reached: {kind} to {agent} not dispatched"
        elif budget.follow_ups_left <= 0:
            limit = self._max_follow_ups
            detail = f"follow-up limit ({limit} per apply) reached: {kind} to {agent} not dispatched"
        else:
            detail = None
        if detail is not None:
            return EffectOutcome(index=index, effect=kind, status="limit_reached", detail=detail, agent=agent)
        budget.follow_ups_left -= 1
        child = await self._orchestrator.dispatch(agent, child_input)
        report = await self._apply(child, agent, child_input.session, depth + 1, budget, f"{address}.")
        return EffectOutcome(
            index=index, effect=kind, status="ok", agent=agent, child_output=child, follow_up=report
        )


def _dispatches(outcome: EffectOutcome) -> int:
    """How many children an applied outcome dispatched, its follow-ups' included."""
    if outcome.effect not in ("delegate", "handoff") or outcome.status != "ok":
        return 0
    nested = outcome.follow_up.outcomes if outcome.follow_up is not None else []
    return 1 + sum(_dispatches(o) for o in nested)


def _handoff_input(state: JsonValue, source: AgentId | None, session: SessionId | None) -> TurnInput:
    """The input a handoff's agent receives: its ``state`` as the message (JSON unless a string),
    the state and the handing agent in its metadata."""
    text = state if isinstance(state, str) else json.dumps(state, sort_keys=True, ensure_ascii=False)
    metadata: dict[str, JsonValue] = {"handoff_state": state}
    if source is not None:
        metadata["handoff_from"] = str(source)
    return TurnInput(message=Content(text), trigger=TriggerType.task(), session=session, metadata=metadata)
