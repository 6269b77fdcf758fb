"""TurnSession: the ReAct loop, one model call (plus the tools it asked for) per step.

``NeuronTurn.execute`` is ``start()`` + ``run()``: there is exactly one loop, this one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from pydantic import JsonValue, TypeAdapter, ValidationError

from airlock.spec import HISTORY_KEY
from layer0 import (
    BudgetAction,
    BudgetDecision,
    Content,
    ExitReason,
    HookPoint,
    Log,
    LogLevel,
    Scope,
    TurnError,
    TurnMetadata,
    TurnOutput,
    WriteMemory,
)

from ._config import DeadlineReached, ResolvedConfig, TurnSessionError
from ._events import (
    ContextCompacted,
    InferenceFinished,
    InferenceStarted,
    PendingCall,
    TurnLog,
    TurnPaused,
    TurnStarted,
    TurnSuspended,
)
from ._memory_tools import memory_context
from ._run_log import dropped_line, workflow_of
from ._session_tools import SessionTools
from ._signals import apply_signal, overridden
from ._state import SessionState, StepResult, ToolExecution
from ._trigger import trigger_note
from ._types import (
    CompactionPart,
    ContentPart,
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    Role,
    StopReason,
    TextPart,
    ToolUsePart,
    block_to_part,
    part_to_block,
)

if TYPE_CHECKING:
    from ._events import EventSink
    from ._neuron import NeuronTurn

log = logging.getLogger(__name__)

#: Stop reasons after which the model's call did not end the turn though it asked for no tool.
_CONTINUING = (StopReason.PAUSE_TURN, StopReason.COMPACTION)

_HISTORY = TypeAdapter(list[ProviderMessage])


def call_signature(name: str, input: JsonValue) -> str:
    """A tool call's identity for loop detection: name plus canonical JSON input."""
    return name + ":" + json.dumps(input, sort_keys=True, separators=(",", ":"))


class TurnSession(SessionTools):
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

    def withdraw_pause(self) -> None:
        """Take back a pause ``run()`` has not honoured yet (nothing happens otherwise)."""
        self._pause_requested = False

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

    async def _step(self) -> StepResult:
        try:
            return await self._step_body()
        except DeadlineReached:
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

        extra = cfg.extra
        if cfg.tools:
            extra = {**extra, **turn.tool_choice.request_extra(iteration, st.messages)}
        request = ProviderRequest(
            model=cfg.model,
            messages=list(st.messages),
            tools=cfg.tools,
            max_tokens=turn.max_tokens,
            temperature=turn.temperature,
            system=cfg.system,
            extra=extra,
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
