"""The execution of one job: its turn in a fresh sandbox (resumed from its last checkpoint
when the sandbox is lost or its approval is decided), within its ``max_duration``, then its
effects (:mod:`._job_effects`)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airlock.errors import AirlockError, shorten
from airlock.jobs import Job, JobError, JobEventData, JobState, LogLine, SandboxActivity, job_log_context
from airlock.policy.effects import with_workflow
from airlock.sandbox import SandboxEvent, SandboxEventSink, TurnHandle, state_snapshot
from airlock.spec import AgentSpec
from airlock.tracing import ExecutionTrace, JobTracing
from airlock.turn import (
    DEFAULT_MAX_TURNS,
    Checkpoint,
    InferenceFinished,
    SessionState,
    SuspendedForApproval,
    TurnLog,
    TurnPaused,
    TurnStarted,
)
from layer0 import EnvError, Layer0Error, LogLevel, Scope, StateStore, TurnInput, TurnOutput

from ._active import ActiveJob, ActiveJobs
from ._claims import LeaseLost
from ._durable import lost_sandbox, resume_state
from ._fixed_point import run_until_stable
from ._job_approvals import Approvals
from ._job_effects import JobEffects
from ._job_events import JobEvents, shielded
from ._job_files import JobFiles
from ._job_records import JobRecords
from ._job_workspace import JobWorkspace, WorkspaceExecution
from ._journal import JobJournal
from ._live_events import is_live_only
from ._quotas import Quotas, capped
from ._sandboxes import BoxLease, KeptSandboxes
from ._tenant_state import tenant_state
from ._tree_budget import TreeBudgets

if TYPE_CHECKING:
    from airlock.config import AgentConfig

    from ._execute import AgentRunner

_log = logging.getLogger("airlock.jobs")

#: Why a running job was interrupted when the controller stops.
STOPPED = "the controller stopped while the job ran"

_LOG_LEVELS = {level.value: level for level in LogLevel}


def _event_data(event: SandboxEvent) -> JobEventData:
    """A sandbox event as the job records it (the turn's log lines as ``log`` events; a level
    outside layer0's is recorded as ``info``)."""
    if isinstance(event, TurnLog):
        level = _LOG_LEVELS.get(event.level, LogLevel.INFO)
        return LogLine(level=level, message=event.message, source="turn")
    return SandboxActivity(event=event)


def _max_turns(agent: AgentSpec, input: TurnInput) -> int:
    """The model calls a turn may make: its input's max_turns, else its agent's, else the loop's
    default (a checkpoint claiming more is refused)."""
    for config in (input.config, agent.defaults):
        if config is not None and config.max_turns is not None:
            return config.max_turns
    return DEFAULT_MAX_TURNS


@dataclass(frozen=True)
class _Start:
    """Where an execution starts: from its checkpoint (``resumed``, ``base``) or anew, the
    records its first response depends on, and the calls its thread has recorded."""

    resumed: bool
    base: SessionState | None
    anchor: tuple[str, ...]
    recorded: list[str]


@dataclass(frozen=True)
class _Turn:
    """What an execution's turn starts from: its state snapshot, its tree, where it starts,
    and the long-lived sandbox's box it runs in (None: a fresh sandbox)."""

    state: list[tuple[Scope, str, Any]]
    root: str
    start: _Start
    lease: BoxLease | None = None


class JobRuns:
    """Runs jobs (submitted ones and their children) to a terminal state.

    Args:
        runner: runs an agent's turn in a sandbox.
        state: the turn's read-only snapshot (memory, session history) comes from here.
        events: the job record; ``records`` the tree's records; ``files`` its files.
        approvals: a job's approval waits.
        effects: applies a submitted job's effects (children included).
        active: each job's agent, task, turn controls and stop request.
        workspace: each execution's workspace (restored on a resume, snapshots kept).
        sandboxes: the long-lived sandboxes jobs may run in (None: none).
        quotas: its tenant's quotas: what a turn may still spend today, the artifacts it keeps.
        tracing: each job's trace (default: off).
        trees: each job tree's budget: a turn's cap, its model calls counted (None: none).
    """

    def __init__(
        self,
        *,
        runner: AgentRunner,
        state: StateStore,
        events: JobEvents,
        records: JobRecords,
        files: JobFiles,
        approvals: Approvals,
        effects: JobEffects,
        active: ActiveJobs,
        workspace: JobWorkspace,
        sandboxes: KeptSandboxes | None = None,
        quotas: Quotas | None = None,
        tracing: JobTracing | None = None,
        trees: TreeBudgets | None = None,
    ) -> None:
        self._trees = trees
        self._workspace = workspace
        self._sandboxes = sandboxes
        self._quotas = quotas
        self._tracing = tracing or JobTracing()
        self._runner = runner
        self._state = state
        self._events = events
        self._store = events.store
        self._records = records
        self._files = files
        self._approvals = approvals
        self._effects = effects
        self._active = active

    async def run_submitted(self, job_id: str) -> None:
        """Run a queued submitted job (its effects applied here)."""
        job = await self._events.transition(job_id, JobState.PROVISIONING, only_from=[JobState.QUEUED])
        if job is None:
            return  # cancelled while it waited
        # The tree's records as stored: a copy cached while this replica held the job before
        # (another replica wrote to it since) must not place a record where one already is.
        self._records.weaves.forget(job_id)
        try:
            await self.run(job, apply_effects=True)
        finally:
            self._records.weaves.forget(job_id)  # the tree's records stay in the store
            if self._trees is not None:
                self._trees.forget(job_id)

    async def run(self, job: Job, *, apply_effects: bool) -> TurnOutput | None:
        """Run ``job`` (already PROVISIONING) to a terminal state; its output if it has one.

        Submitted jobs apply their turn's effects here; a child's effects are applied by its
        parent's executor as a follow-up (bounded by depth and count). Its span (when tracing)
        ends with the state it is left in.
        """
        trace = self._tracing.start(job)
        outcome: tuple[str, bool] = ("cancelled", True)  # only a cancellation leaves _run
        try:
            with job_log_context(job, trace.trace_id):  # what is logged meanwhile names the job
                output = await self._run(job, apply_effects=apply_effects)
            if self._tracing.enabled:
                outcome = await self._outcome(job.id)
            return output
        finally:
            trace.end(outcome[0], error=outcome[1])

    async def _outcome(self, job_id: str) -> tuple[str, bool]:
        """The state a run left its job in, for its span, and whether it is a failure."""
        try:
            after = await self._store.get(job_id)
        except Exception:  # the trace never fails a job
            return "unknown", False
        if after is None:
            return "gone", False
        failed = after.state in (JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED)
        return after.state.value, failed

    async def _run(self, job: Job, *, apply_effects: bool) -> TurnOutput | None:
        limit_s = job.max_duration_ms / 1000 if job.max_duration_ms else None
        current = asyncio.current_task()
        try:
            # Shared bring-up (the local model's first download/compile) is not the job's time.
            await self._runner.prepare(self._active.agent(job))
            async with asyncio.timeout(limit_s):
                output = await self._turn(job)
                if output is None:
                    return None  # waits for approval, holding no worker and no sandbox
                await self._events.transition(job.id, JobState.APPLYING_EFFECTS, output=output)
                # A child's effects are applied by its parent's executor, which then ends it.
                if apply_effects:
                    await self._succeed(job, output)
                return output
        except TimeoutError:
            if current is not None and current.cancelling():
                raise  # pragma: no cover - an outer cancel arrived at the same time
            message = f"ran past its max_duration of {limit_s:g}s; cancelled and its sandbox removed"
            await self._events.finish(job.id, JobState.TIMED_OUT, JobError.of("timeout", message))
            return None
        except asyncio.CancelledError:
            await self._cancelled(job, apply_effects)
            raise
        except LeaseLost as e:
            _log.warning("letting go: %s", e)
            return None
        except (Layer0Error, AirlockError) as e:
            self._keep_failure(job.id, e)
            await self._events.transition(job.id, JobState.FAILED, error=JobError.raised(e), detail=str(e))
            return None
        except Exception as e:
            self._keep_failure(job.id, e)
            _log.exception("job %s failed unexpectedly", job.id)
            await self._events.transition(
                job.id, JobState.FAILED, error=JobError.raised(e), detail=f"{type(e).__name__}: {e}"
            )
            return None

    async def replay_effects(self, job: Job) -> None:
        """Apply the effects of an adopted job whose replica died while applying them (it is
        APPLYING_EFFECTS, with its output): those its ledger records are not applied again."""
        assert job.output is not None
        self._records.weaves.forget(job.id)  # its dead replica wrote records after any copy here
        try:
            await self._succeed(job, job.output, replay=True)
        except asyncio.CancelledError:
            await self._cancelled(job, True)
            raise
        except LeaseLost as e:
            _log.warning("letting go: %s", e)
        except Exception as e:
            _log.exception("job %s: applying its effects again failed", job.id)
            await self._events.transition(
                job.id, JobState.FAILED, error=JobError.raised(e), detail=f"{type(e).__name__}: {e}"
            )
        finally:
            self._records.weaves.forget(job.id)

    async def _succeed(self, job: Job, output: TurnOutput, *, replay: bool = False) -> None:
        report = await self._effects.apply(job, output, replay=replay)
        refused = len(report.refused)
        await self._events.transition(
            job.id,
            JobState.SUCCEEDED,
            detail=f"exit reason {output.exit_reason.kind}"
            + (f"; {refused} effect(s) refused" if refused else ""),
            effects=report.recorded(),
        )

    async def _cancelled(self, job: Job, submitted: bool) -> None:
        """The job's task was cancelled: mark it as its stop request says."""
        default = (JobState.INTERRUPTED, STOPPED) if submitted else (JobState.CANCELLED, "cancelled")
        entry = self._active.of(job.id)
        if entry.let_go:
            return  # another replica holds it now: nothing is written here
        why, detail = entry.stopping or default
        entry.stopping = None
        if why is JobState.QUEUED:
            reason = f"{detail}; its sandbox was removed"
            await shielded(self._records.resumed(job, "restart", reason, into=JobState.QUEUED))
            return
        message = f"{detail}; its sandbox was removed"
        await self._events.finish(job.id, why, JobError.of(why.value, message))

    def _keep_failure(self, job_id: str, error: BaseException) -> None:
        entry = self._active.get(job_id)
        if entry is not None and entry.awaited:
            entry.failure = error

    async def _turn(self, job: Job) -> TurnOutput | None:
        """The job's turn to its output, resumed in a fresh sandbox from its last checkpoint
        when the sandbox is lost (within its agent's ``max_resumes``) or when its approval is
        decided; None when a submitted job now waits for approval (it holds no worker)."""
        if job.fixed_point is not None:
            root = await self._records.root(job)
            return await run_until_stable(
                self, job, root=root, weaves=self._records.weaves, store=self._store
            )
        return await self.turn_of(job, job.input)

    async def turn_of(self, job: Job, input: TurnInput) -> TurnOutput | None:
        """The job's turn on ``input`` to its output, resumed as :meth:`_turn` says."""
        agent = self._active.agent(job)
        while True:
            try:
                return await self._execute(job, input)
            except SuspendedForApproval as suspended:
                if not await self._approvals.await_approval(job, suspended):
                    if job.origin == "submit":
                        return None
                    await self._approvals.wait_decision(job.id)
                job = await self._records.resumed(job, "approval", "the approval was decided")
            except EnvError as e:
                if not lost_sandbox(e) or not self._progressed(job.id):
                    raise  # a sandbox that never ran the turn would fail the same way again
                crashes = await self._records.crash_resumes(job.id)
                if crashes >= agent.durability.max_resumes:
                    raise EnvError.other(
                        f"{e}; not resumed: the job was already resumed {crashes} time(s) after a lost "
                        f"sandbox (durability.max_resumes: {agent.durability.max_resumes})"
                    ) from e
                job = await self._records.resumed(
                    job, "lost", f"its sandbox was lost: {shorten(str(e), 300)}"
                )

    def _progressed(self, job_id: str) -> bool:
        """Whether the job's latest execution got its turn going (read once)."""
        entry = self._active.get(job_id)
        if entry is None:
            return False
        progressed, entry.progressed = entry.progressed, False
        return progressed

    async def _start(self, job: Job, agent: AgentConfig, input: TurnInput, root: str) -> _Start:
        """Where the job's next execution starts (its input recorded when it starts anew)."""
        saved = await self._store.checkpoint(job.id)
        thread = await self._records.weaves.thread(root, job.id)
        recorded = [
            str(r.content["tool_use_id"])
            for r in thread
            if r.kind == "tool_call" and isinstance(r.content, dict)
        ]
        tip = thread[-1] if thread else None
        if saved is None:
            anchor = await self._records.record_input(root, job, input, tip)
            return _Start(resumed=False, base=None, anchor=anchor, recorded=recorded)
        base, lost = resume_state(saved[0], saved[1], input, agent.durability)
        if lost:
            fate = "run again" if agent.durability.in_flight == "rerun" else "answered as lost"
            await self._events.log(
                job.id, "warn", f"call(s) {', '.join(lost)} ran when the sandbox was lost: {fate}"
            )
        if tip is None and job.forked_from is not None:  # a fork's first execution
            manifest = await self._store.checkpoint_manifest(job.id) or ""
            anchor = await self._records.record_fork(root, job, base, manifest)
        else:
            anchor = (tip.id,) if tip is not None else ()
        return _Start(resumed=True, base=base, anchor=anchor, recorded=recorded)

    async def _execute(self, job: Job, input: TurnInput) -> TurnOutput:
        """One execution of the job's turn: in a fresh sandbox, started anew or continued from
        its last checkpoint (its workspace restored), or in its long-lived sandbox's box after
        the jobs before it. The runner's checkpoints become the job's and its turn records;
        its workspace snapshots are verified and kept."""
        agent = self._active.agent(job)
        if self._quotas is not None:  # before anything records or checks the input
            input = capped(input, agent.spec.defaults.max_cost, await self._quotas.cost_left(job.tenant))
        input = with_workflow(input, job.workflow)  # its workflow and agent memory scopes
        if self._trees is not None:  # as the quota: before the input is recorded
            input = await self._trees.cap(job, input, agent.spec.defaults.max_cost)
        memory = agent.effects.memory if agent.spec.reads_memory else ()
        own = tenant_state(self._state, job.tenant)
        snapshot = await state_snapshot(own, input, memory=memory, workflow=job.workflow, agent=job.agent)
        state: list[tuple[Scope, str, Any]] = list(snapshot)
        root = await self._records.root(job)
        start = await self._start(job, agent, input, root)
        if agent.spec.context.strategy == "causal_cone" and start.anchor:
            state.append(await self._records.cone_entry(root, start.anchor[0]))
        if job.sandbox is None or self._sandboxes is None:
            if start.resumed or job.resumes:  # a resume: its previous sandbox must be gone first
                await self._runner.ensure_gone(agent, job.id)
            return await self._turn_in(job, agent, input, _Turn(state, root, start))
        async with self._sandboxes.lease(job, agent) as lease:
            return await self._turn_in(job, agent, input, _Turn(state, root, start, lease))

    async def _turn_in(self, job: Job, agent: AgentConfig, input: TurnInput, turn: _Turn) -> TurnOutput:
        """The execution's turn in its sandbox, with its workspace, journal and controls."""
        lease = turn.lease
        workspace = await self._workspace.execution(
            job,
            agent.durability,
            lambda data: self._events.emit(job.id, data),
            lease.workspace if lease is not None else None,
        )
        journal = self._journal(job, agent, input, turn.root, turn.start, workspace.digest)
        entry = self._active.of(job.id)
        handle = await self._handle(job, turn.start, entry, workspace)
        entry.handle, entry.journal = handle, journal
        execution = self._tracing.of(job.id).execution(agent, self._runner.pool_stats)
        try:
            sink = self._sink(job, journal, entry, workspace)
            sink = _traced(sink, execution) if self._tracing.enabled else sink
            if lease is None:
                output = await self._runner.run(
                    agent, input, events=sink, state=turn.state, handle=handle, job=job.id
                )
            else:
                output = await lease.box.run(input, events=sink, state=turn.state, handle=handle)
            room = await self._quotas.artifact_room(job.tenant) if self._quotas is not None else None
            await self._files.keep_artifacts(job.id, handle, room)
            execution.end(None)
            return output
        except BaseException as e:
            execution.end(e)
            raise
        finally:
            if lease is not None:
                lease.digest = workspace.digest
            entry.paused = False
            entry.progressed = journal.checkpoints > 0
            if entry.handle is handle:
                entry.handle = entry.journal = None
            if self._trees is not None:
                self._trees.ended(job)

    def _journal(
        self, job: Job, agent: AgentConfig, input: TurnInput, root: str, start: _Start, workspace: str
    ) -> JobJournal:
        """The journal that checks and records the execution's checkpoints."""
        base = start.base
        return JobJournal(
            self._records.weaves,
            root,
            job=job.id,
            agent=job.agent,
            input=input,
            base=base,
            gate=agent.spec.approval,
            risks=agent.spec.assured_risks,
            approved=base.approved if base is not None else (),
            anchor=start.anchor,
            recorded=start.recorded,
            max_turns=_max_turns(agent.spec, input),
            workspace=workspace,
        )

    async def _handle(
        self, job: Job, start: _Start, entry: ActiveJob, workspace: WorkspaceExecution
    ) -> TurnHandle:
        """The execution's turn controls: what it resumes from, the workspace it starts with
        (a resume's restored files, else the job's input files, over a long-lived sandbox's
        files), and whether it snapshots."""
        paused, entry.paused_at_start = entry.paused_at_start, False
        base = start.base
        restored = start.resumed and workspace.restore is not None
        return TurnHandle(
            resume_from=base.model_dump_json() if base is not None else None,
            start_paused=paused,
            files=() if restored else await self._store.input_files(job.id),
            collect_artifacts=True,
            restore=workspace.restore,
            snapshot_bytes=workspace.snapshot_bytes,
            workspace_base=workspace.held,
        )

    def _sink(
        self, job: Job, journal: JobJournal, entry: ActiveJob, workspace: WorkspaceExecution
    ) -> SandboxEventSink:
        """The execution's events: its workspace snapshots to the intake, its checkpoints to
        the store (naming the snapshot), the others to the job's record (each model call's
        totals to its tree's budget too)."""
        running = False
        job_id, trees = job.id, self._trees

        async def sink(event: SandboxEvent) -> None:
            nonlocal running
            if not running and isinstance(event, TurnStarted):
                running = True
                await self._events.transition(
                    job_id, JobState.RUNNING, detail="the turn started in its sandbox"
                )
            if isinstance(event, TurnPaused):
                entry.paused = True
            if is_live_only(event):  # forwarded to watchers, never recorded
                self._events.publish_live(job_id, SandboxActivity(event=event))
                return
            if await workspace.take(event):
                journal.workspace = workspace.digest
                return
            started = len(journal.started)
            if await journal.observe(event):
                await self._checkpointed(job_id, journal, event)
                return
            if len(journal.started) != started:
                await self._store.save_started(job_id, journal.started)
            await self._events.emit(job_id, _event_data(event))
            if trees is not None and isinstance(event, InferenceFinished):
                await trees.observe(job, event)

        return sink

    async def _checkpointed(self, job_id: str, journal: JobJournal, event: object) -> None:
        """Keep the journal's new state as the job's checkpoint, and the checkpoint as received
        in the job's history (what a fork starts from), both naming the workspace, in one
        transaction (the latest checkpoint is never missing from the history)."""
        assert journal.state is not None and isinstance(event, Checkpoint)
        await self._store.save_checkpoint(
            job_id,
            journal.state.model_dump_json(),
            journal.started,
            manifest=journal.workspace or None,
            logged=(event.model_dump_json(), journal.tip),
        )


def _traced(sink: SandboxEventSink, execution: ExecutionTrace) -> SandboxEventSink:
    """``sink``, the execution's trace seeing each event first (a tracing fault is logged, never
    the job's)."""

    async def traced(event: SandboxEvent) -> None:
        try:
            await execution.observe(event)
        except Exception:
            _log.exception("tracing: a sandbox event could not be recorded")
        await sink(event)

    return traced
