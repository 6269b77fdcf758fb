"""The controls of a job's running turn: pause, step, resume, inspect, and signals into it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from airlock.identity import DEFAULT_TENANT
from airlock.jobs import (
    Inspection,
    Job,
    JobEvent,
    JobFilter,
    JobState,
    SignalRecorded,
)
from airlock.sandbox import TurnHandle, TurnNotRunning
from airlock.turn import (
    PendingCall,
    SessionState,
)
from airlock.weave import RecordType

from ._active import ActiveJobs
from ._job_events import JobEvents
from ._job_records import JobRecords
from ._service_settings import JobNotAwaiting
from ._tenant_state import workflow_key

if TYPE_CHECKING:
    from airlock.runner import StepInfo

_log = logging.getLogger("airlock.jobs")


#: Hands a signal to a job's turn running in another replica (False: none runs).
DeliverElsewhere = Callable[[Job, str, JsonValue, "str | None"], Awaitable[bool]]


class Controls:
    """Pause, step, resume and inspect a sandboxed turn; signals into it.

    Args:
        events: the job record; ``records`` the tree's records; ``active`` this replica's jobs.
        elsewhere: delivers a signal to a turn another replica runs (None: one replica).
    """

    def __init__(
        self,
        events: JobEvents,
        records: JobRecords,
        active: ActiveJobs,
        elsewhere: DeliverElsewhere | None = None,
    ) -> None:
        self._events = events
        self._store = events.store
        self._records = records
        self._active = active
        self._elsewhere = elsewhere

    def start_paused(self, job_id: str) -> None:
        """Start the job's next execution paused, before its first model call (``airlock run
        --step``); step or resume it from there."""
        self._active.of(job_id).paused_at_start = True

    def _handle(self, job_id: str) -> TurnHandle:
        handle = self._active.handle(job_id)
        if handle is None or not handle.running:
            raise JobNotAwaiting(f"job {job_id} has no turn running in a sandbox now")
        return handle

    async def _control(self, job_id: str, call: str) -> Any:
        await self._events.get(job_id)
        handle = self._handle(job_id)
        from airlock.runner import RunnerCallError

        try:
            return await getattr(handle, call)()
        except (RunnerCallError, TurnNotRunning) as e:
            raise JobNotAwaiting(f"job {job_id}: {e}") from e

    async def pause(self, job_id: str) -> None:
        """Pause the job's running turn at its next step boundary.

        Raises:
            JobNotFound: no such job.
            JobNotAwaiting: no turn of it runs in a sandbox now.
        """
        await self._control(job_id, "pause")
        await self._events.log(job_id, "info", "pause requested: the turn stops at its next step boundary")

    async def resume(self, job_id: str) -> None:
        """Let the job's paused turn run on (raises as :meth:`pause`)."""
        await self._control(job_id, "resume")
        entry = self._active.get(job_id)
        if entry is not None:
            entry.paused = False
        await self._events.log(job_id, "info", "resumed by a user")

    async def step(self, job_id: str) -> tuple[StepInfo, list[JobEvent]]:
        """Run exactly one step of the job's paused turn: what it did, and the events the job
        recorded meanwhile (raises as :meth:`pause`; not paused: JobNotAwaiting)."""
        before = await self._store.events(job_id)
        after = before[-1].seq if before else 0
        journal = self._active.journal(job_id)
        calls = journal.state.iterations if journal is not None and journal.state is not None else 0
        info: StepInfo = await self._control(job_id, "step")
        # The step's events travel on the execution's own stream: let its last checkpoint land
        # (the model call's comes first, with the step's calls still open: not the step's end).
        for _ in range(500):
            state = journal.state if journal is not None else None
            if info.complete or journal is None or (state is not None and _step_closed(state, calls)):
                break
            if self._active.journal(job_id) is not journal:
                break
            await asyncio.sleep(0.01)
        return info, await self._store.events(job_id, after_seq=after)

    async def inspect(self, job_id: str) -> Inspection:
        """The job's session as of its latest checkpoint: messages, counters, and the calls of
        its open step that are not finished (or wait for approval)."""
        job = await self._events.get(job_id)
        journal = self._active.journal(job_id)
        state = journal.state if journal is not None else None
        if state is None:
            saved = await self._store.checkpoint(job_id)
            state = SessionState.model_validate_json(saved[0]) if saved is not None else None
        handle = self._active.handle(job_id)
        paused = handle is not None and handle.running and self._is_paused(job_id)
        pending: list[PendingCall] = []
        if job.state is JobState.AWAITING_APPROVAL and job.approval is not None:
            pending = list(job.approval.calls)
        elif state is not None:
            done = {c.tool_use_id for c in state.completed}
            pending = [
                PendingCall(tool_use_id=u.id, name=u.name, input=u.input)
                for u in state.open_uses()
                if u.id not in done
            ]
        running = handle is not None and handle.running
        return Inspection(job=job, state=state, running=running, paused=paused, pending=pending)

    async def signal(
        self, workflow: str, signal_type: str, data: JsonValue = None, tenant: str = DEFAULT_TENANT
    ) -> tuple[int, list[str]]:
        """Record a signal for ``tenant``'s ``workflow`` (as a Signal effect would) and deliver
        it into the running turns of its jobs at their next step boundary: the number of signals
        the workflow has received, and the jobs it reached (only ``tenant``'s)."""
        count = await self._store.record_signal(workflow_key(tenant, workflow), signal_type, data, None)
        sent = SignalRecorded(target=workflow, signal_type=signal_type, data=data, count=count)
        delivered = []
        for job in await self._store.find(JobFilter(workflow=workflow, tenant=tenant, limit=100)):
            if job.state.terminal:
                continue
            await self._events.emit(job.id, sent)
            if await self.deliver(job, signal_type, data, None):
                delivered.append(job.id)
        return count, delivered

    async def deliver(self, job: Job, signal_type: str, data: JsonValue, sender: str | None) -> bool:
        """Hand a signal to ``job``'s running turn (recorded in its thread); False when no turn
        of it runs now (the signal stays recorded for the workflow)."""
        handle = self._active.handle(job.id)
        journal = self._active.journal(job.id)
        if handle is None or not handle.running or journal is None:
            if self._elsewhere is not None and not self._store.claims.holds(job.id):
                return await self._elsewhere(job, signal_type, data, sender)
            return False
        if signal_type == "budget" and isinstance(data, dict):
            journal.allow_overrides(data)
        try:
            await handle.signal(signal_type, data)
        except Exception as e:  # the turn ended meanwhile
            _log.info("signal %s not delivered to job %s: %s", signal_type, job.id, e)
            return False
        root = await self._records.root(job)
        # a signal from another job knots the two threads
        deps = await self._records.weaves.tips(root, job.id, sender) if sender is not None else ()
        await self._records.weaves.record(
            root,
            job=job.id,
            agent=job.agent,
            type=RecordType.SPEECH,
            kind="signal",
            content={"signal_type": signal_type, "data": data, "from_job": sender},
            depends_on=deps,
        )
        return True

    def _is_paused(self, job_id: str) -> bool:
        entry = self._active.get(job_id)
        return entry is not None and entry.paused


def _step_closed(state: SessionState, calls: int) -> bool:
    """Whether ``state`` is past the step that began after ``calls`` model calls: a model call
    more, and each of its tool calls done."""
    done = {c.tool_use_id for c in state.completed}
    return state.iterations > calls and all(u.id in done for u in state.open_uses())
