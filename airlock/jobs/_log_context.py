"""Which job the code running now works for, for the log records it writes (a JSON log line
carries the job id, agent and tenant); a context variable, so each job's task sees its own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._model import Job

__all__ = ["job_log_context", "job_log_fields"]

_fields: ContextVar[dict[str, str] | None] = ContextVar("airlock_job_log_fields", default=None)


@contextlib.contextmanager
def job_log_context(job: Job, trace_id: str | None = None) -> Iterator[None]:
    """While the block runs (in this task), log records are about ``job`` (and its trace's
    ``trace_id`` when it is traced: its span is not current, the trace is built from events)."""
    fields = {"job_id": job.id, "agent": job.agent, "tenant": job.tenant}
    if trace_id is not None:
        fields["trace_id"] = trace_id
    token = _fields.set(fields)
    try:
        yield
    finally:
        _fields.reset(token)


def job_log_fields() -> dict[str, str]:
    """The job fields of the current context (empty outside a job)."""
    return dict(_fields.get() or {})
