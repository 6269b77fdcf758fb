"""TurnLoop: the ReAct loop, one model call (plus the tools it asked for) per step.

``NeuronTurn.execute`` is ``start()`` + ``run()``: there is exactly one loop, this one. The
loop composes its parts: a step context (state, clock, events, hooks, checkpoints), the
accounting, the tool runner and the approval gate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from pydantic import JsonValue

from layer0 import (
    BudgetAction,
    BudgetDecision,
    Content,
    ExitReason,
    HookPoint,
    Log,
    LogLevel,
    TurnError,
    TurnOutput,
)

from ._accounting import Accounting
from ._approvals import Approvals
from ._assembly import opening_messages
from ._config import DeadlineReached, ResolvedConfig, TurnLoopError
from ._effect_tools import HANDOFF_EXIT, handed_off
from ._events import (
    InferenceFinished,
    InferenceStarted,
    PendingCall,
    TurnEventSink,
    TurnLog,
    TurnPaused,
    TurnStarted,
    TurnSuspended,
)
from ._output import build_output, cancelled_output
from ._parts import TurnParts
from ._run_log import workflow_of
from ._signals import apply_signal, overridden
from ._state import SessionState, StepResult, ToolExecution
from ._step_context import StepContext
from ._streaming import StreamSettings, call_model
from ._tool_runner import ToolRunner
from ._types import (
    CompactionPart,
    ContentPart,
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    ToolUsePart,
    part_to_block,
)

log = logging.getLogger(__name__)

#: Stop reasons after which the model's call did not end the turn though it asked for no tool.
_CONTINUING = (StopReason.PAUSE_TURN, StopReason.COMPACTION)


def _quiet(reason: ExitReason) -> bool:
    """Whether a turn ending for ``reason`` ended as meant (no warning): complete, or handed off."""
    return reason.kind == "complete" or reason == HANDOFF_EXIT


def call_signature(name: str, input: JsonValue) -> str:
    """A tool call's identity for loop detection: name plus canonical JSON input."""
    return name + ":" + json.dumps(input, sort_keys=True, separators=(",", ":"))


class TurnLoop:
    """One turn in progress; step it, run it, pause it, snapshot it.

    Built by ``NeuronTurn.start`` or ``NeuronTurn.resume``, not directly.
    """

    def __init__(self, turn: TurnParts, state: SessionState, events: TurnEventSink | None = None) -> None:
        cfg = overridden(turn.resolve_config(state.input), state.overrides)
        self._ctx = StepContext(turn, state, events, cfg)
        self._accounting = Accounting(self._ctx)
        self._tools = ToolRunner(self._ctx)
        self._approvals = Approvals(self._ctx)
        self._pause_requested = False
        self._inbox: list[tuple[str, JsonValue]] = []
        self._announced = False
        if state.started and state.iterations:  # a provider keeping its place follows the snapshot
            resume_at = getattr(turn.provider, "resume_at", None)
            if callable(resume_at):
                resume_at(state.iterations)
        self._boundary: SessionState | None = None
        self._output: TurnOutput | None = None
        if state.exit_reason is not None:
            self._output = build_output(state)

    # -- public surface ---------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """A snapshot at the latest step boundary (JSON-serializable; resume from it)."""
        return (self._boundary or self._ctx.state).model_copy(deep=True)

    @property
    def is_complete(self) -> bool:
        """Whether the turn has ended."""
        return self._output is not None

    @property
    def output(self) -> TurnOutput | None:
        """The turn's output once it has ended."""
        return self._output

    @property
    def config(self) -> ResolvedConfig:
        """The effective configuration of this turn."""
        return self._ctx.cfg

    @property
    def pause_requested(self) -> bool:
        """Whether a pause is pending."""
        return self._pause_requested

    @property
    def awaiting(self) -> list[PendingCall]:
        """Tool calls waiting for a person's approval: the session is suspended before them
        (``run`` returns None; resume its ``state`` with them decided)."""
        return list(self._approvals.awaiting)

    def deliver(self, signal_type: str, data: JsonValue = None) -> None:
        """Hand the turn a signal, applied at its next step boundary.

        ``cancel`` ends the turn there (``custom("cancelled")``); ``budget`` changes its
        limits (``data``: any of ``max_turns``, ``max_cost``, ``max_duration_ms``); any other
        type is feedback the model reads with the next call (``data`` as text).
        """
        self._inbox.append((signal_type, data))

    def request_pause(self) -> None:
        """Make ``run()`` stop at the next step boundary (also before the first step).

        A ``run()`` in progress finishes its current step, emits ``TurnPaused`` and returns
        None; a ``run()`` started later returns None at once. ``run()`` again continues.
        """
        self._pause_requested = True

    def withdraw_pause(self) -> None:
        """Take back a pause ``run()`` has not honoured yet (nothing happens otherwise)."""
        self._pause_requested = False

    async def run(self) -> TurnOutput | None:
        """Step until the turn ends (its output) or a pause is honoured (None)."""
        while self._output is None:
            if self._approvals.awaiting:
                return None
            if self._pause_requested:
                self._pause_requested = False
                await self._ctx.emit(TurnPaused(iteration=self._ctx.state.iterations))
                return None
            await self.step()
        return self._output

    async def step(self) -> StepResult:
        """One model call and the tools it asked for.

        After the turn ended, returns the final result again without calling anything.

        Raises:
            layer0.TurnError: from the provider (never retried here), for a truncated output
                (``model("output truncated")``), an exceeded context window
                (``model("context exceeded")``), or unreadable history (``context_assembly``).
            TurnLoopError: a step is already running.
        """
        if self._output is not None:
            return StepResult(
                iteration=self._ctx.state.iterations,
                text="",
                is_complete=True,
                exit_reason=self._output.exit_reason,
                output=self._output,
            )
        self._check_steppable()
        self._boundary = self._boundary_copy()
        self._ctx.start_clock()
        try:
            result = await self._step()
        except asyncio.CancelledError:
            self._tools.close_dangling("not run: the turn was cancelled")
            raise
        finally:
            self._ctx.stop_clock()
            self._boundary = None
        if result.is_complete:
            self._output = build_output(self._ctx.state)
            result = result.model_copy(update={"output": self._output})
            if result.exit_reason is not None and not _quiet(result.exit_reason):
                await self._ctx.emit(TurnLog(level="warn", message=f"turn ended: {result.exit_reason}"))
        return result

    def cancelled_output(self) -> TurnOutput:
        """A TurnOutput for a cancelled turn: ``custom("cancelled")`` with the metadata so far.

        Its only effect is a log line; history and tool effects are not declared.
        """
        return cancelled_output(self._ctx.state, self._ctx.elapsed_ms())

    # -- the loop -------------------------------------------------------------------------

    def _boundary_copy(self) -> SessionState:
        """The state at this step boundary (the lists a step changes copied)."""
        st = self._ctx.state
        return st.model_copy(
            update={
                "messages": list(st.messages),
                "tool_records": list(st.tool_records),
                "effects": list(st.effects),
                "completed": list(st.completed),
                "approved": list(st.approved),
                "overrides": dict(st.overrides),
            }
        )

    def _check_steppable(self) -> None:
        if self._ctx.stepping:
            raise TurnLoopError("a step of this session is already running")
        if self._approvals.awaiting:
            names = ", ".join(c.name for c in self._approvals.awaiting)
            raise TurnLoopError(f"the session waits for approval of {names}; resume its state once decided")

    async def _step(self) -> StepResult:
        try:
            return await self._step_body()
        except DeadlineReached:
            self._tools.close_dangling("not run: the turn's time limit was reached")
            return await self._finish(ExitReason.timeout(), iteration=self._ctx.state.iterations)

    async def _step_body(self) -> StepResult:
        st = self._ctx.state
        await self._open()
        uses = st.open_uses()
        if uses:  # resumed inside a step: the model call is done, its tools are not
            return await self._act(uses, st.iterations, "", None)
        ended = self._ended_before_resume()
        if ended is not None:
            return await self._finish(ended, st.iterations, st.final_text)
        early = await self._boundary_exit()
        if early is not None:
            return await self._finish(early, iteration=0)
        iteration = st.iterations + 1
        request = self._request(iteration)
        response = await self._call_model(request, iteration)
        if response is None:  # the time limit was reached during the call
            return await self._finish(ExitReason.timeout(), iteration=iteration)
        return await self._answered(request, response, iteration)

    async def _open(self) -> None:
        """Assemble the context of a turn not started yet; announce a resumed one."""
        ctx = self._ctx
        if not ctx.state.started:
            ctx.state.messages = await opening_messages(ctx)
            ctx.state.started = True
            self._announced = True
            await ctx.emit(TurnStarted())
            await ctx.checkpoint()
        elif not self._announced:
            self._announced = True
            await ctx.emit(TurnStarted(resumed=True))
            await ctx.checkpoint()

    async def _boundary_exit(self) -> ExitReason | None:
        """Why the turn ends before its next model call: a signal, a limit, or a hook's halt."""
        signalled = await self._deliver_signals()
        if signalled is not None:
            return signalled
        early = self._accounting.limit_exit()
        if early is not None:
            return early
        decision = await self._ctx.fire(HookPoint.PRE_INFERENCE)
        if decision.halt is not None:
            return ExitReason.observer_halt(decision.halt)
        return None

    def _request(self, iteration: int) -> ProviderRequest:
        """The model call of step ``iteration``."""
        st, turn, cfg = self._ctx.state, self._ctx.turn, self._ctx.cfg
        extra = cfg.extra
        if cfg.tools:
            extra = {**extra, **turn.tool_choice.request_extra(iteration, st.messages)}
        return ProviderRequest(
            model=cfg.model,
            messages=list(st.messages),
            tools=cfg.tools,
            max_tokens=turn.max_tokens,
            temperature=turn.temperature,
            system=cfg.system,
            extra=extra,
        )

    async def _call_model(self, request: ProviderRequest, iteration: int) -> ProviderResponse | None:
        """Call the model within the time limit and count the call; None when the limit was
        reached during it."""
        ctx = self._ctx
        st, turn = ctx.state, ctx.turn
        await ctx.emit(InferenceStarted(iteration=iteration, model=request.model))
        t0 = time.perf_counter()
        deadline = ctx.deadline()
        try:
            async with deadline:
                response = await call_model(
                    turn.provider, request, iteration, ctx.emit, StreamSettings.from_env()
                )
        except TurnError:
            raise
        except TimeoutError as e:
            if deadline.expired():
                return None
            raise TurnError.retryable(f"provider {turn.provider.name} timed out: {e}") from e
        except Exception as e:
            raise TurnError.other(f"provider {turn.provider.name} failed: {type(e).__name__}: {e}") from e
        st.iterations = iteration
        self._accounting.add_usage(response)
        await ctx.emit(
            InferenceFinished(
                iteration=iteration,
                stop_reason=response.stop_reason.value,
                tokens_in=response.usage.input_tokens,
                tokens_out=response.usage.output_tokens,
                cost=response.cost,
                total_tokens_in=st.tokens_in,
                total_tokens_out=st.tokens_out,
                total_cost=st.cost,
                duration_ms=int((time.perf_counter() - t0) * 1000),
            )
        )
        await self._accounting.after_call(response, f"model call {iteration}")
        return response

    async def _answered(
        self, request: ProviderRequest, response: ProviderResponse, iteration: int
    ) -> StepResult:
        """The model's answer taken into the conversation; the step goes on to its tools or ends."""
        stop = await self._take(request, response)
        text = response.text()
        uses = response.tool_uses()
        stuck = self._note_calls(uses)
        if stuck is not None:
            self._tools.close_open_uses(uses, stuck)
            return await self._finish(ExitReason.custom("stuck_detected"), iteration, text, stop)
        await self._ctx.checkpoint()
        decision = await self._ctx.fire(
            HookPoint.POST_INFERENCE,
            model_output=Content.blocks([part_to_block(p) for p in response.content]),
        )
        if decision.halt is not None:
            self._tools.close_open_uses(uses, "not run: the turn was halted by an observer")
            return await self._finish(ExitReason.observer_halt(decision.halt), iteration, text, stop)
        if stop in (StopReason.REFUSAL, StopReason.CONTENT_FILTER):
            self._tools.close_open_uses(uses, "not run: the model's response was stopped")
            reason = ExitReason.safety_stop(response.stop_detail or stop.value)
            return await self._finish(reason, iteration, text, stop)
        if not uses:
            if stop is StopReason.TOOL_USE:
                raise TurnError.model("the model stopped for tool use but asked for no tool")
            if stop not in _CONTINUING:
                return await self._finish(ExitReason.complete(), iteration, text, stop)
        return await self._act(uses, iteration, text, stop)

    async def _take(self, request: ProviderRequest, response: ProviderResponse) -> StopReason:
        """Record the model's answer: its stop reason, final text and message (a truncated
        output or an exceeded context window is a model error)."""
        st = self._ctx.state
        stop = response.stop_reason
        st.last_stop = stop.value
        if stop is StopReason.MAX_TOKENS:
            raise TurnError.model("output truncated")
        if stop is StopReason.CONTEXT_WINDOW_EXCEEDED:
            raise TurnError.model("context exceeded")
        text = response.text()
        shown: list[ContentPart] = [p for p in response.content if isinstance(p, TextPart | ImagePart)]
        if text or any(isinstance(p, ImagePart) for p in shown):
            st.final_text = text
            st.final_parts = shown
        if response.content:
            st.messages.append(ProviderMessage(role=Role.ASSISTANT, content=list(response.content)))
        if response.compaction is not None or any(isinstance(p, CompactionPart) for p in response.content):
            await self._accounting.provider_compacted(request, response)
        return stop

    async def _act(
        self, uses: list[ToolUsePart], iteration: int, text: str, stop: StopReason | None
    ) -> StepResult:
        """The second half of a step: run the tools asked for, then check the limits and
        compact; a step resumed from a checkpoint starts here."""
        ctx = self._ctx
        executions: list[ToolExecution] = []
        exit_reason: ExitReason | None = None
        if uses:
            awaiting = self._approvals.pending(uses)
            if awaiting:
                self._approvals.awaiting = awaiting
                await ctx.emit(TurnSuspended(iteration=iteration, calls=awaiting))
                await ctx.checkpoint()
                return StepResult(iteration=iteration, text=text, stop_reason=stop, awaiting=awaiting)
            executions, exit_reason = await self._tools.run(uses)
            if exit_reason is None and handed_off([ex.declared for ex in executions]):
                exit_reason = HANDOFF_EXIT  # the conversation is the other agent's now
        if exit_reason is None:
            exit_reason = self._accounting.limit_exit()
        if exit_reason is None:
            decision = await ctx.fire(HookPoint.EXIT_CHECK)
            if decision.halt is not None:
                exit_reason = ExitReason.observer_halt(decision.halt)
        if exit_reason is not None:
            return await self._finish(exit_reason, iteration, text, stop, executions)
        await self._accounting.compact_if_due()
        if ctx.unsaved:  # else the last call's checkpoint already resumes to here
            await ctx.checkpoint()
        return StepResult(iteration=iteration, text=text, stop_reason=stop, tool_executions=executions)

    def _ended_before_resume(self) -> ExitReason | None:
        """How a resumed turn had ended when its last checkpoint is the model's final answer
        (its process was lost before it finished): never call the model again for it."""
        st = self._ctx.state
        if not st.messages or st.messages[-1].role is not Role.ASSISTANT or st.last_stop is None:
            return None
        if st.last_stop in (s.value for s in _CONTINUING):
            return None
        if st.last_stop in (StopReason.REFUSAL.value, StopReason.CONTENT_FILTER.value):
            return ExitReason.safety_stop(st.last_stop)
        return ExitReason.complete()

    def _note_calls(self, uses: list[ToolUsePart]) -> str | None:
        """Count repeated identical calls; why the step stops when they count as stuck."""
        st = self._ctx.state
        for use in uses:
            sig = call_signature(use.name, use.input)
            if sig == st.last_call:
                st.last_call_repeats += 1
            else:
                st.last_call, st.last_call_repeats = sig, 1
            if st.last_call_repeats >= self._ctx.turn.limits.stuck_threshold:
                return (
                    f"not run: the same call was repeated {st.last_call_repeats} times in a row "
                    "(loop detected)"
                )
        return None

    async def _deliver_signals(self) -> ExitReason | None:
        """Apply the signals delivered since the last boundary; an exit reason for ``cancel``."""
        ctx = self._ctx
        while self._inbox:
            outcome = apply_signal(ctx.state, *self._inbox.pop(0))
            if outcome.overrides:
                ctx.cfg = overridden(ctx.cfg, outcome.overrides)
            if outcome.rewrote is not None and ctx.journaled is not None:
                ctx.journaled = min(ctx.journaled, outcome.rewrote)
            await ctx.emit(outcome.event)
            if outcome.exit is not None:
                return outcome.exit
        return None

    async def _finish(
        self,
        reason: ExitReason,
        iteration: int,
        text: str = "",
        stop: StopReason | None = None,
        executions: list[ToolExecution] | None = None,
    ) -> StepResult:
        ctx = self._ctx
        st = ctx.state
        st.exit_reason = reason
        if reason.kind == "budget_exhausted" or (reason.kind == "observer_halt" and ctx.budget_halt):
            workflow = workflow_of(st.input, ctx.turn.name)
            await ctx.observe(BudgetAction(workflow=workflow, action=BudgetDecision.halt_workflow()))
        if not _quiet(reason):
            message = f"turn ended: {reason}"
            st.effects.append(
                Log(
                    level=LogLevel.WARN,
                    message=message,
                    data={"turns_used": st.iterations, "cost": str(st.cost)},
                )
            )
            log.info("%s (agent %s)", message, ctx.turn.name)
        await ctx.checkpoint()
        return StepResult(
            iteration=iteration,
            text=text,
            stop_reason=stop,
            tool_executions=executions or [],
            is_complete=True,
            exit_reason=reason,
        )
