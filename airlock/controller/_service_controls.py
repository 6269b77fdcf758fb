"""The JobService's controls of a running turn (pause, step, resume, inspect, signals) and
its audit (the weave of a job tree, and its verification)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

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
from airlock.weave import ChainReport, RecordType, TurnRecord

from ._service_core import JobNotAwaiting
from ._service_records import RecordsMixin

if TYPE_CHECKING:
    from airlock.runner import StepInfo

_log = logging.getLogger("airlock.jobs")


class ControlsMixin(RecordsMixin):
    """Pause, step, resume and inspect a sandboxed turn; signals into it; its audit."""

    def start_paused(self, job_id: str) -> None:
        """Start the job's next execution paused, before its first model call (``airlock run
        --step``); step or resume it from there."""
        self._paused_at_start.add(job_id)

    def _handle(self, job_id: str) -> TurnHandle:
        handle = self._handles.get(job_id)
        if handle is None or not handle.running:
            raise JobNotAwaiting(f"job {job_id} has no turn running in a sandbox now")
        return handle

    async def _control(self, job_id: str, call: str) -> Any:
        await self.get(job_id)
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
        await self._log(job_id, "info", "pause requested: the turn stops at its next step boundary")

    async def resume(self, job_id: str) -> None:
        """Let the job's paused turn run on (raises as :meth:`pause`)."""
        await self._control(job_id, "resume")
        self._paused.discard(job_id)
        await self._log(job_id, "info", "resumed by a user")

    async def step(self, job_id: str) -> tuple[StepInfo, list[JobEvent]]:
        """Run exactly one step of the job's paused turn: what it did, and the events the job
        recorded meanwhile (raises as :meth:`pause`; not paused: JobNotAwaiting)."""
        before = await self.store.events(job_id)
        after = before[-1].seq if before else 0
        journal = self._journals.get(job_id)
        calls = journal.state.iterations if journal is not None and journal.state is not None else 0
        info: StepInfo = await self._control(job_id, "step")
        # The step's events travel on the execution's own stream: let its checkpoint land.
        for _ in range(200):
            state = journal.state if journal is not None else None
            if info.complete or journal is None or (state is not None and state.iterations > calls):
                break
            if self._journals.get(job_id) is not journal:
                break
            await asyncio.sleep(0.01)
        return info, await self.store.events(job_id, after_seq=after)

    async def inspect(self, job_id: str) -> Inspection:
        """The job's session as of its latest checkpoint: messages, counters, and the calls of
        its open step that are not finished (or wait for approval)."""
        job = await self.get(job_id)
        journal = self._journals.get(job_id)
        state = journal.state if journal is not None else None
        if state is None:
            saved = await self.store.checkpoint(job_id)
            state = SessionState.model_validate_json(saved[0]) if saved is not None else None
        handle = self._handles.get(job_id)
        paused = handle is not None and handle.running and job_id in self._paused
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

    async def signal(self, workflow: str, signal_type: str, data: JsonValue = None) -> tuple[int, list[str]]:
        """Record a signal for ``workflow`` (as a Signal effect would) and deliver it into the
        running turns of its jobs at their next step boundary: the number of signals the
        workflow has received, and the jobs it reached."""
        count = await self.store.record_signal(workflow, signal_type, data, None)
        sent = SignalRecorded(target=workflow, signal_type=signal_type, data=data, count=count)
        delivered = []
        for job in await self.store.find(JobFilter(workflow=workflow, limit=100)):
            if job.state.terminal:
                continue
            await self._emit(job.id, sent)
            if await self.deliver(job, signal_type, data, None):
                delivered.append(job.id)
        return count, delivered

    async def deliver(self, job: Job, signal_type: str, data: JsonValue, sender: str | None) -> bool:
        """Hand a signal to ``job``'s running turn (recorded in its thread); False when no turn
        of it runs now (the signal stays recorded for the workflow)."""
        handle = self._handles.get(job.id)
        journal = self._journals.get(job.id)
        if handle is None or not handle.running or journal is None:
            return False
        if signal_type == "budget" and isinstance(data, dict):
            journal.allow_overrides(data)
        try:
            await handle.signal(signal_type, data)
        except Exception as e:  # the turn ended meanwhile
            _log.info("signal %s not delivered to job %s: %s", signal_type, job.id, e)
            return False
        root = await self._root(job)
        # a signal from another job knots the two threads
        deps = await self.weaves.tips(root, job.id, sender) if sender is not None else ()
        await self.weaves.record(
            root,
            job=job.id,
            agent=job.agent,
            type=RecordType.SPEECH,
            kind="signal",
            content={"signal_type": signal_type, "data": data, "from_job": sender},
            depends_on=deps,
        )
        return True

    async def weave(self, job_id: str) -> tuple[str, list[TurnRecord]]:
        """The root of ``job_id``'s tree and every turn record of it, as stored."""
        root = await self._root(await self.get(job_id))
        return root, await self.weaves.load(root)

    async def verify(self, job_id: str) -> tuple[str, ChainReport]:
        """Check the hash chain (and, with the audit key, the seals) of ``job_id``'s tree."""
        root = await self._root(await self.get(job_id))
        return root, await self.weaves.verify(root)
