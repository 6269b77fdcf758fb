"""Job store rows ↔ jobs and events (the same columns on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue, ValidationError

from airlock.errors import AirlockError
from airlock.jobs import (
    ACTIVE_STATES,
    JOB_EVENT_DATA,
    ApprovalWait,
    FixedPointRun,
    Job,
    JobError,
    JobEvent,
    JobState,
)
from airlock.state import Row
from layer0 import TurnInput, TurnOutput

#: The columns a :class:`~airlock.jobs.Job` is read from, in :func:`new_row` order.
COLUMNS = (
    "id, agent, state, queue, parent_id, origin, workflow, session, input, output, error, "
    "created_at, started_at, finished_at, max_duration_ms, children, effects, resumes, approval, "
    "fixed_point, tenant, owner, forked_from, fork_point, sandbox_id"
)
#: ``?`` for each of :data:`COLUMNS`.
MARKS = ", ".join("?" * len(COLUMNS.split(", ")))

#: Jobs a worker holds: active, or a child created but not started or waiting for approval
#: (children never queue: their parent's worker runs them).
HELD = f"state IN ({', '.join('?' * len(ACTIVE_STATES))}) OR (state IN (?, ?) AND origin != 'submit')"
HELD_ARGS = (
    *sorted(s.value for s in ACTIVE_STATES),
    JobState.QUEUED.value,
    JobState.AWAITING_APPROVAL.value,
)


class JobStoreError(AirlockError):
    """The job store cannot be read or written (the message names the database)."""


def new_job_id() -> str:
    """A fresh job id: ``j`` + 11 hex digits of milliseconds + 6 random hex digits (sortable)."""
    import secrets

    return f"j{int(time.time() * 1000):011x}{secrets.token_hex(3)}"


def dt(value: float | None) -> datetime | None:
    """A stored time (seconds since the epoch) as a UTC datetime."""
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def dump(value: JsonValue) -> str:
    """Compact JSON text."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def governance_columns(approval: ApprovalWait | None, fixed_point: FixedPointRun | None) -> dict[str, str]:
    """The column values that replace a job's approval wait and fixed-point record (those given)."""
    sets = {}
    if approval is not None:
        sets["approval"] = approval.model_dump_json()
    if fixed_point is not None:
        sets["fixed_point"] = fixed_point.model_dump_json()
    return sets


def job_of(row: Row) -> Job:
    """The job a row of :data:`COLUMNS` holds."""
    created = dt(row["created_at"])
    assert created is not None
    return Job(
        id=row["id"],
        agent=row["agent"],
        state=JobState(row["state"]),
        input=TurnInput.model_validate_json(row["input"]),
        output=TurnOutput.model_validate_json(row["output"]) if row["output"] else None,
        error=JobError.model_validate_json(row["error"]) if row["error"] else None,
        queue=row["queue"],
        parent_id=row["parent_id"],
        origin=row["origin"],
        workflow=row["workflow"],
        created_at=created,
        started_at=dt(row["started_at"]),
        finished_at=dt(row["finished_at"]),
        max_duration_ms=row["max_duration_ms"],
        children=json.loads(row["children"]),
        effects=json.loads(row["effects"]) if row["effects"] else None,
        resumes=row["resumes"],
        approval=ApprovalWait.model_validate_json(row["approval"]) if row["approval"] else None,
        fixed_point=FixedPointRun.model_validate_json(row["fixed_point"]) if row["fixed_point"] else None,
        tenant=row["tenant"],
        owner=row["owner"],
        forked_from=row["forked_from"],
        fork_point=row["fork_point"],
        sandbox=row["sandbox_id"],
    )


def event_of(row: Row) -> JobEvent:
    """The event a row of ``events`` holds.

    Raises:
        JobStoreError: its data does not read as an event.
    """
    when = dt(row["time"])
    assert when is not None
    try:
        data = JOB_EVENT_DATA.validate_json(row["data"])
    except ValidationError as e:
        raise JobStoreError(
            f"event {row['seq']} of job {row['job_id']} does not read as an event: {e}"
        ) from e
    return JobEvent(job_id=row["job_id"], seq=row["seq"], time=when, data=data)


def new_row(job: Job) -> tuple[Any, ...]:
    """A new job's row, in :data:`COLUMNS` order."""
    fixed_point = job.fixed_point.model_dump_json() if job.fixed_point is not None else None
    return (
        job.id,
        job.agent,
        job.state.value,
        job.queue,
        job.parent_id,
        job.origin,
        job.workflow,
        job.session,
        job.input.model_dump_json(),
        None,
        None,
        job.created_at.timestamp(),
        None,
        None,
        job.max_duration_ms,
        "[]",
        None,
        0,
        None,
        fixed_point,
        job.tenant,
        job.owner,
        job.forked_from,
        job.fork_point,
        job.sandbox,
    )
