"""What a span or span event says of a job, a sandbox, a model call, a tool call and an egress
decision: names, ids, sizes, models, token counts, cost, status, never content (a tool's input
and output, a model's text, a credential's value stay out)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from airlock.config import AgentConfig
from airlock.jobs import Job
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.turn import InferenceFinished, InferenceStarted, ToolFinished, ToolStarted

#: An attribute value this package sets.
Value = str | bool | int | float
Attributes = Mapping[str, Value]


def job_attributes(job: Job) -> dict[str, Value]:
    """The job span's: its id, agent, tenant, origin, parent, resumes."""
    attributes: dict[str, Value] = {
        "airlock.job.id": job.id,
        "airlock.agent": job.agent,
        "airlock.tenant": job.tenant,
        "airlock.job.origin": job.origin,
        "airlock.job.resumes": job.resumes,
    }
    if job.parent_id is not None:
        attributes["airlock.job.parent_id"] = job.parent_id
    return attributes


def provision_attributes(agent: AgentConfig) -> dict[str, Value]:
    """The sandbox provision span's: the backend and the isolation boundaries."""
    return {
        "airlock.sandbox.backend": agent.backend,
        "airlock.sandbox.isolation": ",".join(b.type for b in agent.environment.isolation) or "none",
    }


def model_call_attributes(
    agent: AgentConfig, started: InferenceStarted, finished: InferenceFinished | None
) -> dict[str, Value]:
    """A model call's, in the GenAI semantic conventions (plus its cost, USD)."""
    provider = agent.spec.provider
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider.kind,
        "gen_ai.request.model": started.model or provider.model or "unknown",
        "airlock.gen_ai.iteration": started.iteration,
    }
    if finished is not None:
        attributes["gen_ai.usage.input_tokens"] = finished.tokens_in
        attributes["gen_ai.usage.output_tokens"] = finished.tokens_out
        attributes["gen_ai.response.finish_reasons"] = finished.stop_reason
        attributes["airlock.gen_ai.duration_ms"] = finished.duration_ms
        if finished.cost is not None:
            attributes["airlock.gen_ai.cost_usd"] = _usd(finished.cost)
    return attributes


def tool_call_attributes(started: ToolStarted, finished: ToolFinished | None) -> dict[str, Value]:
    """A tool call's: its name, call id and outcome, and the size of its output (not the output)."""
    attributes: dict[str, Value] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": started.name,
        "gen_ai.tool.call.id": started.tool_use_id,
    }
    if finished is not None:
        attributes["airlock.tool.success"] = finished.success
        attributes["airlock.tool.output_bytes"] = len(finished.output.encode())
        attributes["airlock.tool.duration_ms"] = finished.duration_ms
        if finished.exit_code is not None:
            attributes["airlock.tool.exit_code"] = finished.exit_code
    return attributes


def egress_attributes(event: EgressEvent) -> dict[str, Value]:
    """An egress proxy decision (or the end of an allowed connection) as a span event's."""
    attributes: dict[str, Value] = {
        "airlock.egress.destination": f"{event.host}:{event.port}",
        "airlock.egress.method": event.method,
        "airlock.egress.allowed": event.allowed,
        "airlock.egress.rule": event.rule,
        "airlock.egress.reason": event.reason,
    }
    for name in ("bytes_up", "bytes_down", "duration_ms"):
        value = getattr(event, name)
        if value is not None:
            attributes[f"airlock.egress.{name}"] = value
    return attributes


def credential_attributes(event: CredentialProxyEvent) -> dict[str, Value]:
    """A credential proxy request as a span event's: the credential's name (never its value),
    the status and the sizes; not the path or the upstream (either may carry an identifier)."""
    return {
        "airlock.credential.name": event.credential,
        "airlock.credential.method": event.method,
        "airlock.credential.status": event.status,
        "airlock.credential.redacted": event.redacted,
        "airlock.credential.bytes_up": event.bytes_up,
        "airlock.credential.bytes_down": event.bytes_down,
    }


def _usd(cost: Decimal) -> float:
    return float(cost)
