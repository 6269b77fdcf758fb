"""A job's trace, end to end on the process backend: the span tree the controller rebuilds from
the runner's events (queue wait, provision, turn, model calls, tool calls), egress decisions as
span events, a delegated child in its parent's trace, and no secret in any attribute."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from airlock.config import AgentConfig, load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import Job, JobEvent, JobState, StateChanged
from airlock.observability import JsonFormatter
from airlock.proxy import EgressEvent
from airlock.sandbox import SandboxEvent, SandboxEventSink
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step
from airlock.tracing import JobTracing, job_ids
from airlock.turn import ToolStarted
from layer0 import TurnInput
from tests.support.controller import running_controller

from .collector import collector

pytestmark = pytest.mark.timeout(120)

SECRET = "s3cr3t-Pa55word-4-tracing"


def scripted(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        "worker": scripted(
            [
                tool_step(
                    "bash", {"command": f"echo {SECRET} | wc -c"}, id="t1", usage=(11, 5), cost="0.0001"
                ),
                text_step("done", usage=(20, 3), cost="0.0002"),
            ],
            ["bash"],
        ),
        "lead": scripted(
            [
                tool_step("delegate", {"agent": "helper", "message": "help"}, id="d1"),
                text_step("delegated"),
            ],
            ["delegate"],
            effects={"delegate": ["helper"]},
        ),
        "helper": scripted([text_step("helped")], []),
        "gated": scripted(
            [tool_step("bash", {"command": "echo gated"}, id="g1"), text_step("done")],
            ["bash"],
            approval={"tools": ["bash"], "approvers": ["alice"]},
        ),
    },
}

DENIED = EgressEvent(
    phase="decision",
    client="10.0.0.2:40000",
    method="CONNECT",
    host="evil.example",
    port=443,
    allowed=False,
    rule="default deny",
    reason="no allow rule matches evil.example:443",
)


class DeniedEgressRunner(AgentRunner):
    """Reports a denied egress decision while each tool call runs, as an egress proxy would (the
    process backend runs no proxy)."""

    async def run(self, agent: AgentConfig, input: TurnInput, **kwargs: Any) -> Any:
        sink: SandboxEventSink | None = kwargs.pop("events", None)

        async def events(event: SandboxEvent) -> None:
            if sink is not None:
                await sink(event)
                if isinstance(event, ToolStarted):
                    await sink(DENIED)

        return await super().run(agent, input, events=events, **kwargs)


@contextlib.asynccontextmanager
async def traced(tmp_path: Path) -> AsyncIterator[tuple[JobService, InMemorySpanExporter]]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    exporter = InMemorySpanExporter()
    tracing = JobTracing.to(SimpleSpanProcessor(exporter))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, DeniedEgressRunner(load_config(path)), state, tracing=tracing) as service,
    ):
        yield service, exporter
    tracing.shutdown()


def by_name(spans: Iterable[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


def children(spans: Iterable[ReadableSpan], parent: ReadableSpan) -> list[str]:
    assert parent.context is not None
    return sorted(
        s.name for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id
    )


async def test_a_sandboxed_job_is_one_trace_of_the_runners_spans_under_the_controllers(
    tmp_path: Path,
) -> None:
    async with traced(tmp_path) as (service, exporter):
        job = await service.run("worker", TurnInput.new("go"))
        assert job.state is JobState.SUCCEEDED, job.error
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    root = named["job worker"]
    assert root.parent is None
    assert {s.context.trace_id for s in spans if s.context is not None} == {job_ids(job.id)[0]}
    assert root.context is not None and root.context.span_id == job_ids(job.id)[1]
    assert children(spans, root) == ["queue wait", "sandbox provision", "turn"]
    turn = named["turn"]
    assert children(spans, turn) == ["chat unknown", "chat unknown", "execute_tool bash"]
    assert root.attributes is not None and root.attributes["airlock.job.outcome"] == "succeeded"
    provision = named["sandbox provision"]
    assert provision.attributes is not None
    assert provision.attributes["airlock.sandbox.backend"] == "process"
    assert provision.attributes["airlock.sandbox.pool"] == "cold"
    models = sorted((s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0)
    first = models[0].attributes
    assert first is not None
    assert (first["gen_ai.system"], first["gen_ai.usage.input_tokens"]) == ("scripted", 11)
    assert (first["gen_ai.usage.output_tokens"], first["airlock.gen_ai.cost_usd"]) == (5, 0.0001)
    tool = named["execute_tool bash"]
    assert tool.attributes is not None and tool.attributes["gen_ai.tool.call.id"] == "t1"
    assert tool.status.status_code is not StatusCode.ERROR
    for span in spans:  # the spans nest in time: each within its parent
        parent = next(
            (p for p in spans if span.parent and p.context and p.context.span_id == span.parent.span_id), None
        )
        if parent is not None:
            assert parent.start_time is not None and span.start_time is not None
            assert parent.start_time <= span.start_time and span.end_time <= parent.end_time  # type: ignore[operator]


async def test_an_egress_decision_is_an_event_of_the_tool_call_it_happened_in(tmp_path: Path) -> None:
    async with traced(tmp_path) as (service, exporter):
        job = await service.run("worker", TurnInput.new("go"))
        assert job.state is JobState.SUCCEEDED, job.error
    tool = by_name(exporter.get_finished_spans())["execute_tool bash"]
    [event] = tool.events
    assert event.name == "egress.decision"
    assert dict(event.attributes or {}) == {
        "airlock.egress.destination": "evil.example:443",
        "airlock.egress.method": "CONNECT",
        "airlock.egress.allowed": False,
        "airlock.egress.rule": "default deny",
        "airlock.egress.reason": "no allow rule matches evil.example:443",
    }


async def test_a_secret_in_a_tool_input_never_becomes_an_attribute(tmp_path: Path) -> None:
    async with traced(tmp_path) as (service, exporter):
        job = await service.run("worker", TurnInput.new(f"use {SECRET}"))
        assert job.state is JobState.SUCCEEDED, job.error
    spans = exporter.get_finished_spans()
    assert spans
    values = [str(v) for s in spans for v in (s.attributes or {}).values()]
    values += [str(v) for s in spans for e in s.events for v in (e.attributes or {}).values()]
    values += [s.name for s in spans] + [s.status.description or "" for s in spans]
    assert not [v for v in values if SECRET in v]


async def test_a_delegated_child_is_in_its_parents_trace(tmp_path: Path) -> None:
    async with traced(tmp_path) as (service, exporter):
        job = await service.run("lead", TurnInput.new("go"))
        assert job.state is JobState.SUCCEEDED, job.error
    spans = exporter.get_finished_spans()
    named = by_name(spans)
    lead, helper = named["job lead"], named["job helper"]
    assert "job helper" in children(spans, lead)
    assert {s.context.trace_id for s in spans if s.context is not None} == {job_ids(job.id)[0]}
    assert children(spans, helper) == ["sandbox provision", "turn"]


async def test_a_job_resumed_after_its_approval_continues_its_trace(tmp_path: Path) -> None:
    async with traced(tmp_path) as (service, exporter):
        job = await service.submit("gated", TurnInput.new("go"))
        async for event in service.watch(job.id):
            if isinstance(event.data, StateChanged) and event.data.state is JobState.AWAITING_APPROVAL:
                break
        await service.approve(job.id, "alice")
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans if s.context is not None} == {job_ids(job.id)[0]}
    first, again = sorted((s for s in spans if s.name == "job gated"), key=lambda s: s.start_time or 0)
    assert first.parent is None and again.parent is not None
    assert again.parent.span_id == job_ids(job.id)[1]
    assert (first.attributes or {})["airlock.job.outcome"] == "awaiting_approval"
    assert (again.attributes or {})["airlock.job.outcome"] == "succeeded"
    suspended = next(
        s for s in spans if s.name == "turn" and s.parent and s.parent.span_id == job_ids(job.id)[1]
    )
    assert (suspended.attributes or {})["airlock.turn.suspended_for_approval"] == 1
    assert suspended.status.status_code is not StatusCode.ERROR


async def test_the_controller_exports_its_jobs_traces_where_the_environment_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    with collector() as found:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
        async with running_controller(path, tmp_path / "data", tmp_path / "sandboxes", "unused") as (
            controller,
            _,
        ):
            assert controller.service is not None
            job = await controller.service.run("worker", TurnInput.new("go"))
            assert job.state is JobState.SUCCEEDED, job.error
        # the controller flushed its spans as it stopped
    names = found.span_names()
    assert {"job worker", "queue wait", "sandbox provision", "turn", "execute_tool bash"} <= set(names)


async def test_a_json_log_line_written_during_a_traced_job_carries_its_trace_id(tmp_path: Path) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("airlock.test.trace")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    def on_event(event: JobEvent, job: Job | None) -> None:
        if isinstance(event.data, StateChanged):
            logger.info("state %s", event.data.state.value)

    try:
        async with traced(tmp_path) as (service, exporter):
            service.events.subscribe(on_event)
            job = await service.run("worker", TurnInput.new("go"))
    finally:
        logger.removeHandler(handler)
    lines = {line["message"]: line for line in map(json.loads, out.getvalue().splitlines())}
    root = by_name(exporter.get_finished_spans())["job worker"]
    assert root.context is not None
    assert lines["state running"]["trace_id"] == format(root.context.trace_id, "032x")
    assert lines["state running"]["job_id"] == job.id
