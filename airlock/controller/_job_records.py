"""The records the controller writes itself: where a job's tree keeps its weave, what each
job's first record depends on, noting that a job continues from its checkpoint; the audit."""

from __future__ import annotations

import logging
from typing import Any

from airlock.jobs import (
    EffectOutcome,
    Job,
    JobResumed,
    JobState,
    ResumeCause,
)
from airlock.turn import (
    CONE_KEY,
    CONE_SCOPE,
    SessionState,
)
from airlock.weave import ChainReport, RecordType, TurnRecord
from layer0 import (
    Scope,
    TurnInput,
)

from ._durable import in_flight
from ._job_events import JobEvents
from ._journal import session_hash
from ._weaving import Weaves

_log = logging.getLogger("airlock.jobs")


class JobRecords:
    """Records of a job tree written by the controller itself (inputs, effects, approvals,
    resumes), the resume bookkeeping, and the audit of a tree."""

    def __init__(self, weaves: Weaves, events: JobEvents) -> None:
        self.weaves = weaves
        self.store = events.store
        self._events = events

    async def root(self, job: Job) -> str:
        """The root of ``job``'s tree (the submitted job its weave is kept under): up through
        its parents, and from a fork to the job it was forked from (a branch of that tree)."""
        while (up := job.parent_id or job.forked_from) is not None:
            parent = await self.store.get(up)
            if parent is None:
                break
            job = parent
        return job.id

    async def record_fork(self, root: str, job: Job, state: SessionState, manifest: str) -> tuple[str, ...]:
        """Record where the fork ``job`` starts (its thread's first record, depending on the
        record it was forked at, its state hash covering the conversation and workspace
        there); the records its first response depends on."""
        seq, _, at = (job.fork_point or "").partition("@")
        content: dict[str, Any] = {
            "from": job.forked_from,
            "checkpoint": int(seq) if seq.isdigit() else None,
            "record": at or None,
            "workspace": manifest or None,
        }
        return await self._first(
            root, job, "fork", content, (at,) if at else (), session_hash(state, manifest)
        )

    async def cone_entry(self, root: str, tip: str) -> tuple[Scope, str, Any]:
        """The state entry a causal_cone turn reads: the records ``tip`` depends on (itself,
        the turn's input, aside), linearized, and the size of the whole weave. The sandbox
        receives no record outside the cone."""
        cone, total = await self.weaves.cone(root, tip)
        records = [
            {"id": r.id, "agent": r.agent, "type": r.type.value, "kind": r.kind, "content": r.content}
            for r in cone
            if r.id != tip
        ]
        return Scope.custom(CONE_SCOPE), CONE_KEY, {"records": records, "total": total}

    async def record_input(
        self, root: str, job: Job, input: TurnInput, tip: TurnRecord | None
    ) -> tuple[str, ...]:
        """Record what the job was asked (once: not when its thread has a ``tip`` already);
        the records its first response depends on."""
        if tip is not None:
            return (tip.id,)
        deps: tuple[str, ...] = ()
        if job.parent_id is not None:
            asked = await self.delegating_record(root, job.parent_id, job.agent, input)
            deps = (asked.id,) if asked is not None else ()
        content: dict[str, Any] = {"message": input.message.model_dump(mode="json"), "origin": job.origin}
        return await self._first(root, job, "input", content, deps)

    async def _first(
        self, root: str, job: Job, kind: str, content: dict[str, Any], deps: tuple[str, ...], post: str = ""
    ) -> tuple[str, ...]:
        """Record a job's first record (its ``input``, or where its ``fork`` starts), naming
        who submitted a job of its own tree's top (a child's are its parent's)."""
        if job.owner is not None and job.parent_id is None:
            content |= {"submitted_by": job.owner, "tenant": job.tenant}
        record = await self.weaves.record(
            root,
            job=job.id,
            agent=job.agent,
            type=RecordType.SPEECH,
            kind=kind,
            content=content,
            depends_on=deps,
            post=post,
            derive_state=not post,
        )
        return (record.id,)

    async def delegating_record(
        self, root: str, parent: str, agent: str, input: TurnInput
    ) -> TurnRecord | None:
        """The parent's call that asked for this child (a delegate or handoff naming it): what
        the child read. Its sibling children are not in its past. Else the parent's last record."""
        thread = await self.weaves.thread(root, parent)
        text = input.message.joined_text()
        for record in reversed(thread):
            content = record.content
            if record.kind != "tool_call" or not isinstance(content, dict):
                continue
            asked = content.get("input")
            if (
                content.get("tool") in ("delegate", "handoff")
                and isinstance(asked, dict)
                and asked.get("agent") == agent
                and asked.get("message", text) == text
            ):
                return record
        return thread[-1] if thread else None

    async def yield_record(self, job: Job, kind: str, content: dict[str, Any]) -> TurnRecord:
        return await self.weaves.record(
            await self.root(job),
            job=job.id,
            agent=job.agent,
            type=RecordType.YIELD,
            kind=kind,
            content=content,
            derive_state=True,
        )

    async def crash_resumes(self, job_id: str) -> int:
        events = await self.store.events(job_id, kind="resume")
        return sum(1 for e in events if isinstance(e.data, JobResumed) and e.data.cause != "approval")

    async def resume_event(self, job: Job, cause: ResumeCause, reason: str) -> JobResumed:
        """Record (an event and a SILENCE record) that ``job`` continues from its checkpoint."""
        saved = await self.store.checkpoint(job.id)
        state = SessionState.model_validate_json(saved[0]) if saved is not None else None
        iteration = state.iterations if state is not None else 0
        lost = [u.id for u in in_flight(state, saved[1])] if state is not None and saved is not None else []
        event = JobResumed(
            resume=job.resumes + 1, cause=cause, reason=reason, iteration=iteration, lost_calls=lost
        )
        await self._events.emit(job.id, event)
        root = await self.root(job)
        await self.weaves.record(
            root,
            job=job.id,
            agent=job.agent,
            type=RecordType.SILENCE,
            kind="resume",
            content={"cause": cause, "reason": reason, "iteration": iteration, "resume": job.resumes + 1},
        )
        return event

    async def resumed(
        self, job: Job, cause: ResumeCause, reason: str, into: JobState = JobState.PROVISIONING
    ) -> Job:
        """Note that ``job`` continues in a fresh sandbox from its last checkpoint: now
        (PROVISIONING), or once a worker takes it (QUEUED: a job the previous controller held)."""
        event = await self.resume_event(job, cause, reason)
        detail = f"resume {event.resume} ({reason}); continuing after model call {event.iteration}"
        return await self._events.transition(job.id, into, detail=detail, resumed=True) or job

    async def effect_record(self, root: Job, owner: Job, outcome: EffectOutcome, child: Job | None) -> None:
        """One applied (or refused) effect in its declaring job's thread; a delegate's or
        handoff's outcome also depends on the child's last record (a knot of the two)."""
        deps = await self.weaves.tips(root.id, owner.id, child.id) if child is not None else ()
        content = outcome.model_dump(mode="json", exclude={"child_output", "follow_up"}, exclude_none=True)
        await self.weaves.record(
            root.id,
            job=owner.id,
            agent=owner.agent,
            type=RecordType.ACTION,
            kind="effect",
            content=content,
            depends_on=deps,
            derive_state=True,
        )

    async def weave(self, job: Job) -> tuple[str, list[TurnRecord]]:
        """The root of ``job``'s tree and every turn record of it, as stored."""
        root = await self.root(job)
        return root, await self.weaves.load(root)

    async def verify(self, job: Job) -> tuple[str, ChainReport]:
        """Check the hash chain (and, with the audit key, the seals) of ``job``'s tree."""
        root = await self.root(job)
        return root, await self.weaves.verify(root)
