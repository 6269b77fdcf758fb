"""JobService: the controller's scheduler — durable queue, bounded workers, effects.

A submitted job is written to the store before ``submit`` returns. ``concurrency`` workers
take queued jobs from a :class:`FairQueue`; each job runs as its own task so it can be
cancelled (by a user, or by its ``max_duration``) without disturbing its worker, and the
cancellation tears its sandbox down before the job is marked. After the turn, its effects
go through the layer0 effect executor: memory writes to the StateStore, delegates and
handoffs to child jobs (each in a sandbox of its own agent, with that agent's policy),
signals to the store, log effects to the job's log. The sandbox is untrusted, so each
effect is first checked against the declaring agent's ``effects:`` policy; a refused one is
recorded with status ``refused`` and not applied (the job still succeeds). A session's
conversation history is read from the StateStore and sent with the next turn of that session
as a read-only snapshot.

Each execution of a turn is followed by a :class:`JobJournal` (its checkpoints and turn
records); a job whose sandbox or controller is lost resumes from its last checkpoint. The
service's other parts are mixins over :class:`ServiceCore`: ``_service_records`` (the
records the controller writes, resumes), ``_service_approvals`` (waiting for and deciding
approvals), ``_service_controls`` (pause/step/resume/inspect, signals, the audit).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from airlock.controller.effects import EffectExecutor, EffectOutcome, EffectReport
from airlock.errors import AirlockError, ConfigError, shorten
from airlock.policy.effects import EffectContext, check_effect
from airlock.sandbox import SandboxEvent, TurnHandle, state_snapshot
from airlock.spec import AgentSpec
from airlock.turn import (
    DEFAULT_MAX_TURNS,
    SessionState,
    SuspendedForApproval,
    TurnLog,
    TurnPaused,
    TurnStarted,
)
from layer0 import (
    AgentId,
    Effect,
    EnvError,
    Layer0Error,
    Log,
    LogLevel,
    OrchError,
    Scope,
    TurnInput,
    TurnOutput,
)

from ._durable import lost_sandbox, resume_state
from ._journal import JobJournal
from ._model import (
    ACTIVE_STATES,
    ChildJobChanged,
    EffectApplied,
    FixedPointRun,
    Job,
    JobError,
    JobEvent,
    JobEventData,
    JobFilter,
    JobOrigin,
    JobState,
    LogLine,
    SandboxActivity,
)
from ._orchestrator import JobOrchestrator
from ._queue import QueuedJob
from ._service_approvals import ApprovalsMixin
from ._service_controls import ControlsMixin
from ._service_files import FilesMixin, announced, checked_input_files

_log = logging.getLogger("airlock.jobs")

#: Why a running job was interrupted when the controller stops.
_STOPPED = "the controller stopped while the job ran"

#: Extra time a job gets beyond its turn's ``max_duration`` (the input's, else its agent's)
#: by default (sandbox start, effects), when the submitter gives no ``max_duration``.
DEFAULT_SLACK_MS = 60_000


_LOG_LEVELS = {level.value: level for level in LogLevel}


def _event_data(event: SandboxEvent) -> JobEventData:
    """A sandbox event as the job records it (the turn's log lines as ``log`` events; a level
    outside layer0's is recorded as ``info``)."""
    if isinstance(event, TurnLog):
        level = _LOG_LEVELS.get(event.level, LogLevel.INFO)
        return LogLine(level=level, message=event.message, source="turn")
    return SandboxActivity(event=event)


def _job_limit_ms(agent: AgentSpec, input: TurnInput) -> int | None:
    """A job's limit: its turn's ``max_duration`` (the input's, else the agent's) plus slack."""
    turn = agent.max_duration_for(input)
    return turn + DEFAULT_SLACK_MS if turn is not None else None


def _max_turns(agent: AgentSpec, input: TurnInput) -> int:
    """The model calls a turn may make: its input's max_turns, else its agent's, else the loop's
    default (a checkpoint claiming more is refused)."""
    for config in (input.config, agent.defaults):
        if config is not None and config.max_turns is not None:
            return config.max_turns
    return DEFAULT_MAX_TURNS


def _error_of(e: BaseException) -> JobError:
    return JobError.raised(e)


class JobService(ApprovalsMixin, ControlsMixin, FilesMixin):
    """Accepts, schedules, runs and records jobs. Use as an async context manager.

    Args:
        store: the durable job record.
        runner: runs agents' turns in sandboxes.
        state: where memory effects, session histories and the turn records live.
        settings: concurrency and limits.
        audit_key: seals the turn records (``jobs verify`` then detects a record rewritten
            with its hash chain recomputed); None: records are hash-chained only.
    """

    # -- life --------------------------------------------------------------------------------

    async def __aenter__(self) -> JobService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Recover from a previous controller, then start the workers.

        The sandboxes of jobs the previous controller held are reaped (their owner process is
        gone). A submitted job whose turn was provisioning or running is queued to resume
        from its last checkpoint in a fresh sandbox (within its agent's ``max_resumes``);
        the others are marked interrupted. Queued jobs are queued again, in order; jobs
        waiting for approval keep waiting (their timeouts run again).
        """
        held = await self.store.held()
        if held:
            removed = "; ".join(await self.runner.reap())
            log = (
                "interrupted: the controller stopped while this job ran; "
                f"orphaned sandboxes reaped at restart ({removed})"
            )
            keep = [job for job in held if await self._resumable_after_restart(job)]
            self.recovered = await self.store.recover(_STOPPED, log, keep=[j.id for j in keep])
            for job in keep:
                why = f"the controller restarted; its sandboxes were reaped ({removed})"
                await self._resumed(job, "restart", why, into=JobState.QUEUED)
        elif self.runner.config.pool.size:  # a crashed controller's pool members
            await self.runner.reap()
        for line in await self.runner.warm():
            _log.info("warm pool: not pooled: %s", line)
        for job in await self.store.queued():
            self._queue.push(QueuedJob(job.id, job.queue, job.session))
        waiting = JobFilter(states=frozenset({JobState.AWAITING_APPROVAL}), limit=1000)
        for job in await self.store.find(waiting):
            if job.approval is not None and job.origin == "submit":
                self._arm_approval_timeout(job.id, job.approval)
        self._workers = [
            asyncio.create_task(self._worker(), name=f"airlock-worker-{i}")
            for i in range(self.settings.concurrency)
        ]

    async def stop(self) -> None:
        """Stop: running jobs are cancelled (sandboxes removed); a submitted job whose turn
        can resume (its agent's ``max_resumes`` not spent) is queued again to resume from its
        last checkpoint at the next start, any other is marked interrupted; queued jobs stay
        queued."""
        tasks = dict(self._tasks)  # a cancelled worker forgets its job's task
        fates = {}
        for job_id in tasks:
            job = await self.store.get(job_id)
            resumable = job is not None and await self._resumable_after_restart(job)
            fates[job_id] = (JobState.QUEUED if resumable else JobState.INTERRUPTED, _STOPPED)
        for timer in self._approval_timers.values():
            timer.cancel()
        self._approval_timers.clear()
        for worker in self._workers:
            worker.cancel()
        for job_id, task in tasks.items():
            self._stopping.setdefault(job_id, fates[job_id])
            task.cancel()
        pending = [*self._workers, *tasks.values()]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._workers = []
        await self.runner.aclose()

    # -- the API -----------------------------------------------------------------------------

    async def submit(
        self,
        agent: str,
        input: TurnInput,
        *,
        queue: str | None = None,
        max_duration_ms: int | None = None,
        workflow: str | None = None,
        until_stable: FixedPointRun | None = None,
        files: Sequence[tuple[str, bytes]] = (),
    ) -> Job:
        """Record a job for ``agent`` (durably, with the input ``files`` placed in its
        workspace before each of its turns) and queue it; with ``until_stable``, the agent is
        re-run on its own output until it is stable (a fixed-point job).

        Raises:
            ConfigError: unknown agent (the message lists the configured ones), or a
                non-positive ``max_duration_ms``.
            FileRefused: a file path that leaves the workspace, or a path twice;
                ``FilesOverCap`` beyond :data:`airlock.policy.INPUT_CAPS`.
        """
        return await self._submit(
            agent,
            input,
            queue=queue,
            max_duration_ms=max_duration_ms,
            workflow=workflow,
            awaited=False,
            until_stable=until_stable,
            files=files,
        )

    async def run(
        self,
        agent: str,
        input: TurnInput,
        *,
        on_submitted: Callable[[str], None] | None = None,
        files: Sequence[tuple[str, bytes]] = (),
    ) -> Job:
        """Submit a job for ``agent`` (with input ``files``, as :meth:`submit`) and wait, in
        this process, until it is terminal (``on_submitted`` receives its id first).

        Raises:
            ConfigError: unknown agent.
            FileRefused: as :meth:`submit`.
            BaseException: what the job failed with (its record keeps only kind and message).
        """
        job = await self._submit(
            agent, input, queue=None, max_duration_ms=None, workflow=None, awaited=True, files=files
        )
        if on_submitted is not None:
            on_submitted(job.id)
        try:
            job = await self.wait(job.id)
        finally:
            failure = self._awaited.pop(job.id, None)
        if failure is not None and job.state is JobState.FAILED:
            raise failure
        return job

    async def _submit(
        self,
        agent: str,
        input: TurnInput,
        *,
        queue: str | None,
        max_duration_ms: int | None,
        workflow: str | None,
        awaited: bool,
        until_stable: FixedPointRun | None = None,
        files: Sequence[tuple[str, bytes]] = (),
    ) -> Job:
        config = self.runner.agent(agent)
        files = checked_input_files(files)
        input = announced(input, files, config.input_files)
        if max_duration_ms is not None and max_duration_ms <= 0:
            raise ConfigError(f"max_duration must be positive, got {max_duration_ms} ms")
        if max_duration_ms is None:
            max_duration_ms = _job_limit_ms(config.spec, input) or self.settings.default_max_duration_ms
        job, event = await self.store.create(
            agent=agent,
            input=input,
            queue=queue,
            workflow=workflow,
            max_duration_ms=max_duration_ms,
            fixed_point=until_stable,
            files=files,
        )
        self._notify(event)
        if awaited:
            self._awaited[job.id] = None
        async with self._wake:
            self._queue.push(QueuedJob(job.id, job.queue, job.session))
            self._wake.notify()
        return job

    def _keep_failure(self, job_id: str, error: BaseException) -> None:
        if job_id in self._awaited:
            self._awaited[job_id] = error

    async def find(self, where: JobFilter | None = None) -> list[Job]:
        """Jobs matching ``where``, most recent first."""
        return await self.store.find(where)

    async def logs(self, job_id: str, after_seq: int = 0) -> list[JobEvent]:
        """The job's ``log`` events."""
        await self.get(job_id)
        return await self.store.events(job_id, after_seq=after_seq, kind="log")

    async def watch(self, job_id: str, after_seq: int = 0) -> AsyncIterator[JobEvent]:
        """The job's events after ``after_seq``, then live ones, until it is terminal."""
        job = await self.get(job_id)
        seq = after_seq
        wake = asyncio.Event()
        self._watchers.setdefault(job_id, set()).add(wake)
        try:
            while True:
                wake.clear()
                # The state is read before the events: a job that was terminal then has all
                # its events, the final one included, in this read (the other order could see
                # no event, then the terminal state, and end without sending the last event).
                ended = job.state.terminal or (await self.get(job_id)).state.terminal
                events = await self.store.events(job_id, after_seq=seq)
                for event in events:
                    seq = event.seq
                    yield event
                    if event.terminal:
                        return
                if ended:
                    return
                if not events:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), 5.0)
        finally:
            watchers = self._watchers.get(job_id)
            if watchers is not None:
                watchers.discard(wake)
                if not watchers:
                    del self._watchers[job_id]

    async def wait(self, job_id: str) -> Job:
        """The job once it is terminal.

        Raises:
            JobNotFound: no such job.
        """
        async for _ in self.watch(job_id):
            pass
        return await self.get(job_id)

    async def cancel(self, job_id: str, reason: str = "") -> Job:
        """Cancel a queued or running job; its sandbox is removed before this returns.

        A terminal job is returned unchanged.

        Raises:
            JobNotFound: no such job.
        """
        job = await self.get(job_id)
        if job.state.terminal:
            return job
        detail = f"cancelled: {reason}" if reason else "cancelled by a user"
        if job.state is JobState.AWAITING_APPROVAL and job_id not in self._tasks:
            timer = self._approval_timers.pop(job_id, None)
            if timer is not None:
                timer.cancel()
            cancelled = await self._cancel_unheld(job_id, detail, JobState.AWAITING_APPROVAL)
            if cancelled is not None:
                return cancelled
        async with self._wake:
            queued = self._queue.remove(job_id)
        if queued or (job.state is JobState.QUEUED and job_id not in self._tasks):
            cancelled = await self._cancel_unheld(job_id, detail, JobState.QUEUED)
            if cancelled is not None:
                return cancelled
        task = self._tasks.get(job_id)
        if task is not None:
            self._stopping.setdefault(job_id, (JobState.CANCELLED, detail))
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.shield(asyncio.wait([task]))
        return await self.get(job_id)

    async def _cancel_unheld(self, job_id: str, detail: str, state: JobState) -> Job | None:
        """Cancel a job no worker holds, if it is still ``state``."""
        error = JobError.of("cancelled", detail)
        return await self._transition(
            job_id, JobState.CANCELLED, detail=detail, error=error, only_from=[state]
        )

    @property
    def queued_count(self) -> int:
        """Jobs waiting for a worker."""
        return len(self._queue)

    @property
    def running_count(self) -> int:
        """Jobs holding a worker now."""
        return self._running_now

    # -- workers -------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            async with self._wake:
                while (item := self._queue.pop(self._busy_sessions)) is None:
                    await self._wake.wait()
                if item.session is not None:
                    self._busy_sessions[item.session] += 1
            self._running_now += 1
            self.peak_running = max(self.peak_running, self._running_now)
            try:
                task = asyncio.create_task(self._run_submitted(item.id), name=f"airlock-job-{item.id}")
                self._tasks[item.id] = task
                await asyncio.wait([task])
            finally:
                self._tasks.pop(item.id, None)
                self._running_now -= 1
                async with self._wake:
                    if item.session is not None:
                        self._busy_sessions[item.session] -= 1
                        if self._busy_sessions[item.session] <= 0:
                            del self._busy_sessions[item.session]
                    self._wake.notify_all()

    async def _run_submitted(self, job_id: str) -> None:
        job = await self._transition(job_id, JobState.PROVISIONING, only_from=[JobState.QUEUED])
        if job is None:
            return  # cancelled while it waited
        try:
            await self._run(job, apply_effects=True)
        finally:
            self.weaves.forget(job_id)  # the tree's records stay in the store

    async def _run(self, job: Job, *, apply_effects: bool) -> TurnOutput | None:
        """Run ``job`` (already PROVISIONING) to a terminal state; its output if it has one.

        Submitted jobs apply their turn's effects here; a child's effects are applied by its
        parent's executor as a follow-up (bounded by depth and count).
        """
        limit_s = job.max_duration_ms / 1000 if job.max_duration_ms else None
        current = asyncio.current_task()
        try:
            # Shared bring-up (the local model's first download/compile) is not the job's time.
            await self.runner.prepare(self.runner.agent(job.agent))
            async with asyncio.timeout(limit_s):
                output = await self._turn(job)
                if output is None:
                    return None  # waits for approval, holding no worker and no sandbox
                await self._transition(job.id, JobState.APPLYING_EFFECTS, output=output)
                # A child's effects are applied by its parent's executor, which then ends it.
                if apply_effects:
                    report = await self._apply_effects(job, output)
                    refused = len(report.refused)
                    await self._transition(
                        job.id,
                        JobState.SUCCEEDED,
                        detail=f"exit reason {output.exit_reason.kind}"
                        + (f"; {refused} effect(s) refused" if refused else ""),
                        effects=report.recorded(),
                    )
                return output
        except TimeoutError:
            if current is not None and current.cancelling():
                raise  # pragma: no cover - an outer cancel arrived at the same time
            message = f"ran past its max_duration of {limit_s:g}s; cancelled and its sandbox removed"
            await self._finish_shielded(job.id, JobState.TIMED_OUT, JobError.of("timeout", message))
            return None
        except asyncio.CancelledError:
            default = (JobState.INTERRUPTED, _STOPPED) if apply_effects else (JobState.CANCELLED, "cancelled")
            why, detail = self._stopping.pop(job.id, default)
            if why is JobState.QUEUED:
                reason = f"{detail}; its sandbox was removed"
                await self._shielded(self._resumed(job, "restart", reason, into=JobState.QUEUED))
                raise
            message = f"{detail}; its sandbox was removed"
            await self._finish_shielded(job.id, why, JobError.of(why.value, message))
            raise
        except (Layer0Error, AirlockError) as e:
            self._keep_failure(job.id, e)
            await self._transition(job.id, JobState.FAILED, error=_error_of(e), detail=str(e))
            return None
        except Exception as e:
            self._keep_failure(job.id, e)
            _log.exception("job %s failed unexpectedly", job.id)
            await self._transition(
                job.id, JobState.FAILED, error=_error_of(e), detail=f"{type(e).__name__}: {e}"
            )
            return None

    async def _finish_shielded(self, job_id: str, state: JobState, error: JobError) -> None:
        active = [JobState.QUEUED, *ACTIVE_STATES]
        await self._shielded(
            self._transition(job_id, state, error=error, detail=error.message, only_from=active)
        )

    @staticmethod
    async def _shielded(work: Awaitable[Any]) -> None:
        """Finish ``work`` even when the caller is being cancelled."""
        done = asyncio.ensure_future(work)
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            await done
            raise

    async def _turn(self, job: Job) -> TurnOutput | None:
        """The job's turn to its output, resumed in a fresh sandbox from its last checkpoint
        when the sandbox is lost (within its agent's ``max_resumes``) or when its approval is
        decided; None when a submitted job now waits for approval (it holds no worker)."""
        if job.fixed_point is not None:
            from ._fixed_point import run_until_stable

            return await run_until_stable(self, job)
        return await self._turn_of(job, job.input)

    async def _turn_of(self, job: Job, input: TurnInput) -> TurnOutput | None:
        agent = self.runner.agent(job.agent)
        while True:
            try:
                return await self._execute(job, input)
            except SuspendedForApproval as suspended:
                if not await self._await_approval(job, suspended):
                    if job.origin == "submit":
                        return None
                    await self._wait_decision(job.id)
                job = await self._resumed(job, "approval", "the approval was decided")
            except EnvError as e:
                if not lost_sandbox(e) or not self._progressed.pop(job.id, False):
                    raise  # a sandbox that never ran the turn would fail the same way again
                crashes = await self._crash_resumes(job.id)
                if crashes >= agent.durability.max_resumes:
                    raise EnvError.other(
                        f"{e}; not resumed: the job was already resumed {crashes} time(s) after a lost "
                        f"sandbox (durability.max_resumes: {agent.durability.max_resumes})"
                    ) from e
                job = await self._resumed(job, "lost", f"its sandbox was lost: {shorten(str(e), 300)}")

    async def _execute(self, job: Job, input: TurnInput) -> TurnOutput:
        """One execution of the job's turn in a fresh sandbox: started anew, or continued from
        its last checkpoint. The runner's checkpoints become the job's and its turn records."""
        agent = self.runner.agent(job.agent)
        memory = agent.effects.memory if agent.spec.reads_memory else ()
        snapshot = await state_snapshot(self.state, input, memory=memory)
        state: list[tuple[Scope, str, Any]] = list(snapshot)
        root = await self._root(job)
        saved = await self.store.checkpoint(job.id)
        base: SessionState | None = None
        thread = await self.weaves.thread(root, job.id)
        recorded = [
            r.content["tool_use_id"] for r in thread if r.kind == "tool_call" and isinstance(r.content, dict)
        ]
        tip = thread[-1] if thread else None
        if saved is None:
            anchor = await self._record_input(root, job, input, tip)
        else:
            base, lost = resume_state(saved[0], saved[1], input, agent.durability)
            anchor = (tip.id,) if tip is not None else ()
            if lost:
                fate = "run again" if agent.durability.in_flight == "rerun" else "answered as lost"
                await self._log(
                    job.id, "warn", f"call(s) {', '.join(lost)} ran when the sandbox was lost: {fate}"
                )
        if agent.spec.context.strategy == "causal_cone" and anchor:
            state.append(await self._cone_entry(root, anchor[0]))
        journal = JobJournal(
            self.weaves,
            root,
            job=job.id,
            agent=job.agent,
            input=input,
            base=base,
            gate=agent.spec.approval,
            risks=agent.spec.assured_risks,
            approved=base.approved if base is not None else (),
            anchor=anchor,
            recorded=[str(r) for r in recorded],
            max_turns=_max_turns(agent.spec, input),
        )
        handle = TurnHandle(
            resume_from=base.model_dump_json() if base is not None else None,
            start_paused=job.id in self._paused_at_start,
            files=await self.store.input_files(job.id),
            collect_artifacts=True,
        )
        self._paused_at_start.discard(job.id)
        running = False

        async def sink(event: SandboxEvent) -> None:
            nonlocal running
            if not running and isinstance(event, TurnStarted):
                running = True
                await self._transition(job.id, JobState.RUNNING, detail="the turn started in its sandbox")
            if isinstance(event, TurnPaused):
                self._paused.add(job.id)
            started = len(journal.started)
            if await journal.observe(event):
                assert journal.state is not None
                await self.store.save_checkpoint(job.id, journal.state.model_dump_json(), journal.started)
                return
            if len(journal.started) != started:
                await self.store.save_started(job.id, journal.started)
            await self._emit(job.id, _event_data(event))

        if saved is not None or job.resumes:  # a resume: its previous sandbox must be gone first
            await self.runner.ensure_gone(agent, job.id)
        self._handles[job.id], self._journals[job.id] = handle, journal
        try:
            output = await self.runner.run(agent, input, events=sink, state=state, handle=handle, job=job.id)
            await self._keep_artifacts(job.id, handle)
            return output
        finally:
            self._paused.discard(job.id)
            self._progressed[job.id] = journal.checkpoints > 0
            if self._handles.get(job.id) is handle:
                del self._handles[job.id], self._journals[job.id]

    # -- effects ---------------------------------------------------------------------------------

    def _gate(self, effect: Effect, context: EffectContext) -> str | None:
        """Why the declaring agent's policy refuses ``effect``; None when it allows it."""
        if context.agent is None:
            return "the agent that declared this effect is not known"
        try:
            policy = self.runner.agent(str(context.agent)).effects
        except ConfigError:
            return f"agent {str(context.agent)!r} is not configured"
        return check_effect(policy, effect, context)

    async def _apply_effects(self, job: Job, output: TurnOutput) -> EffectReport:
        """Apply the submitted job's effects, each checked against its declaring agent's policy;
        each outcome and log effect is recorded on the job that declared it as it happens (and
        on the submitted job, which sees the whole tree)."""
        orchestrator = JobOrchestrator(self, job)

        async def record(data: EffectApplied | LogLine) -> None:
            owner = orchestrator.current
            await self._emit(owner.id, data)
            if owner.id != job.id:
                await self._emit(job.id, data.model_copy(update={"job": owner.id}))

        async def on_outcome(outcome: EffectOutcome, depth: int, source: AgentId | None) -> None:
            child = None
            if outcome.effect in ("delegate", "handoff") and outcome.status == "ok":
                child = orchestrator.follow_up_done()
                if child is not None:
                    await self._finish_child(child, outcome)
            declared_by = str(source) if source is not None else job.agent
            await record(EffectApplied(outcome=outcome, depth=depth, source=declared_by))
            await self._effect_record(job, orchestrator.current, outcome, child)

        async def on_log(effect: Log, source: AgentId | None) -> None:
            declared_by = str(source) if source is not None else job.agent
            await record(
                LogLine(
                    level=effect.level.value, message=effect.message, source=declared_by, data=effect.data
                )
            )

        executor = EffectExecutor(
            self.state,
            orchestrator,
            max_depth=self.settings.max_depth,
            max_follow_ups=self.settings.max_follow_ups,
            on_outcome=on_outcome,
            on_log=on_log,
            gate=self._gate,
        )
        try:
            report = await executor.apply(output, source=AgentId(job.agent), session=job.input.session)
        finally:
            # Children whose effects were still being applied end with their parent.
            for child in reversed(orchestrator.pending()):
                why, _ = self._stopping.get(job.id, (JobState.CANCELLED, ""))
                message = f"its parent job {job.id} ended before this job's effects were applied"
                await self._finish_shielded(child.id, why, JobError.of(why.value, message))
        return report

    async def _finish_child(self, child: Job, outcome: EffectOutcome) -> None:
        """A child's own effects were applied: it succeeded; tell its parent's record."""
        report = outcome.follow_up.recorded() if outcome.follow_up is not None else None
        output = outcome.child_output
        detail = f"exit reason {output.exit_reason.kind}" if output is not None else None
        final = await self._transition(
            child.id, JobState.SUCCEEDED, detail=detail, effects=report, only_from=[JobState.APPLYING_EFFECTS]
        )
        if child.parent_id is not None:
            finished = ChildJobChanged(
                phase="finished",
                job=child.id,
                agent=child.agent,
                origin=child.origin,
                state=(final or child).state,
            )
            await self._emit(child.parent_id, finished)

    async def run_child(
        self, parent: Job, agent: AgentId, input: TurnInput, origin: JobOrigin
    ) -> tuple[Job, TurnOutput]:
        """Run a delegate/handoff child of ``parent`` as its own job; the job and its output.

        Raises:
            OrchError: ``agent_not_found`` for an agent the configuration lacks;
                ``dispatch_failed`` when the child did not produce an output.
        """
        try:
            config = self.runner.agent(str(agent))
        except ConfigError as e:
            raise OrchError.agent_not_found(str(e)) from e
        limit = _job_limit_ms(config.spec, input)
        child, event = await self.store.create(
            agent=str(agent),
            input=input,
            queue=parent.queue,
            parent_id=parent.id,
            origin=origin,
            workflow=parent.workflow,
            max_duration_ms=limit or parent.max_duration_ms,
        )
        self._notify(event)
        await self._emit(
            parent.id, ChildJobChanged(phase="started", job=child.id, agent=str(agent), origin=origin)
        )
        child = await self._transition(child.id, JobState.PROVISIONING) or child
        task = asyncio.create_task(self._run(child, apply_effects=False), name=f"airlock-job-{child.id}")
        self._tasks[child.id] = task
        try:
            try:
                output = await asyncio.shield(task)
            except asyncio.CancelledError:
                outer = asyncio.current_task()
                if outer is not None and outer.cancelling():
                    parent_state, _ = self._stopping.get(parent.id, (JobState.CANCELLED, ""))
                    stopped = f"its parent job {parent.id} was stopped"
                    self._stopping.setdefault(child.id, (parent_state, stopped))
                    task.cancel()
                    await asyncio.wait([task])
                    raise
                output = None  # the child alone was cancelled
        finally:
            self._tasks.pop(child.id, None)
        final = await self.get(child.id)
        if output is None:
            finished = ChildJobChanged(
                phase="finished", job=child.id, agent=str(agent), origin=origin, state=final.state
            )
            await self._emit(parent.id, finished)
            why = final.error.message if final.error else final.state.value
            raise OrchError.dispatch_failed(
                f"child job {child.id} ({agent}) ended {final.state.value}: {why}"
            )
        return final, output
