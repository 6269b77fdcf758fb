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
def job_log_context(job: Job) -> Iterator[None]:
    """While the block runs (in this task), log records are about ``job``."""
    token = _fields.set({"job_id": job.id, "agent": job.agent, "tenant": job.tenant})
    try:
        yield
    finally:
        _fields.reset(token)


def job_log_fields() -> dict[str, str]:
    """The job fields of the current context (empty outside a job)."""
    return dict(_fields.get() or {})
