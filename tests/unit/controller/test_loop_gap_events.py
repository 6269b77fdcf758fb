"""The controller carries a turn's lifecycle events (budget, compaction) through: recorded with
the job from a real runner, converted to and from the job event message, watched over gRPC, and
rendered by the CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.cli._render import lifecycle_line
from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, SqliteJobStore
from airlock.jobs import ControllerClient, JobEvent, JobState, LogLine, SandboxActivity
from airlock.jobs import event_wire as ew
from airlock.state import SqliteStore
from airlock.testing import text_step, tools_step
from airlock.turn import LifecycleEvent
from layer0 import (
    AgentId,
    BudgetAction,
    BudgetDecision,
    BudgetWarning,
    CompactionComplete,
    ContextPressure,
    CostIncurred,
    LogLevel,
    PreCompactionFlush,
    ProviderManaged,
    Scope,
    TurnInput,
    WorkflowId,
)

pytestmark = pytest.mark.timeout(120)

A = AgentId("coder")
SAMPLES = [
    CostIncurred(agent=A, cost=Decimal("0.01"), cumulative=Decimal("0.02")),
    BudgetWarning(workflow=WorkflowId("wf"), spent=Decimal("0.8"), limit=Decimal("1")),
    BudgetAction(workflow=WorkflowId("wf"), action=BudgetDecision.halt_workflow()),
    ContextPressure(agent=A, fill_percent=91.0, tokens_used=91, tokens_available=100),
    PreCompactionFlush(agent=A, scope=Scope.global_()),
    CompactionComplete(agent=A, strategy="SlidingWindow", tokens_freed=50),
    ProviderManaged(agent=A, provider="anthropic", tokens_before=150_000, tokens_after=3_000),
]


def job_event(data: object) -> JobEvent:
    return JobEvent(job_id="j1", seq=3, time=datetime(2026, 11, 23, 10, 0, tzinfo=UTC), data=data)  # type: ignore[arg-type]


@pytest.mark.parametrize("payload", SAMPLES, ids=lambda e: e.type)
def test_a_lifecycle_event_round_trips_through_the_job_event_message(payload: object) -> None:
    event = job_event(SandboxActivity(event=LifecycleEvent(event=payload, agent="coder")))  # type: ignore[arg-type]
    message = ew.event_to_proto(event)
    back = type(message)()
    back.ParseFromString(message.SerializeToString())
    assert ew.event_from_proto(back) == event


def test_a_log_line_holding_what_looks_like_a_lifecycle_event_stays_a_log_line() -> None:
    for data in ({"lifecycle": {"type": "nonsense"}}, {"other": 1}, None):
        line = job_event(LogLine(level=LogLevel.INFO, message="m", source="turn.lifecycle", data=data))
        assert ew.event_from_proto(ew.event_to_proto(line)) == line


def test_the_cli_renders_a_line_for_the_events_worth_one() -> None:
    lines = [lifecycle_line(LifecycleEvent(event=e, agent="coder")) for e in SAMPLES]
    assert lines[0] is None and lines[4] is None  # each call's cost is on its model line; the flush
    assert lines[1] == "[yellow]budget warning[/]: $0.8 of $1 spent (80%)"
    assert lines[2] == "[red]budget[/]: halt_workflow (workflow wf)"
    assert "91%" in str(lines[3]) and "50 tokens freed" in str(lines[5]) and "150000 → 3000" in str(lines[6])


async def test_a_jobs_lifecycle_events_are_recorded_and_watched(tmp_path: Path) -> None:
    agent = {
        "provider": {
            "kind": "scripted",
            "script": [
                tools_step([("calculator", {"expression": "1+1"})], cost="0.6"),
                text_step("2", cost="0.3"),
            ],
        },
        "tools": ["calculator"],
        "defaults": {"max_cost": "1"},
        "backend": "process",
    }
    config = tmp_path / "airlock.yaml"
    config.write_text(json.dumps({"version": 1, "agents": {"calc": agent}}))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(config)), state) as service,
    ):
        job = await service.submit("calc", TurnInput.new("1+1?", metadata={"workflow": "wf-1"}))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        recorded = await store.events(job.id)
        lifecycle = [
            e.data.event.event
            for e in recorded
            if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, LifecycleEvent)
        ]
        assert lifecycle == [
            CostIncurred(agent=AgentId("calc"), cost=Decimal("0.6"), cumulative=Decimal("0.6")),
            BudgetWarning(workflow=WorkflowId("wf-1"), spent=Decimal("0.6"), limit=Decimal("1")),
            CostIncurred(agent=AgentId("calc"), cost=Decimal("0.3"), cumulative=Decimal("0.9")),
            BudgetWarning(workflow=WorkflowId("wf-1"), spent=Decimal("0.9"), limit=Decimal("1")),
        ]
        async with (
            ControllerServer(service, "t0ken", "127.0.0.1:0") as server,
            ControllerClient(server.address, "t0ken") as client,
        ):
            assert [e async for e in client.watch(job.id)] == recorded
