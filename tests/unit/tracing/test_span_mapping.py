"""The spans and span events of a job's trace from its events, without a sandbox: a resumed job
continues its first trace, calls still running when the execution ends are marked, proxy
decisions land on the span they happened in, and OTLP export is on only when asked."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from airlock.config import AgentConfig, load_config
from airlock.jobs import Job, JobState, utcnow
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.sandbox import PoolStats
from airlock.tracing import JobTracing, job_ids, traceparent
from airlock.turn import InferenceFinished, InferenceStarted, ToolStarted, TurnStarted
from layer0 import TurnInput

from .collector import collector


def agent(tmp_path: Path) -> AgentConfig:
    path = tmp_path / "airlock.yaml"
    steps = [{"response": {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}}]
    spec = {
        "provider": {"kind": "scripted", "model": "m1", "script": steps},
        "tools": [],
        "backend": "process",
    }
    path.write_text(json.dumps({"version": 1, "agents": {"a": spec}}))
    return load_config(path).agent("a")


def job(resumes: int = 0) -> Job:
    return Job(
        id="job-1",
        agent="a",
        state=JobState.PROVISIONING,
        input=TurnInput.new("go"),
        queue="a",
        workflow="job-1",
        created_at=utcnow(),
        resumes=resumes,
    )


def traced() -> tuple[JobTracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    return JobTracing.to(SimpleSpanProcessor(exporter)), exporter


def egress(phase: str = "decision", allowed: bool = False) -> EgressEvent:
    return EgressEvent.model_validate(
        {
            "phase": phase,
            "client": "10.0.0.2:1",
            "method": "CONNECT",
            "host": "api.example.com",
            "port": 443,
            "allowed": allowed,
            "rule": "allow api.example.com:443 (spec.network.rules[0])",
            "reason": "matched",
            "bytes_up": 10 if phase == "closed" else None,
        }
    )


def test_a_resumed_job_continues_the_trace_of_its_first_execution() -> None:
    tracing, exporter = traced()
    assert traceparent("job-1") == f"00-{job_ids('job-1')[0]:032x}-{job_ids('job-1')[1]:016x}-01"
    tracing.start(job()).end("interrupted")
    tracing.start(job(resumes=1)).end("succeeded")
    first, again = exporter.get_finished_spans()[-2:]
    assert first.context is not None and again.context is not None and again.parent is not None
    assert first.context.trace_id == again.context.trace_id == job_ids("job-1")[0]
    assert again.parent.span_id == first.context.span_id  # under the first, wherever it ran
    assert again.context.span_id != first.context.span_id


async def test_calls_still_running_when_the_execution_ends_are_marked_unfinished(tmp_path: Path) -> None:
    tracing, exporter = traced()
    trace = tracing.start(job())
    execution = trace.execution(agent(tmp_path), dict)
    await execution.observe(TurnStarted())
    await execution.observe(InferenceStarted(iteration=1))
    await execution.observe(
        InferenceFinished(
            iteration=1,
            stop_reason="tool_use",
            tokens_in=7,
            tokens_out=2,
            cost=Decimal("0.5"),
            total_tokens_in=7,
            total_tokens_out=2,
            total_cost=Decimal("0.5"),
            duration_ms=3,
        )
    )
    await execution.observe(ToolStarted(tool_use_id="t1", name="bash", input={"command": "ls"}))
    execution.end(RuntimeError("the sandbox was lost"))
    trace.end("failed", error=True)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    model = spans["chat m1"].attributes or {}
    assert (
        model["gen_ai.request.model"],
        model["gen_ai.usage.input_tokens"],
        model["airlock.gen_ai.cost_usd"],
    ) == (
        "m1",
        7,
        0.5,
    )
    assert spans["execute_tool bash"].status.status_code is StatusCode.ERROR
    assert spans["execute_tool bash"].status.description == "unfinished"
    assert spans["turn"].status.description == "RuntimeError"
    assert spans["job a"].status.status_code is StatusCode.ERROR


async def test_proxy_decisions_land_on_the_span_they_happened_in(tmp_path: Path) -> None:
    tracing, exporter = traced()
    trace = tracing.start(job())
    execution = trace.execution(agent(tmp_path), dict)
    await execution.observe(egress())  # before the turn: the provision's
    await execution.observe(TurnStarted())
    await execution.observe(egress("closed", allowed=True))  # no tool running: the turn's
    credential = CredentialProxyEvent(
        client="10.0.0.2:1",
        credential="gh",
        method="GET",
        path="/user/tok3n",
        upstream="https://x",
        status=200,
    )
    await execution.observe(credential)
    execution.end(None)
    trace.end("succeeded")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    [denied] = spans["sandbox provision"].events
    assert (denied.name, (denied.attributes or {})["airlock.egress.allowed"]) == ("egress.decision", False)
    closed, used = spans["turn"].events
    assert (closed.name, (closed.attributes or {})["airlock.egress.bytes_up"]) == ("egress.closed", 10)
    assert used.name == "credential_proxy"
    assert "/user/tok3n" not in json.dumps(dict(used.attributes or {}))


def test_otlp_export_is_on_only_when_the_environment_asks() -> None:
    assert not JobTracing.from_env({}).enabled
    assert not JobTracing.from_env(
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x"}
    ).enabled
    assert not JobTracing.from_env({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}).enabled
    asked = JobTracing.from_env({"OTEL_TRACES_EXPORTER": "otlp"})
    assert asked.enabled
    asked.shutdown()  # nothing recorded: nothing sent
    off = JobTracing()
    trace = off.start(job())
    assert trace is off.of("job-1")  # the no-op trace: nothing is kept


async def test_spans_go_to_the_otlp_endpoint_the_environment_names() -> None:
    with collector() as found:
        tracing = JobTracing.from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": found.url})
        tracing.start(job()).end("succeeded")
        await asyncio.to_thread(tracing.shutdown)  # flushes the batch
    assert [path for path, _ in found.received] == ["/v1/traces"]
    assert sorted(found.span_names()) == ["job a", "queue wait"]
    [resource] = found.received[0][1].resource_spans
    assert {a.key: a.value.string_value for a in resource.resource.attributes}[
        "service.name"
    ] == "airlock-controller"


def stats(hits: int, misses: int) -> PoolStats:
    return PoolStats(
        hits=hits,
        misses=misses,
        started=0,
        failed=0,
        destroyed=0,
        claim_ms_p50=None,
        claim_ms_p95=None,
        shapes=[],
    )


@pytest.mark.parametrize(
    ("after", "warmth"),
    [((1, 0), "warm"), ((0, 1), "cold"), ((1, 1), "unknown"), (None, "cold")],
)
async def test_a_provision_is_warm_when_its_pool_was_claimed_from(
    tmp_path: Path, after: tuple[int, int] | None, warmth: str
) -> None:
    tracing, exporter = traced()
    readings = iter([{"process": stats(0, 0)}, {"process": stats(*after)} if after else {}])
    trace = tracing.start(job())
    execution = trace.execution(agent(tmp_path), lambda: next(readings))
    await execution.observe(TurnStarted())
    execution.end(None)
    trace.end("succeeded")
    provision = {s.name: s for s in exporter.get_finished_spans()}["sandbox provision"]
    assert (provision.attributes or {})["airlock.sandbox.pool"] == warmth
