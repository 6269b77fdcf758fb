"""Approvals: a job waits (holding no worker), decisions are recorded and
combined by the agent's policy, a timeout decides by itself, the decided job resumes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from airlock.behaviour import ApprovalDecision
from airlock.jobs import (
    ApprovalChanged,
    ApprovalWait,
    Job,
    JobState,
    utcnow,
)
from airlock.turn import (
    SessionState,
    SuspendedForApproval,
)

from . import _approvals
from ._active import ActiveJobs
from ._job_events import JobEvents
from ._job_records import JobRecords
from ._service_settings import JobNotAwaiting, NotAnApprover

_log = logging.getLogger("airlock.jobs")


class Approvals:
    """Waiting for, and deciding, the tool calls an agent's approval gate stops before.

    Args:
        events: the job record.
        records: the tree's records (each request and decision is one).
        active: each job's agent (its approval policy), timer and in-place wait.
        wake: wakes the workers once a submitted job whose wait was decided is queued again (it
            resumes from its checkpoint).
    """

    def __init__(
        self,
        events: JobEvents,
        records: JobRecords,
        active: ActiveJobs,
        wake: Callable[[], Awaitable[None]],
    ) -> None:
        self._events = events
        self._store = events.store
        self._records = records
        self._active = active
        self._wake = wake

    async def await_approval(self, job: Job, suspended: SuspendedForApproval) -> bool:
        """Record that ``job`` waits for approval of ``suspended``'s calls; True when the policy
        decided at once (no approver configured: the job resumes now)."""
        agent = self._active.agent(job)
        policy = agent.approval
        now = utcnow()
        wait = _approvals.new_wait(policy, suspended.calls, suspended.event.iteration, now)
        await self._records.yield_record(
            job,
            "approval_requested",
            {
                "calls": [c.model_dump(mode="json") for c in wait.calls],
                "approvers": wait.approvers,
                "strategy": wait.strategy,
                "deadline": wait.deadline.isoformat(),
            },
        )
        await self._events.emit(job.id, ApprovalChanged(phase="requested", calls=wait.calls))
        if policy is None or not policy.approvers:
            why = "no approver is configured for this agent: approved at once"
            await self._decide(job, wait, _approvals.automatic(True, why, now))
            return True
        names = ", ".join(f"{c.name} ({c.tool_use_id})" for c in wait.calls)
        await self._events.transition(
            job.id,
            JobState.AWAITING_APPROVAL,
            detail=f"waiting for approval of {names} by {policy.strategy} of {', '.join(policy.approvers)}",
            approval=wait,
        )
        if job.origin != "submit":
            self._active.of(job.id).decided = asyncio.Event()
        self.arm_timeout(job.id, wait)
        return False

    async def wait_decision(self, job_id: str) -> None:
        entry = self._active.get(job_id)
        event = entry.decided if entry is not None else None
        if entry is not None and event is not None:
            try:
                await event.wait()
            finally:
                entry.decided = None

    def arm_timeout(self, job_id: str, wait: ApprovalWait) -> None:
        async def fire() -> None:
            await asyncio.sleep(max(0.0, (wait.deadline - utcnow()).total_seconds()))
            self._active.of(job_id).approval_timer = None
            job = await self._store.get(job_id)
            if job is None or job.state is not JobState.AWAITING_APPROVAL or job.approval is None:
                self._active.tidy(job_id)
                return
            approve = job.approval.on_timeout == "approve"
            why = f"no decision within the approval timeout: {job.approval.on_timeout}ed by the policy"
            await self._decide(job, job.approval, _approvals.automatic(approve, why, utcnow()))

        entry = self._active.of(job_id)
        old, entry.approval_timer = entry.approval_timer, None
        if old is not None:
            old.cancel()
        entry.approval_timer = asyncio.create_task(fire(), name=f"airlock-approval-{job_id}")

    async def approve(self, job_id: str, approver: str, comment: str = "") -> Job:
        """Record ``approver``'s approval of the calls ``job_id`` waits for; the job resumes
        once the agent's strategy is satisfied.

        Raises:
            JobNotFound: no such job.
            JobNotAwaiting: the job waits for no approval.
            NotAnApprover: ``approver`` is not one of the agent's approvers.
        """
        return await self._human_decision(job_id, approver, True, comment)

    async def reject(self, job_id: str, approver: str, reason: str) -> Job:
        """Record ``approver``'s rejection (``reason`` is what the model reads); raises as
        :meth:`approve`."""
        return await self._human_decision(job_id, approver, False, reason)

    async def _human_decision(self, job_id: str, approver: str, approve: bool, comment: str) -> Job:
        job = await self._events.get(job_id)
        if job.state is not JobState.AWAITING_APPROVAL or job.approval is None:
            raise JobNotAwaiting(f"job {job_id} is {job.state.value}: it waits for no approval")
        if job.approval.outcome is not None:  # settled; the job is about to go on
            raise JobNotAwaiting(f"job {job_id}'s approval is already settled: {job.approval.outcome}")
        policy = self._active.agent(job).approval
        problem = policy.approver_problem(approver) if policy is not None else "no approval policy"
        if problem is not None:
            raise NotAnApprover(problem)
        decision = ApprovalDecision(approver=approver, approve=approve, comment=comment, time=utcnow())
        await self._decide(job, job.approval, decision)
        return await self._events.get(job_id)

    async def _decide(self, job: Job, wait: ApprovalWait, decision: ApprovalDecision) -> None:
        """Record one decision; once the policy settles the wait, apply it to the job's
        checkpoint and let the job resume."""
        wait = wait.model_copy(update={"decisions": [*wait.decisions, decision]})
        await self._records.yield_record(job, "approval_decision", decision.model_dump(mode="json"))
        await self._events.emit(job.id, ApprovalChanged(phase="decided", decision=decision))
        outcome = _approvals.outcome_of(self._active.agent(job).approval, wait)
        if outcome is None:
            await self._store.update(job.id, approval=wait)
            return
        wait = wait.model_copy(update={"outcome": outcome})
        await self._records.yield_record(
            job, "approval_resolved", {"outcome": outcome, "calls": [c.tool_use_id for c in wait.calls]}
        )
        saved = await self._store.checkpoint(job.id)
        if saved is not None:
            state = _approvals.apply_outcome(SessionState.model_validate_json(saved[0]), wait)
            await self._store.save_checkpoint(job.id, state.model_dump_json(), saved[1])
        await self._events.emit(job.id, ApprovalChanged(phase="resolved", outcome=outcome))
        self._drop_timer(job.id)
        if job.state is not JobState.AWAITING_APPROVAL:  # decided at once, the job still runs
            await self._store.update(job.id, approval=wait)
            return
        if job.origin != "submit":
            await self._store.update(job.id, approval=wait)
            entry = self._active.get(job.id)
            if entry is not None and entry.decided is not None:
                entry.decided.set()
            return
        resumed = await self._records.resume_event(job, "approval", f"the calls it waited for were {outcome}")
        requeued = await self._events.transition(
            job.id,
            JobState.QUEUED,
            detail=f"{outcome}; resume {resumed.resume} continues from its checkpoint",
            approval=wait,
            only_from=[JobState.AWAITING_APPROVAL],
            resumed=True,
        )
        if requeued is not None:
            await self._wake()

    def _drop_timer(self, job_id: str) -> None:
        """Forget the job's approval timer, cancelled unless it is the caller."""
        entry = self._active.get(job_id)
        timer = entry.approval_timer if entry is not None else None
        if entry is not None and timer is not None:
            entry.approval_timer = None
            if timer is not asyncio.current_task():
                timer.cancel()

    def cancel_timer(self, job_id: str) -> None:
        """Stop the job's approval timer (its job is cancelled)."""
        self._drop_timer(job_id)
        self._active.tidy(job_id)
