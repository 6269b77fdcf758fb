"""JSON log lines: one object per record, with the job it is about when known.

Fields: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``; ``job_id``, ``agent``
and ``tenant`` inside a job's run (:func:`airlock.jobs.job_log_context`); ``trace_id``: the
job's trace when it is traced, else that of the current OpenTelemetry span; ``exception`` (its
traceback) when one was logged. Only what the record's message says is written: the
controller never logs a secret, and nothing here adds the record's arguments or extras.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from airlock.jobs import job_log_fields

__all__ = ["JsonFormatter", "trace_id"]


def trace_id() -> str | None:
    """The current OpenTelemetry trace id (32 hex digits), None without a recording span."""
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - a dependency
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **job_log_fields(),
        }
        trace = line.get("trace_id") or trace_id()
        if trace is not None:
            line["trace_id"] = trace
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        return json.dumps(line, default=str)
