"""JobService: the controller's job API, a facade over its parts.

A submitted job is written to the store before ``submit`` returns. The parts, each its own
module with a narrow constructor and no reference back to the service:

- :class:`~._scheduler.Scheduler`: ``concurrency`` workers claiming queued jobs from the store
  in fair order, each job run as its own task (cancellable by a user or its ``max_duration``
  without its worker);
- :class:`~._membership.Membership`: this replica among those sharing the store (its lease,
  the jobs of dead replicas adopted, the jobs it lost let go);
- :class:`~._job_runs.JobRuns`: one job's execution (its turn in a fresh sandbox, resumed
  from its last checkpoint when the sandbox is lost or its approval decided);
- :class:`~._job_effects.JobEffects`: a submitted job's effects, each checked against the
  declaring agent's policy, delegates and handoffs run as child jobs;
- :class:`~._job_approvals.Approvals`: approval waits, decisions and timeouts;
- :class:`~._job_controls.Controls`: pause/step/resume/inspect, signals into turns;
- :class:`~._job_records.JobRecords`: the records the controller writes, resumes, audit;
- :class:`~._job_files.JobFiles`: input files and artifacts;
- :class:`~._job_events.JobEvents`: state changes and events, and watching them;
- :class:`~._active.ActiveJobs`: what this process holds about each job (one
  :class:`~._active.ActiveJob`: its agent, resolved once, its task, turn controls, waits).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from airlock.errors import ConfigError
from airlock.identity import DEFAULT_TENANT, AuthSettings
from airlock.jobs import FixedPointRun, Inspection, Job, JobError, JobEvent, JobFilter, JobState, StoredFile
from airlock.spec import named_workflow
from airlock.tracing import JobTracing
from airlock.weave import ChainReport, TurnRecord
from layer0 import StateStore, TurnInput

from ._active import ActiveJobs
from ._adoption import Adoption
from ._blob_gc import BlobGc
from ._blobs import BlobStore
from ._fenced_state import fenced_state
from ._fork_point import ForkSeed
from ._forks import Forks
from ._job_approvals import Approvals
from ._job_controls import Controls
from ._job_effects import JobEffects
from ._job_events import JobEvents
from ._job_files import JobFiles, announced, checked_input_files
from ._job_records import JobRecords
from ._job_runs import STOPPED, JobRuns
from ._job_workspace import JobWorkspace
from ._membership import Membership
from ._pruning import Pruner
from ._quotas import Quotas
from ._remote_controls import RemoteControls
from ._sandboxes import KeptSandboxes
from ._scheduler import Scheduler
from ._service_settings import JobNotAwaiting, JobNotFound, ServiceSettings, job_limit_ms
from ._store import JobStore
from ._tree_budget import TreeBudgets
from ._weave_anchors import StoredAnchors
from ._weaving import Weaves

if TYPE_CHECKING:
    from airlock.config import AgentConfig
    from airlock.runner import StepInfo

    from ._execute import AgentRunner

_log = logging.getLogger("airlock.jobs")

#: The store's notifications (PostgreSQL ``LISTEN``): a job queued, a job's new event.
QUEUE_CHANNEL = "airlock_queue"
EVENTS_CHANNEL = "airlock_events"
#: A control call addressed to a replica; an answer to one.
CONTROLS_CHANNEL = "airlock_controls"
ANSWERS_CHANNEL = "airlock_answers"
#: Every channel a replica listens on.
CHANNELS = (QUEUE_CHANNEL, EVENTS_CHANNEL, CONTROLS_CHANNEL, ANSWERS_CHANNEL)


class JobService:
    """Accepts, schedules, runs and records jobs. Use as an async context manager.

    Args:
        store: the durable job record.
        runner: runs agents' turns in sandboxes.
        state: where memory effects, session histories and the turn records live.
        settings: concurrency and limits.
        audit_key: seals the turn records (``jobs verify`` then detects a record rewritten
            with its hash chain recomputed); None: records are hash-chained only.
        auth: the tenants' quotas (None: no quota).
        tracing: each job's trace (None: off).
        blobs: where jobs' workspace snapshots keep their files (None: workspaces are not
            kept; a resumed job starts with its input files only).
    """

    def __init__(
        self,
        store: JobStore,
        runner: AgentRunner,
        state: StateStore,
        settings: ServiceSettings | None = None,
        audit_key: bytes | None = None,
        auth: AuthSettings | None = None,
        tracing: JobTracing | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        self.store = store
        #: Jobs' workspace files (None: not kept).
        self.blobs = blobs
        #: Each job's trace (off unless given).
        self.tracing = tracing or JobTracing()
        #: Each tenant's quotas against its use.
        self.quotas = Quotas(auth or AuthSettings(), store)
        self.runner = runner
        self.state = state
        self.settings = settings or ServiceSettings()
        #: Every job tree's turn records (sealed with ``audit_key``).
        self.weaves = _weaves(store, state, audit_key)
        #: Jobs' state changes and events as recorded, and watching them.
        self.events = JobEvents(store)
        #: What this process holds about each job; the other parts below.
        self._active = ActiveJobs(self._agent)
        self._records = JobRecords(self.weaves, self.events)
        self._files = JobFiles(self.events)
        self._remote = self._remote_controls()
        elsewhere = self._remote.deliver if self._remote is not None else None
        self._controls = Controls(self.events, self._records, self._active, elsewhere)
        #: Each job tree's budget (its root agent's ``tree_budget``).
        self._trees = TreeBudgets(
            self.events, self._agent, self._controls.deliver, pause=self._pause_turn, resume=self._resume_turn
        )
        # The scheduler runs what the approvals requeue; runs and effects call each other
        # through the lambdas (evaluated once jobs run).
        self._scheduler = Scheduler(
            self.settings.concurrency,
            self._active,
            lambda job_id: self._runs.run_submitted(job_id),
            claim=store.claim,
            release=store.release,
            poll_s=self.settings.poll_s,
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._adoption = self._adoption_of(runner)
        self._membership = Membership(store, self.settings.lease_s, adopt=self._adoption, let_go=self._let_go)
        self._approvals = Approvals(self.events, self._records, self._active, self._scheduler.push)
        self.sandboxes = self._kept_sandboxes(runner)  # what jobs may run in (submit(sandbox=…))
        self._runs = self._job_runs(runner, state)
        self._forks = Forks(store, self._submit_fork)
        self.pruner = self._pruner(runner, auth)  # hourly

    def _adoption_of(self, runner: AgentRunner) -> Adoption:
        """How this replica takes up the jobs of a replica that died (its queue woken)."""
        return Adoption(
            store=self.store,
            runner=runner,
            records=self._records,
            runs=lambda: self._runs,
            active=self._active,
            wake=self._scheduler.push,
        )

    def _remote_controls(self) -> RemoteControls | None:
        """The controls of jobs another replica runs, relayed through the store (None: one
        replica, on SQLite)."""
        if not self.store.shared:
            return None
        return RemoteControls(self.store, self.events, self._active, lambda: self._controls)

    def _kept_sandboxes(self, runner: AgentRunner) -> KeptSandboxes:
        """The long-lived sandboxes jobs may run in (``submit(sandbox=...)``)."""
        sweep_s = self.settings.sandbox_sweep_s
        return KeptSandboxes(
            self.store, runner, self.blobs, self.replica, shared=self.store.shared, sweep_s=sweep_s
        )

    def _pruner(self, runner: AgentRunner, auth: AuthSettings | None) -> Pruner:
        """What prunes the store by its retention, and sweeps the blobs no checkpoint names."""
        gc = BlobGc(self.store, self.blobs) if self.blobs is not None else None
        return Pruner(self.store, self.weaves, runner.config.retention, auth or AuthSettings(), gc=gc)

    def _job_runs(self, runner: AgentRunner, state: StateStore) -> JobRuns:
        """How jobs run: their turns, then their effects (children run through ``_runs``)."""
        effects = JobEffects(
            state=state,
            settings=self.settings,
            events=self.events,
            records=self._records,
            signals=self._controls,
            active=self._active,
            run=lambda child: self._runs.run(child, apply_effects=False),
            tenant_jobs=lambda tenant: self.quotas.settings.quotas(tenant).concurrent_jobs,
            trees=self._trees,
        )
        return JobRuns(
            runner=runner,
            state=state,
            events=self.events,
            records=self._records,
            files=self._files,
            approvals=self._approvals,
            effects=effects,
            active=self._active,
            workspace=JobWorkspace(self.store, self.blobs),
            sandboxes=self.sandboxes,
            quotas=self.quotas,
            tracing=self.tracing,
            trees=self._trees,
        )

    @property
    def recovered(self) -> list[Job]:
        """Jobs marked interrupted because their controller was gone (at start, or a replica's)."""
        return self._adoption.recovered

    @property
    def replica(self) -> str:
        """This controller's replica id (among those sharing its store)."""
        return self.store.claims.replica

    def _agent(self, name: str) -> AgentConfig:
        """The configured agent ``name`` (the one place a job's agent is resolved)."""
        return self.runner.agent(name)

    # -- life --------------------------------------------------------------------------------

    async def __aenter__(self) -> JobService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self, address: str = "") -> None:
        """Join the replicas sharing the store (adopting the jobs of dead ones, or of a previous
        controller), then start the workers.

        The sandboxes of adopted jobs are reaped (their owner process is gone). A submitted job
        whose turn was provisioning or running is queued to resume from its last checkpoint in a
        fresh sandbox (within its agent's ``max_resumes``); the others are marked interrupted.
        Queued jobs wait for any replica's worker; jobs waiting for approval keep waiting (their
        timeouts run again).
        """
        await self._membership.join(address)
        if not self.recovered and self.runner.config.pool.size:  # a crashed controller's pool members
            await self.runner.reap()
        for line in await self.runner.warm():
            _log.info("warm pool: not pooled: %s", line)
        waiting = JobFilter(states=frozenset({JobState.AWAITING_APPROVAL}), limit=1000)
        for job in await self.store.find(waiting):
            if job.approval is not None and job.origin == "submit":
                self._approvals.arm_timeout(job.id, job.approval)
        await self.sandboxes.recover()
        self._scheduler.start()
        self._membership.start()
        self.pruner.start()
        self.sandboxes.start()

    def notified(self, channel: str, payload: str) -> None:
        """A notification from the shared store (PostgreSQL): ``airlock_queue``, a job was
        queued; ``airlock_events``, a job has new events; an empty payload: anything may have
        happened (the connection was lost)."""
        if channel == QUEUE_CHANNEL:
            self._background(self._scheduler.push())
        elif channel == EVENTS_CHANNEL:
            self.events.wake(payload or None)
        elif self._remote is not None and channel == CONTROLS_CHANNEL and payload in ("", self.replica):
            self._background(self._remote.relay.serve())
        elif self._remote is not None and channel == ANSWERS_CHANNEL:
            self._background(self._remote.relay.answered())

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _let_go(self, job_ids: Sequence[str]) -> None:
        """Stop this replica's runs of jobs it no longer holds, writing nothing."""
        for job_id in job_ids:
            entry = self._active.get(job_id)
            if entry is not None and entry.task is not None:
                entry.let_go = True
                entry.task.cancel()

    async def stop(self) -> None:
        """Stop: running jobs are cancelled (sandboxes removed); a submitted job whose turn
        can resume (its agent's ``max_resumes`` not spent) is queued again, for any replica (or
        the next start) to resume from its last checkpoint; a job tree applying its effects is
        handed over as it stands (nothing written: another replica, or the next start, adopts it
        at once and applies the rest, each effect once); any other job is marked interrupted;
        queued jobs stay queued. The replica then leaves."""
        tasks = self._active.tasks()
        fates = await self._fates(tasks)
        handed = {job_id for job_id, fate in fates.items() if fate is None}
        self.store.claims.lose(handed)  # kept in the store for the adopter; written no more here
        await self.pruner.stop()
        for timer in self._active.take_timers():
            timer.cancel()
        await self._trees.close()
        workers = self._scheduler.cancel_workers()
        for job_id, task in tasks.items():
            entry = self._active.of(job_id)
            fate = fates[job_id]
            if fate is None:
                entry.let_go = True
            elif entry.stopping is None:
                entry.stopping = fate
            task.cancel()
        pending = [*workers, *tasks.values()]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for job_id in list(self.store.claims.held()):
            await self.store.release(job_id)
        await self.sandboxes.aclose()
        await self._membership.leave(hand_over=bool(handed))
        await self.runner.aclose()

    async def _fates(self, job_ids: Iterable[str]) -> dict[str, tuple[JobState, str] | None]:
        """What each running job becomes when this replica stops (None: handed over as it is)."""
        jobs = {job_id: job for job_id in job_ids if (job := await self.store.get(job_id)) is not None}
        fates: dict[str, tuple[JobState, str] | None] = {}
        for job_id in job_ids:
            job = jobs.get(job_id)
            if job is not None and await self._adoption.replays_tree(job, jobs):
                fates[job_id] = None
            elif job is not None and await self._adoption.resumable(job):
                fates[job_id] = (JobState.QUEUED, STOPPED)
            else:
                fates[job_id] = (JobState.INTERRUPTED, STOPPED)
        return fates

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
        tenant: str = DEFAULT_TENANT,
        owner: str | None = None,
        sandbox: str | None = None,
    ) -> Job:
        """Record a job for ``agent`` (durably, with the input ``files`` placed in its
        workspace before each of its turns) and queue it; with ``until_stable``, the agent is
        re-run on its own output until it is stable (a fixed-point job). It belongs to
        ``tenant`` and was submitted by ``owner`` (a principal's name); with ``sandbox`` it runs
        in that long-lived sandbox of the tenant, after the jobs before it.

        Raises:
            QuotaExceeded: one of ``tenant``'s quotas (nothing is recorded).
            ConfigError: unknown agent (the message lists the configured ones), or a
                non-positive ``max_duration_ms``.
            FileRefused: a file path that leaves the workspace, or a path twice;
                ``FilesOverCap`` beyond :data:`airlock.policy.INPUT_CAPS`.
            SandboxNotFound: no such sandbox of the tenant; ``SandboxRefused``: another
                agent's, or the agent changed since its creation.
        """
        if sandbox is not None:
            await self.sandboxes.admit(sandbox, self._agent(agent), tenant)
        return await self._submit(
            agent,
            input,
            queue=queue,
            max_duration_ms=max_duration_ms,
            workflow=workflow,
            awaited=False,
            until_stable=until_stable,
            files=files,
            tenant=tenant,
            owner=owner,
            sandbox=sandbox,
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
            entry = self._active.of(job.id)
            failure, entry.failure, entry.awaited = entry.failure, None, False
            self._active.tidy(job.id)
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
        tenant: str = DEFAULT_TENANT,
        owner: str | None = None,
        fork: ForkSeed | None = None,
        sandbox: str | None = None,
    ) -> Job:
        config = self._agent(agent)
        admit = self.quotas.admission(tenant, config)
        files = checked_input_files(files)
        if fork is None:  # a fork's input is its original's, announced already
            input = announced(input, files, config.input_files)
        if max_duration_ms is not None and max_duration_ms <= 0:
            raise ConfigError(f"max_duration must be positive, got {max_duration_ms} ms")
        if max_duration_ms is None:
            max_duration_ms = job_limit_ms(config.spec, input) or self.settings.default_max_duration_ms
        job, event = await self.store.create(
            agent=agent,
            input=input,
            queue=queue,
            workflow=workflow or named_workflow(input.metadata),
            max_duration_ms=max_duration_ms,
            fixed_point=until_stable,
            files=files,
            tenant=tenant,
            owner=owner,
            admit=admit,
            fork=fork,
            sandbox=sandbox,
        )
        self.events.notify(event, job)
        entry = self._active.of(job.id)
        entry.agent, entry.awaited = config, awaited
        await self._scheduler.push()
        return job

    async def fork(
        self,
        job_id: str,
        *,
        at: str | None = None,
        message: str | None = None,
        agent: str | None = None,
        tenant: str | None = None,
        owner: str | None = None,
    ) -> Job:
        """A new job continuing job ``job_id`` (of ``tenant``, when given) from its checkpoint
        ``at`` (a number, or a record ``JOB:n``; None: the last) with its conversation and
        workspace there, queued; see :meth:`Forks.fork`. ``owner`` forked it.

        Raises:
            JobNotFound: no such job (of that tenant).
            ForkRefused: no such fork point, or a message inside a step.
            QuotaExceeded, ConfigError: as :meth:`submit`.
        """
        original = await self.get(job_id, tenant)
        return await self._forks.fork(original, at=at, message=message, agent=agent, owner=owner)

    async def _submit_fork(
        self, agent: str, original: Job, files: list[tuple[str, bytes]], seed: ForkSeed, owner: str | None
    ) -> Job:
        return await self._submit(
            agent,
            original.input,
            queue=None,
            max_duration_ms=original.max_duration_ms,
            workflow=None,
            awaited=False,
            files=files,
            tenant=original.tenant,
            owner=owner,
            fork=seed,
        )

    async def get(self, job_id: str, tenant: str | None = None) -> Job:
        """The job (of ``tenant``, when given).

        Raises:
            JobNotFound: no such job (of that tenant: the same refusal, from the same query).
        """
        return await self.with_tree_budget(await self.events.get(job_id, tenant))

    async def with_tree_budget(self, job: Job) -> Job:
        """``job`` with its tree's spend now, when it is a root whose agent has a tree budget."""
        use = await self._trees.now(job)
        return job if use is None else job.model_copy(update={"tree_budget": use})

    async def find(self, where: JobFilter | None = None) -> list[Job]:
        """Jobs matching ``where``, most recent first."""
        return await self.store.find(where)

    async def logs(self, job_id: str, after_seq: int = 0) -> list[JobEvent]:
        """The job's ``log`` events."""
        await self.get(job_id)
        return await self.store.events(job_id, after_seq=after_seq, kind="log")

    def watch(self, job_id: str, after_seq: int = 0) -> AsyncIterator[JobEvent]:
        """The job's events after ``after_seq``, then live ones, until it is terminal."""
        return self.events.watch(job_id, after_seq)

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
        if job.state is JobState.AWAITING_APPROVAL and self._active.task(job_id) is None:
            self._approvals.cancel_timer(job_id)
            cancelled = await self._cancel_unheld(job_id, detail, JobState.AWAITING_APPROVAL)
            if cancelled is not None:
                return cancelled
        if job.state is JobState.QUEUED and self._active.task(job_id) is None:
            cancelled = await self._cancel_unheld(job_id, detail, JobState.QUEUED)
            if cancelled is not None:
                return cancelled
        task = self._active.task(job_id)
        if task is None and not self.store.claims.holds(job_id):
            # Running in another replica: its claim is revoked with the cancel; that replica
            # lets go (its sandbox removed) at its next write or lease renewal.
            await self.events.finish(
                job_id, JobState.CANCELLED, JobError.of("cancelled", detail), revoke=True
            )
        elif task is not None:
            entry = self._active.of(job_id)
            if entry.stopping is None:
                entry.stopping = (JobState.CANCELLED, detail)
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.shield(asyncio.wait([task]))
        return await self.get(job_id)

    async def _cancel_unheld(self, job_id: str, detail: str, state: JobState) -> Job | None:
        """Cancel a job no worker holds, if it is still ``state``."""
        error = JobError.of("cancelled", detail)
        cancelled = await self.events.transition(
            job_id, JobState.CANCELLED, detail=detail, error=error, only_from=[state]
        )
        self._active.tidy(job_id)
        return cancelled

    async def queued_count(self) -> int:
        """Jobs waiting for a worker (of any replica)."""
        return len(await self.store.queued())

    @property
    def running_count(self) -> int:
        """Jobs holding a worker now."""
        return self._scheduler.running_now

    @property
    def peak_running(self) -> int:
        """The most jobs seen running at once (for tests and the bench)."""
        return self._scheduler.peak_running

    # -- approvals -----------------------------------------------------------------------------

    async def approve(self, job_id: str, approver: str, comment: str = "") -> Job:
        """Record ``approver``'s approval of the calls ``job_id`` waits for; the job resumes
        once the agent's strategy is satisfied. A root whose tree budget asks for an increase:
        the increase is granted (by any one of its ``increase.approvers``) and the tree resumes.

        Raises:
            JobNotFound: no such job.
            JobNotAwaiting: the job waits for no approval.
            NotAnApprover: ``approver`` is not one of the agent's approvers.
        """
        if self._trees.asking(job_id):
            self._trees.answer(job_id, approver, True)
            note = f": {comment}" if comment else ""
            await self.events.log(job_id, "info", f"{approver} granted the tree budget's increase{note}")
            return await self.get(job_id)
        return await self._approvals.approve(job_id, approver, comment)

    async def reject(self, job_id: str, approver: str, reason: str) -> Job:
        """Record ``approver``'s rejection (``reason`` is what the model reads); raises as
        :meth:`approve` (a tree budget's increase refused: the tree halts)."""
        if self._trees.asking(job_id):
            self._trees.answer(job_id, approver, False)
            await self.events.log(job_id, "info", f"{approver} refused the tree budget's increase: {reason}")
            return await self.get(job_id)
        return await self._approvals.reject(job_id, approver, reason)

    async def _pause_turn(self, job_id: str) -> None:
        """Pause a tree's running turn while its budget's increase is asked for."""
        with contextlib.suppress(JobNotAwaiting, JobNotFound):
            await self._controls.pause(job_id)

    async def _resume_turn(self, job_id: str) -> None:
        """Let a tree's paused turn run on once its budget's increase was decided."""
        handle = self._active.handle(job_id)
        if handle is None or not handle.running:
            return
        try:
            await handle.resume()
        except Exception as e:  # the turn ended meanwhile
            _log.info("job %s: not resumed: %s", job_id, e)
            return
        entry = self._active.get(job_id)
        if entry is not None:
            entry.paused = False
        await self.events.log(job_id, "info", "resumed: its tree budget's increase was decided")

    # -- controls ------------------------------------------------------------------------------

    def start_paused(self, job_id: str) -> None:
        """Start the job's next execution paused, before its first model call (``airlock run
        --step``); step or resume it from there."""
        self._controls.start_paused(job_id)

    async def pause(self, job_id: str) -> None:
        """Pause the job's running turn at its next step boundary.

        Raises:
            JobNotFound: no such job.
            JobNotAwaiting: no turn of it runs in a sandbox now.
        """
        if self._remote is not None and await self._remote.pause(job_id):
            return
        await self._controls.pause(job_id)

    async def resume(self, job_id: str) -> None:
        """Let the job's paused turn run on (raises as :meth:`pause`)."""
        if self._remote is not None and await self._remote.resume(job_id):
            return
        await self._controls.resume(job_id)

    async def step(self, job_id: str) -> tuple[StepInfo, list[JobEvent]]:
        """Run exactly one step of the job's paused turn: what it did, and the events the job
        recorded meanwhile (raises as :meth:`pause`; not paused: JobNotAwaiting)."""
        if self._remote is not None and (stepped := await self._remote.step(job_id)) is not None:
            return stepped
        return await self._controls.step(job_id)

    async def inspect(self, job_id: str) -> Inspection:
        """The job's session as of its latest checkpoint: messages, counters, and the calls of
        its open step that are not finished (or wait for approval)."""
        if self._remote is not None and (seen := await self._remote.inspect(job_id)) is not None:
            return seen
        return await self._controls.inspect(job_id)

    async def signal(
        self, workflow: str, signal_type: str, data: JsonValue = None, tenant: str = DEFAULT_TENANT
    ) -> tuple[int, list[str]]:
        """Record a signal for ``tenant``'s ``workflow`` (as a Signal effect would) and deliver
        it into the running turns of its jobs at their next step boundary: the number of
        signals the workflow has received, and the jobs it reached."""
        return await self._controls.signal(workflow, signal_type, data, tenant)

    # -- records and files ---------------------------------------------------------------------

    async def weave(self, job_id: str) -> tuple[str, list[TurnRecord]]:
        """The root of ``job_id``'s tree and every turn record of it, as stored."""
        return await self._records.weave(await self.get(job_id))

    async def verify(self, job_id: str) -> tuple[str, ChainReport]:
        """Check the hash chain (and, with the audit key, the seals) of ``job_id``'s tree."""
        return await self._records.verify(await self.get(job_id))

    async def artifacts(self, job_id: str) -> list[StoredFile]:
        """The job's artifacts (path, size, SHA-256), in path order.

        Raises:
            JobNotFound: no such job.
        """
        return await self._files.artifacts(job_id)

    async def artifact(self, job_id: str, path: str) -> bytes:
        """The content of one of the job's artifacts.

        Raises:
            JobNotFound: no such job, or no such artifact of it.
        """
        return await self._files.artifact(job_id, path)

    async def input_files(self, job_id: str) -> list[StoredFile]:
        """The job's input files (path, size, SHA-256), in path order (raises as :meth:`artifacts`)."""
        return await self._files.input_files(job_id)


def _weaves(store: JobStore, state: StateStore, audit_key: bytes | None) -> Weaves:
    """The job trees' weaves: records written through ``state`` fenced to the replica holding
    each job, sealed with ``audit_key``, each thread's tip anchored in ``store``."""
    return Weaves(
        state,
        audit_key,
        writer=lambda job_id: fenced_state(state, store, job_id),
        anchors=StoredAnchors(store),
    )
