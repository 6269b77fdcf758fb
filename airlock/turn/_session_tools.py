"""A turn session's tool calls: run concurrently within the time limit, effect tools declared,
hooks consulted, results and records kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import JsonValue

from layer0 import ExitReason, HookPoint, LogLevel, ToolCallRecord

from ._effect_tools import EFFECT_BACKFILL, EffectToolError, effect_from_call, effect_validation_error
from ._events import ToolFinished, ToolStarted
from ._registry import ToolOutcome, ToolRegistry
from ._session_accounting import SessionAccounting
from ._state import ToolExecution
from ._tool import ToolContext
from ._types import ProviderMessage, Role, ToolResultPart, ToolUsePart


class SessionTools(SessionAccounting):
    """Running the tools a model call asked for (part of ``TurnSession``)."""

    async def _run_tools(self, uses: list[ToolUsePart]) -> tuple[list[ToolExecution], ExitReason | None]:
        st = self._state
        turn = self._turn
        limits = turn.limits

        done = {ex.tool_use_id: ex for ex in st.completed}
        results: dict[int, ToolExecution] = {}
        scheduled: list[tuple[int, ToolUsePart, JsonValue]] = []
        for idx, use in enumerate(uses):
            if use.id in done:  # ran before the session was resumed (or was decided)
                results[idx] = done[use.id]
                continue
            if use.name not in self._cfg.offered:
                text = ToolRegistry.unknown_tool_message(use.name, sorted(self._cfg.offered))
                results[idx] = self._completed(
                    ToolExecution(
                        tool_use_id=use.id, name=use.name, input=use.input, output=text, is_error=True
                    )
                )
                continue
            decision = await self._fire(HookPoint.PRE_TOOL_USE, tool_name=use.name, tool_input=use.input)
            if decision.halt is not None:
                self._close_open_uses(uses, "not run: the turn was halted by an observer")
                return [], ExitReason.observer_halt(decision.halt)
            if decision.skip is not None:
                results[idx] = self._completed(
                    ToolExecution(
                        tool_use_id=use.id,
                        name=use.name,
                        input=use.input,
                        output=f"skipped by policy: {decision.skip}",
                        is_error=True,
                        skipped=True,
                    )
                )
                continue
            tool_input = decision.new_input if decision.modified else use.input
            if use.name in turn.effect_tools:
                results[idx] = await self._declare_effect(use, tool_input)
                continue
            scheduled.append((idx, use, tool_input))

        timed_out = False
        if scheduled:
            timed_out = await self._execute_scheduled(scheduled, results)
        executions = [results[i] for i in range(len(uses))]
        for ex in executions:
            if ex.declared is not None:
                st.effects.append(ex.declared)
            st.effects.extend(ex.effects)
            if ex.is_error and not ex.skipped:
                self._run_log(
                    LogLevel.WARN,
                    f"tool {ex.name} failed: {ex.output}",
                    {"tool": ex.name, "tool_use_id": ex.tool_use_id},
                )
        st.completed = []
        st.approved = []
        st.messages.append(
            ProviderMessage(
                role=Role.USER,
                content=[
                    ToolResultPart(tool_use_id=ex.tool_use_id, content=ex.output, is_error=ex.is_error)
                    for ex in executions
                ],
            )
        )
        for ex in executions:
            if ex.skipped:
                continue
            st.tool_records.append(
                ToolCallRecord(name=ex.name, duration=int(ex.duration_ms), success=not ex.is_error)
            )
            st.consecutive_failures = st.consecutive_failures + 1 if ex.is_error else 0
        if timed_out:
            return executions, ExitReason.timeout()
        if st.consecutive_failures >= limits.circuit_breaker_threshold:
            return executions, ExitReason.circuit_breaker()
        for ex in executions:
            if ex.skipped:
                continue
            decision = await self._fire(HookPoint.POST_TOOL_USE, tool_name=ex.name, tool_result=ex.output)
            if decision.halt is not None:
                return executions, ExitReason.observer_halt(decision.halt)
        return executions, None

    def _completed(self, execution: ToolExecution) -> ToolExecution:
        """Note a call of the open step as done (a checkpoint from now on carries it)."""
        self._state.completed.append(execution)
        self._unsaved = True
        return execution

    async def _declare_effect(self, use: ToolUsePart, tool_input: JsonValue) -> ToolExecution:
        """An effect tool's call: declared as an Effect (applied with the step's results),
        never run in the sandbox."""
        problem = effect_validation_error(use.name, tool_input)
        effect = None
        if problem is None:
            try:
                effect = effect_from_call(use.name, tool_input, self._state.input.session)
            except EffectToolError as err:
                problem = f"{use.name}: {err}"
        execution = self._completed(
            ToolExecution(
                tool_use_id=use.id,
                name=use.name,
                input=tool_input,
                output=problem or EFFECT_BACKFILL[use.name],
                is_error=problem is not None,
                effect=True,
                declared=effect,
            )
        )
        await self._emit(ToolStarted(tool_use_id=use.id, name=use.name, input=tool_input))
        await self._emit(
            ToolFinished(
                tool_use_id=use.id,
                name=use.name,
                duration_ms=0,
                success=not execution.is_error,
                output=execution.output,
            )
        )
        await self._checkpoint()
        return execution

    async def _execute_scheduled(
        self, scheduled: list[tuple[int, ToolUsePart, JsonValue]], results: dict[int, ToolExecution]
    ) -> bool:
        """Run the calls concurrently; True when the time limit cut them short."""
        turn = self._turn
        metadata = self._state.input.metadata
        ctx_meta: dict[str, Any] = dict(metadata) if isinstance(metadata, dict) else {}
        session = self._state.input.session
        offered = self._cfg.offered

        async def run_one(idx: int, use: ToolUsePart, tool_input: JsonValue) -> None:
            await self._emit(ToolStarted(tool_use_id=use.id, name=use.name, input=tool_input))
            t0 = time.perf_counter()
            ctx = ToolContext(tool_use_id=use.id, agent=turn.name, metadata=ctx_meta, session=session)
            registry = turn.memory if use.name in turn.memory else turn.tools
            outcome: ToolOutcome = await registry.execute(use.name, tool_input, ctx, allowed=offered)
            duration = (time.perf_counter() - t0) * 1000
            results[idx] = self._completed(
                ToolExecution(
                    tool_use_id=use.id,
                    name=use.name,
                    input=tool_input,
                    output=outcome.content,
                    is_error=outcome.is_error,
                    duration_ms=duration,
                    effects=list(outcome.effects),
                )
            )
            await self._emit(
                ToolFinished(
                    tool_use_id=use.id,
                    name=use.name,
                    duration_ms=int(duration),
                    success=not outcome.is_error,
                    output=outcome.content,
                )
            )
            await self._checkpoint()

        deadline = self._deadline()
        try:
            async with deadline:
                if len(scheduled) == 1:
                    await run_one(*scheduled[0])
                else:
                    await asyncio.gather(*(run_one(*s) for s in scheduled))
        except TimeoutError:
            if not deadline.expired():
                raise
            for idx, use, tool_input in scheduled:
                if idx not in results:
                    results[idx] = ToolExecution(
                        tool_use_id=use.id,
                        name=use.name,
                        input=tool_input,
                        output="cancelled: the turn's time limit was reached",
                        is_error=True,
                    )
            return True
        return False

    def _close_dangling(self, text: str) -> None:
        """Answer the last assistant message's tool calls if nothing answered them yet."""
        messages = self._state.messages
        if messages and messages[-1].role is Role.ASSISTANT:
            self._close_open_uses([p for p in messages[-1].content if isinstance(p, ToolUsePart)], text)

    def _close_open_uses(self, uses: list[ToolUsePart], text: str) -> None:
        """Answer tool calls that will not run, so the history stays well-formed."""
        if uses:
            self._state.messages.append(
                ProviderMessage(
                    role=Role.USER,
                    content=[ToolResultPart(tool_use_id=u.id, content=text, is_error=True) for u in uses],
                )
            )
