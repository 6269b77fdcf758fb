"""Jobs, states and filters to and from the controller's protobuf messages (job events:
``_event_wire``; only these two modules touch ``airlock._proto.controller``)."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from airlock import wire as cv
from airlock._proto.controller.v1 import controller_pb2 as cpb

from ._model import Job, JobError, JobFilter, JobState

#: JobState ↔ ``JOB_STATE_*``.
JOB_STATE: cv.WireEnum[JobState] = cv.WireEnum(cpb.JobState, "JOB_STATE_", JobState, "job state")


def state_to_proto(state: JobState) -> cpb.JobState.ValueType:
    """The wire enum of a state."""
    return JOB_STATE.to_proto(state)  # type: ignore[no-any-return]


def state_from_proto(value: int) -> JobState:
    """A state from the wire enum.

    Raises:
        ValueError: an unknown or unspecified value.
    """
    try:
        return JOB_STATE.from_proto(value)
    except cv.MalformedMessage:
        raise ValueError(f"unknown job state {value}") from None


def timestamp_to_proto(value: datetime) -> Timestamp:
    """An aware datetime as a Timestamp (UTC, to the microsecond)."""
    ts = Timestamp()
    ts.FromDatetime(value.astimezone(UTC).replace(tzinfo=None))
    return ts


def timestamp_from_proto(value: Timestamp) -> datetime:
    """A Timestamp as an aware UTC datetime."""
    return value.ToDatetime().replace(tzinfo=UTC)


def job_to_proto(job: Job) -> cpb.Job:
    """A job on the wire."""
    message = cpb.Job(
        id=job.id,
        agent=job.agent,
        state=state_to_proto(job.state),
        input=cv.input_to_proto(job.input),
        queue=job.queue,
        parent_id=job.parent_id or "",
        origin=job.origin,
        workflow=job.workflow,
        created_at=timestamp_to_proto(job.created_at),
        children=job.children,
    )
    if job.output is not None:
        message.output.CopyFrom(cv.output_to_proto(job.output))
    if job.error is not None:
        message.error.CopyFrom(cpb.JobError(kind=job.error.kind, message=job.error.message))
    if job.started_at is not None:
        message.started_at.CopyFrom(timestamp_to_proto(job.started_at))
    if job.finished_at is not None:
        message.finished_at.CopyFrom(timestamp_to_proto(job.finished_at))
    if job.max_duration_ms is not None:
        message.max_duration.CopyFrom(cv.duration_to_proto(job.max_duration_ms))
    if job.effects is not None:
        message.effects.CopyFrom(cv.json_to_proto(job.effects))
    return message


def job_from_proto(message: cpb.Job) -> Job:
    """A job from the wire.

    Raises:
        MalformedMessage: the input or output does not decode.
    """
    return Job(
        id=message.id,
        agent=message.agent,
        state=state_from_proto(message.state),
        input=cv.input_from_proto(message.input),
        output=cv.output_from_proto(message.output) if message.HasField("output") else None,
        error=JobError(kind=message.error.kind, message=message.error.message)
        if message.HasField("error")
        else None,
        queue=message.queue,
        parent_id=message.parent_id or None,
        origin=message.origin,
        workflow=message.workflow,
        created_at=timestamp_from_proto(message.created_at),
        started_at=timestamp_from_proto(message.started_at) if message.HasField("started_at") else None,
        finished_at=timestamp_from_proto(message.finished_at) if message.HasField("finished_at") else None,
        max_duration_ms=cv.duration_from_proto(message.max_duration)
        if message.HasField("max_duration")
        else None,
        children=list(message.children),
        effects=cv.json_from_proto(message.effects, present=message.HasField("effects")),
    )


def filter_from_proto(message: cpb.ListJobsRequest) -> JobFilter:
    """A ListJobs request as a filter (limit 0 → 50, capped at 1000).

    Raises:
        ValueError: an unknown state.
    """
    return JobFilter(
        states=frozenset(state_from_proto(s) for s in message.states),
        agent=message.agent or None,
        session=message.session or None,
        parent_id=message.parent_id or None,
        workflow=message.workflow or None,
        limit=min(message.limit or 50, 1000),
        before_id=message.before_id or None,
    )


def filter_to_proto(where: JobFilter) -> cpb.ListJobsRequest:
    """A filter as a ListJobs request."""
    return cpb.ListJobsRequest(
        states=[state_to_proto(s) for s in sorted(where.states)],
        agent=where.agent or "",
        session=where.session or "",
        parent_id=where.parent_id or "",
        workflow=where.workflow or "",
        limit=where.limit,
        before_id=where.before_id or "",
    )
