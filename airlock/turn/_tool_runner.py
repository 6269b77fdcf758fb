"""Running a step's tool calls: hooks consulted around them, effect tools declared, the rest
run concurrently within the time limit, their results and records kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import JsonValue

from layer0 import ExitReason, HookPoint, LogLevel, ToolCallRecord

from ._effect_tools import (
    EFFECT_BACKFILL,
    EffectToolError,
    MemoryPlace,
    effect_from_call,
    effect_validation_error,
    handed_off,
)
from ._events import ToolFinished, ToolStarted
from ._registry import ToolOutcome, ToolRegistry
from ._state import ToolExecution
from ._step_context import StepContext
from ._tool import ToolContext
from ._tool_choice import exit_code
from ._types import ProviderMessage, Role, ToolResultPart, ToolUsePart

#: Calls to run in the sandbox: their index in the step, the call, its (hook-modified) input.
Scheduled = list[tuple[int, ToolUsePart, JsonValue]]


class ToolRunner:
    """Runs the tools a model call asked for and answers the ones that will not run."""

    def __init__(self, ctx: StepContext) -> None:
        self._ctx = ctx
        #: The first halt a PostToolUse hook asked for in the running step.
        self._halt: str | None = None

    async def run(self, uses: list[ToolUsePart]) -> tuple[list[ToolExecution], ExitReason | None]:
        """Run ``uses`` (those done before a resume are taken as done): their executions, in
        order, and how the turn ends because of them, if it does."""
        results: dict[int, ToolExecution] = {}
        scheduled: Scheduled = []
        self._halt = None
        halt = await self._prepare(uses, results, scheduled)
        if halt is not None:
            return [], halt
        timed_out = False
        if scheduled:
            timed_out = await self._execute_scheduled(scheduled, results)
        executions = [results[i] for i in range(len(uses))]
        self._record(executions)
        if timed_out:
            return executions, ExitReason.timeout()
        if self._ctx.state.consecutive_failures >= self._ctx.turn.limits.circuit_breaker_threshold:
            return executions, ExitReason.circuit_breaker()
        if self._halt is not None:
            return executions, ExitReason.observer_halt(self._halt)
        return executions, None

    async def _post(self, execution: ToolExecution) -> None:
        """PostToolUse for one call as soon as its result is in (others of the step may still
        run); the first halt asked for ends the turn once the step's results are recorded."""
        ctx = self._ctx
        decision = await ctx.fire(
            HookPoint.POST_TOOL_USE, tool_name=execution.name, tool_result=execution.output
        )
        if decision.halt is not None and self._halt is None:
            self._halt = decision.halt

    async def _prepare(
        self, uses: list[ToolUsePart], results: dict[int, ToolExecution], scheduled: Scheduled
    ) -> ExitReason | None:
        """Settle what needs no sandbox (done, unknown, skipped, effect calls) into ``results``
        and the rest into ``scheduled``; an exit reason when a hook halts the turn."""
        ctx = self._ctx
        offered = ctx.cfg.offered
        done = {ex.tool_use_id: ex for ex in ctx.state.completed}
        for idx, use in enumerate(uses):
            if use.id in done:  # ran before the session was resumed (or was decided)
                results[idx] = done[use.id]
                continue
            if use.name not in offered:
                text = ToolRegistry.unknown_tool_message(use.name, sorted(offered))
                results[idx] = self._failed(use, text)
                await self._post(results[idx])
                continue
            decision = await ctx.fire(HookPoint.PRE_TOOL_USE, tool_name=use.name, tool_input=use.input)
            if decision.halt is not None:
                self.close_open_uses(uses, "not run: the turn was halted by an observer")
                return ExitReason.observer_halt(decision.halt)
            if decision.skip is not None:
                text = f"skipped by policy: {decision.skip}"
                results[idx] = self._failed(use, text, skipped=True)
                continue
            tool_input = decision.new_input if decision.modified else use.input
            if use.name in ctx.turn.effect_tools:
                earlier = handed_off([ex.declared for ex in results.values()])
                results[idx] = await self._declare_effect(use, tool_input, earlier)
                continue
            scheduled.append((idx, use, tool_input))
        return None

    def _record(self, executions: list[ToolExecution]) -> None:
        """The step's executions into the state: effects, run log, results message, records."""
        ctx = self._ctx
        st = ctx.state
        for ex in executions:
            if ex.declared is not None:
                st.effects.append(ex.declared)
            st.effects.extend(ex.effects)
            if ex.is_error and not ex.skipped:
                ctx.run_log(
                    LogLevel.WARN,
                    f"tool {ex.name} failed: {ex.output}",
                    {"tool": ex.name, "tool_use_id": ex.tool_use_id},
                )
        st.completed = []
        st.approved = []
        results = [
            ToolResultPart(tool_use_id=ex.tool_use_id, content=ex.output, is_error=ex.is_error)
            for ex in executions
        ]
        st.messages.append(ProviderMessage(role=Role.USER, content=results))
        for ex in executions:
            if ex.skipped:
                continue
            st.tool_records.append(
                ToolCallRecord(name=ex.name, duration=int(ex.duration_ms), success=not ex.is_error)
            )
            st.consecutive_failures = st.consecutive_failures + 1 if ex.is_error else 0

    def _failed(self, use: ToolUsePart, text: str, skipped: bool = False) -> ToolExecution:
        """A call answered with an error without running (unknown, or skipped by a hook)."""
        execution = ToolExecution(
            tool_use_id=use.id, name=use.name, input=use.input, output=text, is_error=True, skipped=skipped
        )
        return self._completed(execution)

    def _completed(self, execution: ToolExecution) -> ToolExecution:
        """Note a call of the open step as done (a checkpoint from now on carries it)."""
        self._ctx.state.completed.append(execution)
        self._ctx.unsaved = True
        return execution

    async def _declare_effect(
        self, use: ToolUsePart, tool_input: JsonValue, handed_off_already: bool = False
    ) -> ToolExecution:
        """An effect tool's call: declared as an Effect (applied with the step's results),
        never run in the sandbox. A second handoff in one step is an error result."""
        ctx = self._ctx
        problem = effect_validation_error(use.name, tool_input)
        effect = None
        if problem is None and use.name == "handoff" and handed_off_already:
            problem = "handoff: this step already handed the conversation over (one handoff per turn)"
        if problem is None:
            try:
                place = MemoryPlace.of(ctx.state.input, ctx.turn.name)
                effect = effect_from_call(use.name, tool_input, place)
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
        await ctx.emit(ToolStarted(tool_use_id=use.id, name=use.name, input=tool_input))
        await ctx.emit(
            ToolFinished(
                tool_use_id=use.id,
                name=use.name,
                duration_ms=0,
                success=not execution.is_error,
                output=execution.output,
            )
        )
        await self._post(execution)
        await ctx.checkpoint()
        return execution

    async def _run_one(
        self, idx: int, use: ToolUsePart, tool_input: JsonValue, results: dict[int, ToolExecution]
    ) -> None:
        """Run one call in its registry into ``results[idx]`` (events and a checkpoint around it)."""
        ctx = self._ctx
        turn = ctx.turn
        await ctx.emit(ToolStarted(tool_use_id=use.id, name=use.name, input=tool_input))
        t0 = time.perf_counter()
        metadata = ctx.state.input.metadata
        meta: dict[str, Any] = dict(metadata) if isinstance(metadata, dict) else {}
        session = ctx.state.input.session
        tool_ctx = ToolContext(tool_use_id=use.id, agent=turn.name, metadata=meta, session=session)
        registry = turn.memory if use.name in turn.memory else turn.tools
        outcome: ToolOutcome = await registry.execute(use.name, tool_input, tool_ctx, allowed=ctx.cfg.offered)
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
        await ctx.emit(
            ToolFinished(
                tool_use_id=use.id,
                name=use.name,
                duration_ms=int(duration),
                success=not outcome.is_error,
                output=outcome.content,
                exit_code=None if outcome.is_error else exit_code(outcome.content),
            )
        )
        await self._post(results[idx])
        await ctx.checkpoint()

    async def _execute_scheduled(self, scheduled: Scheduled, results: dict[int, ToolExecution]) -> bool:
        """Run the calls concurrently; True when the time limit cut them short."""
        deadline = self._ctx.deadline()
        try:
            async with deadline:
                if len(scheduled) == 1:
                    await self._run_one(*scheduled[0], results)
                else:
                    await asyncio.gather(*(self._run_one(*s, results) for s in scheduled))
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
                    await self._post(results[idx])
            return True
        return False

    def close_dangling(self, text: str) -> None:
        """Answer the last assistant message's tool calls if nothing answered them yet."""
        messages = self._ctx.state.messages
        if messages and messages[-1].role is Role.ASSISTANT:
            self.close_open_uses([p for p in messages[-1].content if isinstance(p, ToolUsePart)], text)

    def close_open_uses(self, uses: list[ToolUsePart], text: str) -> None:
        """Answer tool calls that will not run, so the history stays well-formed."""
        if uses:
            self._ctx.state.messages.append(
                ProviderMessage(
                    role=Role.USER,
                    content=[ToolResultPart(tool_use_id=u.id, content=text, is_error=True) for u in uses],
                )
            )
