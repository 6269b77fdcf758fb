"""``airlock jobs watch`` renders each kind of typed job event (JobView, no controller)."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from rich.console import Console

from airlock.cli._jobs import JobView, RemoteAgent
from airlock.jobs import (
    ChildJobChanged,
    EffectApplied,
    EffectOutcome,
    Job,
    JobError,
    JobEvent,
    JobEventData,
    JobState,
    LogLine,
    SandboxActivity,
    SignalRecorded,
    StateChanged,
)
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.turn import (
    InferenceFinished,
    InferenceStarted,
    LifecycleEvent,
    ToolFinished,
    ToolStarted,
    TurnLog,
    TurnPaused,
    TurnStarted,
)
from layer0 import AgentId, BudgetWarning, CostIncurred, LogLevel, TurnInput, WorkflowId

T0 = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
JOB = Job(
    id="j1",
    agent="boss",
    state=JobState.QUEUED,
    input=TurnInput.new("hi"),
    queue="boss",
    workflow="j1",
    created_at=T0,
)


def render(*data: JobEventData, agent: RemoteAgent | None = None) -> tuple[str, JobView]:
    """What a JobView prints for these events (recorded one second apart), and the view."""
    buffer = io.StringIO()
    agent = agent or RemoteAgent("boss", "process", "scripted", "m")
    view = JobView(Console(file=buffer, width=200), JOB, agent)

    async def feed() -> None:
        for seq, item in enumerate(data, 1):
            await view.job_event(
                JobEvent(job_id=JOB.id, seq=seq, time=T0 + timedelta(seconds=seq), data=item)
            )

    asyncio.run(feed())
    view.stop()
    return buffer.getvalue(), view


def test_state_events_queue_provision_and_end() -> None:
    out, _ = render(
        StateChanged(state=JobState.QUEUED),
        StateChanged(state=JobState.PROVISIONING, previous=JobState.QUEUED),
        SandboxActivity(event=TurnStarted()),
        StateChanged(
            state=JobState.SUCCEEDED, previous=JobState.APPLYING_EFFECTS, detail="exit reason complete"
        ),
    )
    assert "job j1 queued" in out
    assert "boss: provisioning a process sandbox (scripted/m)" in out
    assert "✓ sandbox ready in 1.0s" in out  # from the recorded times, not the replay's
    assert "✓ job j1 succeeded: exit reason complete" in out


def test_a_failed_state_shows_its_error() -> None:
    error = JobError(kind="model", message="the model refused")
    out, _ = render(StateChanged(state=JobState.FAILED, previous=JobState.RUNNING, detail="x", error=error))
    assert "✗ job j1 failed: the model refused" in out


def test_sandbox_events_render_as_airlock_run_does() -> None:
    out, view = render(
        SandboxActivity(event=InferenceStarted(iteration=1, model="m")),
        SandboxActivity(
            event=InferenceFinished(
                iteration=1,
                stop_reason="tool_use",
                tokens_in=40,
                tokens_out=12,
                cost=Decimal("0.0001"),
                total_tokens_in=40,
                total_tokens_out=12,
                total_cost=Decimal("0.0001"),
                duration_ms=9,
            )
        ),
        SandboxActivity(
            event=ToolStarted(tool_use_id="t1", name="calculator", input={"expression": "17 * 23"})
        ),
        SandboxActivity(
            event=ToolFinished(tool_use_id="t1", name="calculator", duration_ms=3, success=True, output="391")
        ),
        SandboxActivity(event=TurnLog(level="info", message="thinking")),
        SandboxActivity(event=TurnPaused(iteration=1)),
        SandboxActivity(
            event=EgressEvent(
                client="c",
                phase="decision",
                method="CONNECT",
                host="api.example.com",
                port=443,
                allowed=False,
                rule="deny (default)",
                reason="no rule",
            )
        ),
        SandboxActivity(
            event=CredentialProxyEvent(
                client="c",
                credential="anthropic",
                method="POST",
                path="/v1/messages",
                upstream="https://api.anthropic.com",
                status=200,
                duration_ms=830,
            )
        ),
    )
    assert "model call 1: 40 in / 12 out tokens, $0.0001 (9 ms, tool_use)" in out
    assert view.total_cost == Decimal("0.0001")
    assert 'tool calculator {"expression": "17 * 23"}' in out
    assert "✓ calculator 3 ms" in out
    assert "log info: thinking" in out
    assert "paused after iteration 1" in out
    assert "egress denied api.example.com:443 deny (default)" in out
    assert view.egress["denied"] == 1 and view.destinations == {"api.example.com:443": False}
    assert "credential anthropic: POST https://api.anthropic.com/v1/messages → 200 (830 ms)" in out
    assert view.credential_requests[0]["status"] == 200


def test_lifecycle_events_worth_a_line_get_one() -> None:
    spent = BudgetWarning(workflow=WorkflowId("wf"), spent=Decimal("0.8"), limit=Decimal("1"))
    cost = CostIncurred(agent=AgentId("boss"), cost=Decimal("0.1"), cumulative=Decimal("0.8"))
    out, _ = render(
        SandboxActivity(event=LifecycleEvent(event=cost, agent="boss")),
        SandboxActivity(event=LifecycleEvent(event=spent, agent="boss")),
    )
    assert "budget warning: $0.8 of $1 spent (80%)" in out
    assert "cumulative" not in out and out.count("\n") == 1  # a call's cost is on its model line


def test_a_local_models_calls_cost_zero_on_the_live_line() -> None:
    finished = InferenceFinished(
        iteration=1,
        stop_reason="end_turn",
        tokens_in=900,
        tokens_out=12,
        cost=None,
        total_tokens_in=900,
        total_tokens_out=12,
        total_cost=Decimal(0),
        duration_ms=4000,
    )
    local = RemoteAgent("demo", "docker", "openai_compat", "qwen", local_model=True)
    out, _ = render(SandboxActivity(event=finished), agent=local)
    assert "model call 1: 900 in / 12 out tokens, $0 (local) (4000 ms, end_turn)" in out
    assert out.rstrip().endswith("so far 900 in / 12 out, $0 (local)")
    priced, _ = render(SandboxActivity(event=finished))  # a remote model's unknown price stays unknown
    assert "tokens, ? (4000 ms" in priced


def test_effects_children_signals_and_logs() -> None:
    out, _ = render(
        ChildJobChanged(phase="started", job="j2", agent="calc", origin="delegate"),
        ChildJobChanged(
            phase="finished", job="j2", agent="calc", origin="delegate", state=JobState.SUCCEEDED
        ),
        EffectApplied(
            outcome=EffectOutcome(index=0, effect="delegate", status="ok", agent=AgentId("calc")),
            source="boss",
        ),
        EffectApplied(
            outcome=EffectOutcome(index=1, effect="write_memory", status="refused", detail="not granted"),
            source="boss",
        ),
        SignalRecorded(target="wf", signal_type="ping", data={"n": 1}, count=1),
        LogLine(level=LogLevel.WARN, message="reaped 1 container", source="controller"),
    )
    assert "child job j2 (calc, delegate) started" in out
    assert "child job j2 (calc, delegate) finished: succeeded" in out
    assert "effect delegate ok → calc" in out
    assert "effect write_memory refused not granted" in out
    assert "signal ping → wf" in out
    assert "log warn (controller): reaped 1 container" in out
