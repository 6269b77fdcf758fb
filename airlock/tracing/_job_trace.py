"""A job's trace: its span (a submitted job's is the trace's root) with its queue wait, and one
:class:`~._execution.Execution` per execution of its turn."""

from __future__ import annotations

import contextlib
import time

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from airlock.config import AgentConfig
from airlock.jobs import Job

from ._attributes import job_attributes
from ._execution import Execution, PoolReader
from ._ids import forced_ids, remote_parent


class LiveJobTrace:
    """A job's span, begun at its creation (a first execution) or now (a resumed one)."""

    def __init__(self, tracer: Tracer, job: Job, parent: Span | None) -> None:
        self._tracer = tracer
        now = time.time_ns()
        first = job.resumes == 0
        if parent is None and not first:  # resumed here: under the job's first span, wherever it ran
            parent = remote_parent(job.id)
        context = trace.set_span_in_context(parent) if parent is not None else None
        start = _ns(job.created_at.timestamp()) if first else now
        with forced_ids(job.id) if first else contextlib.nullcontext():
            self.span = tracer.start_span(
                f"job {job.agent}", context, attributes=job_attributes(job), start_time=min(start, now)
            )
        if first and job.origin == "submit":
            queued = job.started_at.timestamp() if job.started_at is not None else now / 1e9
            self._queue_wait(start, max(start, min(_ns(queued), now)))

    @property
    def trace_id(self) -> str:
        """The trace's id, 32 hex digits."""
        return format(self.span.get_span_context().trace_id, "032x")

    def _queue_wait(self, start: int, end: int) -> None:
        span = self._tracer.start_span("queue wait", trace.set_span_in_context(self.span), start_time=start)
        span.end(end)

    def execution(self, agent: AgentConfig, pools: PoolReader) -> Execution:
        """An execution of the job's turn begins now (its sandbox is being provisioned)."""
        return Execution(self._tracer, self.span, agent, pools)

    def end(self, outcome: str, *, error: bool = False) -> None:
        """The job's span ends: ``outcome`` as its ``airlock.job.outcome``."""
        self.span.set_attribute("airlock.job.outcome", outcome)
        if error:
            self.span.set_status(Status(StatusCode.ERROR, outcome))
        self.span.end()


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
