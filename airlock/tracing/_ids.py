"""A job's trace and span ids, derived from its id: every replica that runs the job (a resumed
or adopted one too) continues the same trace without a stored context."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from contextvars import ContextVar

from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

#: The ids the next span started in this context takes (set only around a job span's start).
_FORCED: ContextVar[tuple[int, int] | None] = ContextVar("airlock_tracing_ids", default=None)


def job_ids(job_id: str) -> tuple[int, int]:
    """``(trace_id, span_id)`` of the job span of a submitted job ``job_id`` (a child's span id
    is its own; its trace id is its root's)."""
    digest = hashlib.sha256(f"airlock-job:{job_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def traceparent(job_id: str) -> str:
    """The W3C ``traceparent`` of a submitted job's span (what a resumed execution continues)."""
    trace_id, span_id = job_ids(job_id)
    return f"00-{trace_id:032x}-{span_id:016x}-01"


def remote_parent(job_id: str) -> NonRecordingSpan:
    """The job span of ``job_id`` as a remote parent (its replica may be gone)."""
    trace_id, span_id = job_ids(job_id)
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return NonRecordingSpan(context)


@contextlib.contextmanager
def forced_ids(job_id: str) -> Iterator[None]:
    """Within it, the span started takes the ids of ``job_id`` (see :func:`job_ids`)."""
    token = _FORCED.set(job_ids(job_id))
    try:
        yield
    finally:
        _FORCED.reset(token)


def forced() -> tuple[int, int] | None:
    """The ids :class:`forced_ids` set here (None: none)."""
    return _FORCED.get()
