"""A submitted job's effects: each checked against its declaring agent's ``effects:`` policy
(a refused one is recorded, not applied) and applied in order through the layer0 effect
executor; delegates and handoffs run as child jobs of it, each in a sandbox of its own agent."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from airlock.controller.effects import EffectExecutor
from airlock.errors import ConfigError
from airlock.jobs import (
    ChildJobChanged,
    EffectApplied,
    EffectOutcome,
    EffectReport,
    Job,
    JobError,
    JobOrigin,
    JobState,
    LogLine,
)
from airlock.policy.effects import EffectContext, check_effect
from airlock.spec import AgentSpec
from layer0 import AgentId, Effect, Log, OrchError, StateStore, TurnInput, TurnOutput, WorkflowId

from ._active import ActiveJobs
from ._effect_ledger import CHILD, JobLedger
from ._fenced_state import fenced_state
from ._job_events import JobEvents
from ._job_records import JobRecords
from ._orchestrator import JobOrchestrator, SignalDelivery
from ._service_settings import ServiceSettings, job_limit_ms
from ._tenant_state import tenant_state
from ._tree_budget import TreeBudgets

#: Runs a child job (PROVISIONING) to its output; None when it ended without one.
RunChild = Callable[[Job], Coroutine[Any, Any, TurnOutput | None]]


class JobEffects:
    """Applies a submitted job's effects and runs its children.

    Args:
        state: where memory effects are written.
        settings: the depth and number of follow-ups.
        events: the job record; ``records`` the tree's records.
        signals: hands signals to running turns.
        active: each job's agent, task and stop request.
        run: runs a child job (its effects are applied here, by its parent's executor).
        tenant_jobs: a tenant's ``concurrent_jobs`` quota (None: none), which bounds how many
            children of one tree run at once below ``settings.parallel_children``.
        trees: each tree's budget: a child of an exhausted tree is not started (None: none).
    """

    def __init__(
        self,
        *,
        state: StateStore,
        settings: ServiceSettings,
        events: JobEvents,
        records: JobRecords,
        signals: SignalDelivery,
        active: ActiveJobs,
        run: RunChild,
        tenant_jobs: Callable[[str], int | None] = lambda tenant: None,
        trees: TreeBudgets | None = None,
    ) -> None:
        self._state = state
        self._settings = settings
        self._events = events
        self._store = events.store
        self._records = records
        self._signals = signals
        self._active = active
        self._run = run
        self._tenant_jobs = tenant_jobs
        self._trees = trees

    def _gate(self, effect: Effect, context: EffectContext) -> str | None:
        """Why the declaring agent's policy refuses ``effect``; None when it allows it."""
        if context.agent is None:
            return "the agent that declared this effect is not known"
        try:
            policy = self._active.resolve(str(context.agent)).effects
        except ConfigError:
            return f"agent {str(context.agent)!r} is not configured"
        return check_effect(policy, effect, context)

    async def apply(self, job: Job, output: TurnOutput, *, replay: bool = False) -> EffectReport:
        """Apply the submitted job's effects, each checked against its declaring agent's policy;
        each outcome and log effect is recorded on the job that declared it as it happens (and
        on the submitted job, which sees the whole tree). Each applied effect is recorded in the
        tree's ledger first; with ``replay`` (the job's effects were applied before, maybe
        partly, by a replica that died) those it records are not applied again."""
        emit = self._events.emit
        workflow = WorkflowId(job.workflow)  # the tree's: its children share it
        ledger = await JobLedger.of(self._store, job.id, replay=replay)
        orchestrator = JobOrchestrator(
            job,
            children=self,
            store=self._store,
            emit=emit,
            signals=self._signals,
            ledger=ledger,
            parallel=self._parallel(job.tenant),
        )

        async def record(data: EffectApplied | LogLine) -> None:
            owner = orchestrator.current
            await emit(owner.id, data)
            if owner.id != job.id:
                await emit(job.id, data.model_copy(update={"job": owner.id}))

        async def on_outcome(outcome: EffectOutcome, depth: int, source: AgentId | None) -> None:
            child = None
            if outcome.effect in ("delegate", "handoff") and outcome.status == "ok":
                child = orchestrator.follow_up_done()
                if child is not None:
                    await self._finish_child(child, outcome)
            declared_by = str(source) if source is not None else job.agent
            await record(EffectApplied(outcome=outcome, depth=depth, source=declared_by))
            await self._records.effect_record(job, orchestrator.current, outcome, child)

        async def on_log(effect: Log, source: AgentId | None) -> None:
            declared_by = str(source) if source is not None else job.agent
            line = LogLine(
                level=effect.level.value, message=effect.message, source=declared_by, data=effect.data
            )
            await record(line)

        executor = EffectExecutor(
            tenant_state(fenced_state(self._state, self._store, job.id), job.tenant),
            orchestrator,
            max_depth=self._settings.max_depth,
            max_follow_ups=self._settings.max_follow_ups,
            on_outcome=on_outcome,
            on_log=on_log,
            gate=lambda effect, context: self._gate(effect, replace(context, workflow=workflow)),
            ledger=ledger,
        )
        try:
            report = await executor.apply(output, source=AgentId(job.agent), session=job.input.session)
        finally:
            await self._end_unfinished(job, orchestrator)
        return report

    async def _end_unfinished(self, job: Job, orchestrator: JobOrchestrator) -> None:
        """Children whose effects were still being applied end with their parent (unless
        another replica takes the tree over)."""
        ending = [] if self._active.letting_go(job.id) else orchestrator.pending()
        for child in reversed(ending):
            why, _ = self._active.stopping(job.id) or (JobState.CANCELLED, "")
            message = f"its parent job {job.id} ended before this job's effects were applied"
            await self._events.finish(child.id, why, JobError.of(why.value, message))

    def _parallel(self, tenant: str) -> int:
        """How many children of one of ``tenant``'s trees run at once."""
        quota = self._tenant_jobs(tenant)
        limit = self._settings.parallel_children
        return max(1, min(limit, quota)) if quota is not None else limit

    async def _finish_child(self, child: Job, outcome: EffectOutcome) -> None:
        """A child's own effects were applied: it succeeded; tell its parent's record."""
        report = outcome.follow_up.recorded() if outcome.follow_up is not None else None
        output = outcome.child_output
        detail = f"exit reason {output.exit_reason.kind}" if output is not None else None
        final = await self._events.transition(
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
            await self._events.emit(child.parent_id, finished)

    async def run_child(
        self,
        parent: Job,
        agent: AgentId,
        input: TurnInput,
        origin: JobOrigin,
        at: tuple[JobLedger, str] | None = None,
    ) -> tuple[Job, TurnOutput]:
        """Run a delegate/handoff child of ``parent`` as its own job; the job and its output.
        With ``at`` (the tree's ledger and the asking effect's address), the child that effect
        created before (its replica died) is reused: its output, or its run resumed.

        Raises:
            OrchError: ``agent_not_found`` for an agent the configuration lacks;
                ``dispatch_failed`` when the child did not produce an output; ``other`` when
                the tree's budget is exhausted (the child is not started).
        """
        try:
            config = self._active.resolve(str(agent))
        except ConfigError as e:
            raise OrchError.agent_not_found(str(e)) from e
        earlier = at[0].child(at[1]) if at is not None else None
        if earlier is not None:
            reused = await self._reused_child(await self._events.get(earlier))
            if isinstance(reused, tuple):
                return reused
            child = reused
        else:
            if self._trees is not None:
                await self._trees.admit(parent, str(agent))
            key = at[0].key(at[1], CHILD) if at is not None else None
            child = await self._new_child(parent, str(agent), config.spec, input, origin, key)
        entry = self._active.of(child.id)
        entry.agent = config
        task = asyncio.create_task(self._run(child), name=f"airlock-job-{child.id}")
        entry.task = task
        try:
            output = await self._child_output(parent, child.id, task)
        finally:
            if entry.task is task:
                entry.task = None
            self._active.tidy(child.id)
        final = await self._events.get(child.id)
        if output is None:
            finished = ChildJobChanged(
                phase="finished", job=child.id, agent=str(agent), origin=origin, state=final.state
            )
            await self._events.emit(parent.id, finished)
            why = final.error.message if final.error else final.state.value
            raise OrchError.dispatch_failed(
                f"child job {child.id} ({agent}) ended {final.state.value}: {why}"
            )
        return final, output

    async def _reused_child(self, child: Job) -> tuple[Job, TurnOutput] | Job:
        """A child an effect created before its replica died: its output when its turn ended,
        else the child, resumed (PROVISIONING) to run again from its last checkpoint.

        Raises:
            OrchError: ``dispatch_failed``: it ended without an output.
        """
        if child.output is not None and child.state in (JobState.APPLYING_EFFECTS, JobState.SUCCEEDED):
            return child, child.output
        if child.state.terminal:
            raise OrchError.dispatch_failed(f"child job {child.id} ({child.agent}) ended {child.state.value}")
        why = "its parent's controller replica stopped while the parent applied its effects"
        return await self._records.resumed(child, "restart", why)

    async def _new_child(
        self,
        parent: Job,
        agent: str,
        spec: AgentSpec,
        input: TurnInput,
        origin: JobOrigin,
        ledger: tuple[str, str] | None = None,
    ) -> Job:
        """Record a child job of ``parent`` (PROVISIONING; ``ledger``: the key recording which
        effect created it, in the same transaction), and its start on the parent."""
        limit = job_limit_ms(spec, input)
        child, event = await self._store.create(
            agent=agent,
            input=input,
            queue=parent.queue,
            parent_id=parent.id,
            origin=origin,
            workflow=parent.workflow,
            max_duration_ms=limit or parent.max_duration_ms,
            tenant=parent.tenant,
            owner=parent.owner,
            ledger=ledger,
        )
        self._events.notify(event, child)
        started = ChildJobChanged(phase="started", job=child.id, agent=agent, origin=origin)
        await self._events.emit(parent.id, started)
        return await self._events.transition(child.id, JobState.PROVISIONING) or child

    async def _child_output(
        self, parent: Job, child_id: str, task: asyncio.Task[TurnOutput | None]
    ) -> TurnOutput | None:
        """The child's output; None when the child alone was cancelled. When the parent is
        stopped, so is the child (for the parent's reason), before this raises."""
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            outer = asyncio.current_task()
            if outer is not None and outer.cancelling():
                parent_state, _ = self._active.stopping(parent.id) or (JobState.CANCELLED, "")
                entry = self._active.of(child_id)
                if self._active.letting_go(parent.id):
                    entry.let_go = True  # the tree is another replica's: nothing is written
                elif entry.stopping is None:
                    entry.stopping = (parent_state, f"its parent job {parent.id} was stopped")
                task.cancel()
                await asyncio.wait([task])
                raise
            return None  # the child alone was cancelled
