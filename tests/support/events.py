"""One of each sandbox event, for the tests of every layer they cross (wire, store, CLI)."""

from __future__ import annotations

from decimal import Decimal

from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.sandbox import SandboxEvent
from airlock.turn import (
    Checkpoint,
    ContextCompacted,
    InferenceFinished,
    InferenceStarted,
    LifecycleEvent,
    PendingCall,
    SignalDelivered,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnLog,
    TurnPaused,
    TurnStarted,
    TurnSuspended,
)
from layer0 import AgentId, BudgetWarning, CostIncurred, WorkflowId

EGRESS = EgressEvent(
    time="2026-11-22T20:31:05.123Z",
    client="172.30.0.5:41234",
    phase="decision",
    method="CONNECT",
    host="api.example.com",
    port=443,
    ip="93.184.216.34",
    sni="api.example.com",
    allowed=True,
    rule="allow api.example.com:443 (spec.network.rules[0])",
    reason="matched",
)

#: One of each turn event type, with optional fields set and not.
TURN_EVENTS: list[TurnEvent] = [
    TurnStarted(),
    InferenceStarted(iteration=1, model="m-1"),
    InferenceStarted(iteration=2),
    InferenceFinished(
        iteration=1,
        stop_reason="tool_use",
        tokens_in=40,
        tokens_out=12,
        cost=Decimal("0.0001"),
        total_tokens_in=40,
        total_tokens_out=12,
        total_cost=Decimal("0.00010"),
        duration_ms=1234,
    ),
    InferenceFinished(
        iteration=2,
        stop_reason="end_turn",
        tokens_in=1,
        tokens_out=2,
        cost=None,
        total_tokens_in=41,
        total_tokens_out=14,
        total_cost=Decimal("0"),
        duration_ms=0,
    ),
    TextDelta(iteration=2, text="Let me compute 17 * 23 ✓"),
    TextDelta(iteration=2, text="…done", dropped_chars=4096),
    ToolStarted(tool_use_id="t1", name="calculator", input={"expression": "17 * 23", "big": 2**60}),
    ToolFinished(tool_use_id="t1", name="calculator", duration_ms=3, success=True, output="391\n"),
    ToolFinished(tool_use_id="t2", name="bash", duration_ms=30_000, success=False, output="killed ✗"),
    ToolFinished(
        tool_use_id="t3", name="bash", duration_ms=12, success=True, output='{"exit_code": 2}', exit_code=2
    ),
    TurnLog(level="warn", message="turn ended: max_turns"),
    TurnPaused(iteration=2),
    TurnStarted(resumed=True),
    Checkpoint(messages_from=2, state={"version": 1, "iterations": 1, "messages": [], "cost": "0.01"}),
    TurnSuspended(
        iteration=1,
        calls=[
            PendingCall(tool_use_id="t9", name="bash", input={"command": "rm -rf out"}, risks=["destructive"])
        ],
    ),
    TurnSuspended(iteration=3, calls=[]),
    SignalDelivered(signal_type="budget", action="budget", detail='{"max_turns": 3}'),
    SignalDelivered(signal_type="feedback", action="feedback"),
    ContextCompacted(strategy="sliding_window", messages_before=40, messages_after=21),
    ContextCompacted(
        strategy="causal_cone",
        messages_before=1,
        messages_after=1,
        cone_size=3,
        cone_total=8,
        compression_ratio=0.625,
    ),
    LifecycleEvent(
        event=CostIncurred(agent=AgentId("calc"), cost=Decimal("0.0001"), cumulative=Decimal("0.00010")),
        agent="calc",
    ),
    LifecycleEvent(
        event=BudgetWarning(workflow=WorkflowId("wf"), spent=Decimal("0.8"), limit=Decimal("1")), agent="calc"
    ),
]

#: The turn events and the proxies' (egress decisions and closes, credential-proxy requests).
SANDBOX_EVENTS: list[SandboxEvent] = [
    *TURN_EVENTS,
    EGRESS,
    EGRESS.model_copy(
        update={"phase": "closed", "bytes_up": 100, "bytes_down": 2**40, "duration_ms": 1500, "sni": None}
    ),
    EGRESS.model_copy(update={"allowed": False, "ip": None, "sni": None, "rule": "deny (default)"}),
    CredentialProxyEvent(
        time="2026-11-22T20:31:06.000Z",
        client="172.30.0.5:41240",
        credential="anthropic",
        method="POST",
        path="/v1/messages",
        upstream="https://api.anthropic.com",
        status=200,
        reason="forwarded",
        bytes_up=512,
        bytes_down=2048,
        duration_ms=830,
        redacted=1,
    ),
]
