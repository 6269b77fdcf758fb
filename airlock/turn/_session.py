"""TurnSession: the ReAct loop, one model call (plus the tools it asked for) per step.

``NeuronTurn.execute`` is ``start()`` + ``run()``: there is exactly one loop, this one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue, TypeAdapter, ValidationError

from airlock.errors import AirlockError
from airlock.spec import HISTORY_KEY
from layer0 import (
    AgentId,
    BudgetAction,
    BudgetDecision,
    BudgetWarning,
    CompactionComplete,
    Content,
    ContextPressure,
    CostIncurred,
    ExitReason,
    HookContext,
    HookPoint,
    Log,
    LogLevel,
    PreCompactionFlush,
    ProviderManaged,
    Scope,
    ToolCallRecord,
    TurnError,
    TurnMetadata,
    TurnOutput,
    WriteMemory,
)

from ._context import as_compaction, estimate_tokens
from ._effect_tools import EFFECT_BACKFILL, EffectToolError, effect_from_call, effect_validation_error
from ._events import (
    ContextCompacted,
    InferenceFinished,
    InferenceStarted,
    LifecycleEvent,
    LifecyclePayload,
    PendingCall,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnLog,
    TurnPaused,
    TurnStarted,
    TurnSuspended,
)
from ._hooks import BudgetHook, HookDecision
from ._memory_tools import memory_context
from ._registry import ToolOutcome, ToolRegistry
from ._run_log import dropped_line, due_warnings, note, workflow_of
from ._signals import apply_signal, overridden
from ._state import SessionState, StepResult, ToolExecution
from ._tool import ToolContext
from ._trigger import trigger_note
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
    ToolResultPart,
    ToolSchema,
    ToolUsePart,
    block_to_part,
    part_to_block,
)

if TYPE_CHECKING:
    from ._events import EventSink
    from ._neuron import NeuronTurn

log = logging.getLogger(__name__)

#: Model calls allowed when neither TurnConfig nor the agent's defaults set ``max_turns``.
DEFAULT_MAX_TURNS = 25
#: Stop reasons after which the model's call did not end the turn though it asked for no tool.
_CONTINUING = (StopReason.PAUSE_TURN, StopReason.COMPACTION)

_HISTORY = TypeAdapter(list[ProviderMessage])


class TurnSessionError(AirlockError):
    """Raised when a session is misused (e.g. ``step()`` while another step is running)."""


class _DeadlineReached(Exception):
    """Internal: the turn's max_duration expired while awaiting a hook or compaction."""


@dataclass(frozen=True)
class ResolvedConfig:
    """TurnConfig merged over the agent's defaults, as the loop uses it."""

    model: str | None
    system: str | None
    tools: list[ToolSchema]
    offered: frozenset[str]
    max_turns: int
    max_cost: Decimal | None
    max_duration_ms: int | None
    extra: dict[str, Any] = field(default_factory=dict)


def call_signature(name: str, input: JsonValue) -> str:
    """A tool call's identity for loop detection: name plus canonical JSON input."""
    return name + ":" + json.dumps(input, sort_keys=True, separators=(",", ":"))


class TurnSession:
    """One turn in progress; step it, run it, pause it, snapshot it.

    Built by ``NeuronTurn.start`` or ``NeuronTurn.resume``, not directly.
    """

    def __init__(self, turn: NeuronTurn, state: SessionState, events: EventSink | None = None) -> None:
        self._turn = turn
        self._state = state
        self._events = events
        self._cfg = overridden(turn.resolve_config(state.input), state.overrides)
        self._pause_requested = False
        self._awaiting: list[PendingCall] = []
        self._inbox: list[tuple[str, JsonValue]] = []
        #: Messages and tool records the latest checkpoint carried (a checkpoint sends only
        #: the ones after); whether the state changed since.
        self._journaled: int | None = None
        self._records_journaled = 0
        self._unsaved = False
        self._announced = False
        if state.started and state.iterations:  # a provider keeping its place follows the snapshot
            resume_at = getattr(turn.provider, "resume_at", None)
            if callable(resume_at):
                resume_at(state.iterations)
        self._boundary: SessionState | None = None
        self._step_t0: float | None = None
        self._step_base_ms = 0.0
        #: A BudgetHook halted the turn (its exit is the budget's decision).
        self._budget_halt = False
        self._output: TurnOutput | None = None
        if state.exit_reason is not None:
            self._output = self._build_output()

    # -- public surface ---------------------------------------------------------------

    @property
    def state(self) -> SessionState:
        """A snapshot at the latest step boundary (JSON-serializable; resume from it)."""
        return (self._boundary or self._state).model_copy(deep=True)

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
        return self._cfg

    @property
    def pause_requested(self) -> bool:
        """Whether a pause is pending."""
        return self._pause_requested

    @property
    def awaiting(self) -> list[PendingCall]:
        """Tool calls waiting for a person's approval: the session is suspended before them
        (``run`` returns None; resume its ``state`` with them decided)."""
        return list(self._awaiting)

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

    async def run(self) -> TurnOutput | None:
        """Step until the turn ends (its output) or a pause is honoured (None)."""
        while self._output is None:
            if self._awaiting:
                return None
            if self._pause_requested:
                self._pause_requested = False
                await self._emit(TurnPaused(iteration=self._state.iterations))
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
            TurnSessionError: a step is already running.
        """
        if self._output is not None:
            return StepResult(
                iteration=self._state.iterations,
                text="",
                is_complete=True,
                exit_reason=self._output.exit_reason,
                output=self._output,
            )
        if self._step_t0 is not None:
            raise TurnSessionError("a step of this session is already running")
        if self._awaiting:
            names = ", ".join(c.name for c in self._awaiting)
            raise TurnSessionError(
                f"the session waits for approval of {names}; resume its state once decided"
            )
        st = self._state
        self._boundary = st.model_copy(
            update={
                "messages": list(st.messages),
                "tool_records": list(st.tool_records),
                "effects": list(st.effects),
                "completed": list(st.completed),
                "approved": list(st.approved),
                "overrides": dict(st.overrides),
            }
        )
        self._step_base_ms = st.elapsed_ms
        self._step_t0 = time.perf_counter()
        try:
            result = await self._step()
        except asyncio.CancelledError:
            self._close_dangling("not run: the turn was cancelled")
            raise
        finally:
            st.elapsed_ms = self._elapsed_ms()
            self._step_t0 = None
            self._boundary = None
        if result.is_complete:
            self._output = self._build_output()
            result = result.model_copy(update={"output": self._output})
            if result.exit_reason is not None and result.exit_reason.kind != "complete":
                await self._emit(TurnLog(level="warn", message=f"turn ended: {result.exit_reason}"))
        return result

    def cancelled_output(self) -> TurnOutput:
        """A TurnOutput for a cancelled turn: ``custom("cancelled")`` with the metadata so far.

        Its only effect is a log line; history and tool effects are not declared.
        """
        st = self._state
        return TurnOutput(
            message=self._message(),
            exit_reason=ExitReason.custom("cancelled"),
            metadata=self._metadata(self._elapsed_ms()),
            effects=[Log(level=LogLevel.WARN, message="turn cancelled", data={"turns_used": st.iterations})],
        )

    # -- the loop -------------------------------------------------------------------------

    def _elapsed_ms(self) -> float:
        if self._step_t0 is None:
            return self._state.elapsed_ms
        return self._step_base_ms + (time.perf_counter() - self._step_t0) * 1000

    def _deadline(self) -> asyncio.Timeout:
        limit = self._cfg.max_duration_ms
        if limit is None:
            return asyncio.timeout(None)
        return asyncio.timeout(max(0.0, limit - self._elapsed_ms()) / 1000)

    async def _step(self) -> StepResult:
        try:
            return await self._step_body()
        except _DeadlineReached:
            self._close_dangling("not run: the turn's time limit was reached")
            return await self._finish(ExitReason.timeout(), iteration=self._state.iterations)

    async def _step_body(self) -> StepResult:
        st = self._state
        turn = self._turn
        if not st.started:
            await self._assemble()
        elif not self._announced:
            self._announced = True
            await self._emit(TurnStarted(resumed=True))
            await self._checkpoint()
        uses = st.open_uses()
        if uses:  # resumed inside a step: the model call is done, its tools are not
            return await self._act(uses, st.iterations, "", None)
        ended = self._ended_before_resume()
        if ended is not None:
            return await self._finish(ended, st.iterations, st.final_text)
        signalled = await self._deliver_signals()
        if signalled is not None:
            return await self._finish(signalled, iteration=0)
        cfg = self._cfg
        early = self._limit_exit()
        if early is not None:
            return await self._finish(early, iteration=0)
        iteration = st.iterations + 1

        decision = await self._fire(HookPoint.PRE_INFERENCE)
        if decision.halt is not None:
            return await self._finish(ExitReason.observer_halt(decision.halt), iteration=0)

        request = ProviderRequest(
            model=cfg.model,
            messages=list(st.messages),
            tools=cfg.tools,
            max_tokens=turn.max_tokens,
            temperature=turn.temperature,
            system=cfg.system,
            extra=cfg.extra,
        )
        await self._emit(InferenceStarted(iteration=iteration, model=cfg.model))
        t0 = time.perf_counter()
        deadline = self._deadline()
        try:
            async with deadline:
                response = await turn.provider.complete(request)
        except TurnError:
            raise
        except TimeoutError as e:
            if deadline.expired():
                return await self._finish(ExitReason.timeout(), iteration=iteration)
            raise TurnError.retryable(f"provider {turn.provider.name} timed out: {e}") from e
        except Exception as e:
            raise TurnError.other(f"provider {turn.provider.name} failed: {type(e).__name__}: {e}") from e
        st.iterations = iteration
        self._add_usage(response)
        await self._emit(
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
        await self._after_call(response, f"model call {iteration}")
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
            await self._provider_compacted(request, response)
        uses = response.tool_uses()
        stuck = self._note_calls(uses)
        if stuck is not None:
            self._close_open_uses(uses, stuck)
            return await self._finish(ExitReason.custom("stuck_detected"), iteration, text, stop)
        await self._checkpoint()

        decision = await self._fire(
            HookPoint.POST_INFERENCE,
            model_output=Content.blocks([part_to_block(p) for p in response.content]),
        )
        if decision.halt is not None:
            self._close_open_uses(uses, "not run: the turn was halted by an observer")
            return await self._finish(ExitReason.observer_halt(decision.halt), iteration, text, stop)
        if stop in (StopReason.REFUSAL, StopReason.CONTENT_FILTER):
            self._close_open_uses(uses, "not run: the model's response was stopped")
            return await self._finish(
                ExitReason.safety_stop(response.stop_detail or stop.value), iteration, text, stop
            )
        if not uses:
            if stop is StopReason.TOOL_USE:
                raise TurnError.model("the model stopped for tool use but asked for no tool")
            if stop not in _CONTINUING:
                return await self._finish(ExitReason.complete(), iteration, text, stop)
        return await self._act(uses, iteration, text, stop)

    async def _act(
        self, uses: list[ToolUsePart], iteration: int, text: str, stop: StopReason | None
    ) -> StepResult:
        """The second half of a step: run the tools asked for, then check the limits and
        compact; a step resumed from a checkpoint starts here."""
        st = self._state
        turn = self._turn
        executions: list[ToolExecution] = []
        exit_reason: ExitReason | None = None
        if uses:
            awaiting = self._needs_approval(uses)
            if awaiting:
                self._awaiting = awaiting
                await self._emit(TurnSuspended(iteration=iteration, calls=awaiting))
                await self._checkpoint()
                return StepResult(iteration=iteration, text=text, stop_reason=stop, awaiting=awaiting)
            executions, exit_reason = await self._run_tools(uses)
        if exit_reason is None:
            exit_reason = self._limit_exit()
        if exit_reason is None:
            decision = await self._fire(HookPoint.EXIT_CHECK)
            if decision.halt is not None:
                exit_reason = ExitReason.observer_halt(decision.halt)
        if exit_reason is not None:
            return await self._finish(exit_reason, iteration, text, stop, executions)
        if turn.context.should_compact(st.messages, turn.context_limit):
            await self._compact()
        if self._unsaved:  # else the last call's checkpoint already resumes to here
            await self._checkpoint()
        return StepResult(iteration=iteration, text=text, stop_reason=stop, tool_executions=executions)

    def _ended_before_resume(self) -> ExitReason | None:
        """How a resumed turn had ended when its last checkpoint is the model's final answer
        (its process was lost before it finished): never call the model again for it."""
        st = self._state
        if not st.messages or st.messages[-1].role is not Role.ASSISTANT or st.last_stop is None:
            return None
        if st.last_stop in (s.value for s in _CONTINUING):
            return None
        if st.last_stop in (StopReason.REFUSAL.value, StopReason.CONTENT_FILTER.value):
            return ExitReason.safety_stop(st.last_stop)
        return ExitReason.complete()

    def _note_calls(self, uses: list[ToolUsePart]) -> str | None:
        """Count repeated identical calls; why the step stops when they count as stuck."""
        st = self._state
        for use in uses:
            sig = call_signature(use.name, use.input)
            if sig == st.last_call:
                st.last_call_repeats += 1
            else:
                st.last_call, st.last_call_repeats = sig, 1
            if st.last_call_repeats >= self._turn.limits.stuck_threshold:
                return (
                    f"not run: the same call was repeated {st.last_call_repeats} times in a row "
                    "(loop detected)"
                )
        return None

    def _needs_approval(self, uses: list[ToolUsePart]) -> list[PendingCall]:
        """The open step's calls that wait for approval (none ran, none was approved)."""
        gate = self._turn.approval
        if gate is None:
            return []
        st = self._state
        settled = {ex.tool_use_id for ex in st.completed} | set(st.approved)
        registry = self._turn.tools
        pending = []
        for use in uses:
            if use.id in settled or use.name not in self._cfg.offered:
                continue
            risks = registry.risks(use.name)
            if gate.needs(use.name, risks):
                pending.append(
                    PendingCall(tool_use_id=use.id, name=use.name, input=use.input, risks=list(risks))
                )
        return pending

    async def _deliver_signals(self) -> ExitReason | None:
        """Apply the signals delivered since the last boundary; an exit reason for ``cancel``."""
        while self._inbox:
            outcome = apply_signal(self._state, *self._inbox.pop(0))
            if outcome.overrides:
                self._cfg = overridden(self._cfg, outcome.overrides)
            if outcome.rewrote is not None and self._journaled is not None:
                self._journaled = min(self._journaled, outcome.rewrote)
            await self._emit(outcome.event)
            if outcome.exit is not None:
                return outcome.exit
        return None

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

    def _limit_exit(self) -> ExitReason | None:
        st = self._state
        cfg = self._cfg
        if cfg.max_duration_ms is not None and self._elapsed_ms() >= cfg.max_duration_ms:
            return ExitReason.timeout()
        if cfg.max_cost is not None and st.cost >= cfg.max_cost:
            return ExitReason.budget_exhausted()
        if st.iterations >= cfg.max_turns:
            return ExitReason.max_turns()
        return None

    async def _assemble(self) -> None:
        st = self._state
        history: list[ProviderMessage] = []
        session = st.input.session
        reader = self._turn.state
        if session is not None and reader is not None:
            try:
                raw = await reader.read(Scope.session(session), HISTORY_KEY)
            except Exception as e:
                raise TurnError.context_assembly(f"cannot read the history of session {session}: {e}") from e
            if raw is not None:
                try:
                    history = _HISTORY.validate_python(raw)
                except ValidationError as e:
                    raise TurnError.context_assembly(
                        f"the history of session {session} is unreadable: {e.error_count()} error(s), "
                        f"first: {e.errors()[0]['msg']}"
                    ) from e
        parts = [block_to_part(b) for b in st.input.message.as_blocks()]
        if not parts:
            raise TurnError.context_assembly("the input message is empty")
        parts = [*await self._preamble(), *parts]
        cone = await self._project_cone()
        if cone is not None:  # the causal past replaces the shared history
            context, size, total = cone
            before = len(history) + 1
            history, parts = [], [*context, *parts]
            ratio = 1 - size / total if total else 0.0
            await self._emit(
                ContextCompacted(
                    strategy="causal_cone",
                    messages_before=before,
                    messages_after=1,
                    cone_size=size,
                    cone_total=total,
                    compression_ratio=ratio,
                )
            )
        st.messages = [*history, ProviderMessage(role=Role.USER, content=parts)]
        st.started = True
        self._announced = True
        await self._emit(TurnStarted())
        await self._checkpoint()

    async def _preamble(self) -> list[TextPart]:
        """What goes before the input message: the trigger stated (unless a person sent it),
        then the memory the agent asked for (``memory.context_keys``), session before global."""
        st = self._state
        note_text = trigger_note(st.input)
        parts = [TextPart(text=note_text)] if note_text is not None else []
        try:
            lines = await memory_context(self._turn.state, st.input.session, self._turn.memory_keys)
        except Exception as e:
            raise TurnError.context_assembly(f"cannot read the memory the context starts with: {e}") from e
        parts += [TextPart(text=line) for line in lines]
        return parts

    async def _project_cone(self) -> tuple[list[TextPart], int, int] | None:
        project = getattr(self._turn.context, "project", None)
        if project is None:
            return None
        try:
            result: tuple[list[TextPart], int, int] | None = await project(self._turn.state)
        except Exception as e:
            raise TurnError.context_assembly(f"cannot read the turn's causal cone: {e}") from e
        return result

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

    async def _finish(
        self,
        reason: ExitReason,
        iteration: int,
        text: str = "",
        stop: StopReason | None = None,
        executions: list[ToolExecution] | None = None,
    ) -> StepResult:
        st = self._state
        st.exit_reason = reason
        if reason.kind == "budget_exhausted" or (reason.kind == "observer_halt" and self._budget_halt):
            workflow = workflow_of(st.input, self._turn.name)
            await self._observe(BudgetAction(workflow=workflow, action=BudgetDecision.halt_workflow()))
        if reason.kind != "complete":
            message = f"turn ended: {reason}"
            st.effects.append(
                Log(
                    level=LogLevel.WARN,
                    message=message,
                    data={"turns_used": st.iterations, "cost": str(st.cost)},
                )
            )
            log.info("%s (agent %s)", message, self._turn.name)
        await self._checkpoint()
        return StepResult(
            iteration=iteration,
            text=text,
            stop_reason=stop,
            tool_executions=executions or [],
            is_complete=True,
            exit_reason=reason,
        )

    # -- output -------------------------------------------------------------------------

    def _metadata(self, elapsed_ms: float) -> TurnMetadata:
        st = self._state
        return TurnMetadata(
            tokens_in=st.tokens_in,
            tokens_out=st.tokens_out,
            cost=st.cost,
            turns_used=st.iterations,
            tools_called=list(st.tool_records),
            duration=int(elapsed_ms),
        )

    def _message(self) -> Content:
        """The output message: the final answer's text, and its images when it has any."""
        st = self._state
        if any(isinstance(p, ImagePart) for p in st.final_parts):
            return Content.blocks([part_to_block(p) for p in st.final_parts])
        return Content.text(st.final_text)

    def _build_output(self) -> TurnOutput:
        st = self._state
        assert st.exit_reason is not None
        effects = list(st.effects)
        dropped = dropped_line(st)
        if dropped is not None:
            effects.append(dropped)
        if st.input.session is not None and st.started:
            effects.append(
                WriteMemory(
                    scope=Scope.session(st.input.session),
                    key=HISTORY_KEY,
                    value=[m.model_dump(mode="json") for m in st.messages],
                )
            )
        return TurnOutput(
            message=self._message(),
            exit_reason=st.exit_reason,
            metadata=self._metadata(st.elapsed_ms),
            effects=effects,
        )

    # -- accounting, compaction, lifecycle --------------------------------------------------

    def _add_usage(self, response: ProviderResponse) -> None:
        """Count a model call's tokens and cost in the turn's."""
        st = self._state
        st.tokens_in += response.usage.input_tokens
        st.tokens_out += response.usage.output_tokens
        if response.cost is not None:
            st.cost += response.cost

    async def _after_call(self, response: ProviderResponse, what: str) -> None:
        """After a model call was counted: its retries logged, its cost and the budget
        warnings it crossed reported."""
        st = self._state
        if response.retries:
            self._run_log(
                LogLevel.WARN,
                f"{what}: provider {self._turn.provider.name} retried it {len(response.retries)} time(s) "
                f"({', '.join(response.retries)})",
                {"retries": list(response.retries)},
            )
        if self._observed():
            cost = response.cost if response.cost is not None else Decimal(0)
            await self._observe(CostIncurred(agent=AgentId(self._turn.name), cost=cost, cumulative=st.cost))
        limit = self._cfg.max_cost
        for fraction in due_warnings(st.cost, limit, self._turn.limits.budget_warnings, st.budget_warned):
            assert limit is not None
            st.budget_warned.append(fraction)
            workflow = workflow_of(st.input, self._turn.name)
            await self._observe(BudgetWarning(workflow=workflow, spent=st.cost, limit=limit))

    async def _compact(self) -> None:
        """Compact the conversation with the turn's strategy, counting its model calls."""
        st = self._state
        turn = self._turn
        strategy = turn.context
        name = type(strategy).__name__
        agent = AgentId(turn.name)
        before = strategy.token_estimate(st.messages)
        limit = turn.context_limit
        fill = round(100 * before / limit, 2) if limit > 0 else 100.0
        pressure = ContextPressure(
            agent=agent, fill_percent=fill, tokens_used=before, tokens_available=max(limit, 0)
        )
        await self._observe(pressure)
        session = st.input.session
        scope = Scope.session(session) if session is not None else Scope.global_()
        await self._observe(PreCompactionFlush(agent=agent, scope=scope))
        deadline = self._deadline()
        try:
            async with deadline:
                done = as_compaction(await strategy.compact(list(st.messages)))
        except TimeoutError:
            if deadline.expired():
                raise _DeadlineReached from None
            raise
        for call in done.calls:
            self._add_usage(call)
            await self._after_call(call, f"the {name} strategy's summary call")
        sizes = {"messages_before": len(st.messages), "messages_after": len(done.messages)}
        await self._emit(ContextCompacted(strategy=name, **sizes))
        freed = max(0, before - strategy.token_estimate(done.messages))
        if done.calls or done.messages != st.messages:  # a strategy finding no cut changes nothing
            self._run_log(
                LogLevel.INFO,
                f"context compacted by {name}: {len(st.messages)} → {len(done.messages)} messages, "
                f"about {freed} tokens freed",
                {"strategy": name, "tokens_freed": freed, "model_calls": len(done.calls)},
            )
        st.messages = done.messages
        self._journaled = 0
        self._unsaved = True
        await self._observe(CompactionComplete(agent=agent, strategy=name, tokens_freed=freed))

    async def _provider_compacted(self, request: ProviderRequest, response: ProviderResponse) -> None:
        """The provider compacted the context server-side during ``response``'s call."""
        st = self._state
        report = response.compaction
        before = report.tokens_before if report is not None else None
        after = report.tokens_after if report is not None else None
        before = before if before is not None else estimate_tokens(request.messages)
        after = after if after is not None else estimate_tokens(st.messages)
        summaries = [p.summary for p in response.content if isinstance(p, CompactionPart) and p.summary]
        provider = self._turn.provider.name
        self._run_log(
            LogLevel.INFO,
            f"provider {provider} compacted the context server-side: about {before} → {after} tokens",
            {"provider": provider, "tokens_before": before, "tokens_after": after},
        )
        await self._observe(
            ProviderManaged(
                agent=AgentId(self._turn.name),
                provider=provider,
                tokens_before=before,
                tokens_after=after,
                summary=Content.text(summaries[-1]) if summaries else None,
            )
        )

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

    # -- hooks and events -----------------------------------------------------------------

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
                raise _DeadlineReached from None
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
