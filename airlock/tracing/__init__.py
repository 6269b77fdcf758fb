"""OpenTelemetry traces of jobs, made on the controller: one trace per job (a child's under its
parent's), its spans (queue wait, sandbox provision, turn, model calls in the GenAI semantic
conventions, tool calls) rebuilt from the events the runner already streams back, egress
decisions as span events. Export is OTLP/HTTP when the standard ``OTEL_*`` variables ask for it,
else off (no-op objects; the SDK is not even imported). No content ever becomes an attribute:
only names, ids, sizes, models, token counts, cost and status.
"""

from __future__ import annotations

from ._ids import job_ids, traceparent
from ._tracing import OFF, ExecutionTrace, JobTrace, JobTracing

__all__ = ["OFF", "ExecutionTrace", "JobTrace", "JobTracing", "job_ids", "traceparent"]
