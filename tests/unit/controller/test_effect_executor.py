"""EffectExecutor: order, per-effect outcomes, delegate/handoff follow-ups and their limits."""

from __future__ import annotations

import logging

import pytest
from pydantic import JsonValue

from airlock.controller.effects import EffectExecutor
from airlock.errors import ConfigError
from airlock.jobs import EffectReport
from airlock.policy.effects import EffectContext, EffectPolicy, check_effect
from airlock.state import InMemoryStore
from airlock.testing import EchoTurn
from airlock.testing._orchestrator import LocalOrchestrator
from layer0 import (
    AgentId,
    Content,
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    Handoff,
    Log,
    LogLevel,
    OrchError,
    QueryPayload,
    Scope,
    SessionId,
    Signal,
    SignalPayload,
    TurnInput,
    TurnMetadata,
    TurnOutput,
    WorkflowId,
    WriteMemory,
)

S = Scope.session("s1")


def output(*effects: Effect) -> TurnOutput:
    return TurnOutput.new("done").model_copy(update={"effects": list(effects)})


class Recorder:
    """A turn recording its inputs; echoes and declares the effects it was built with."""

    def __init__(self, *effects: Effect) -> None:
        self.inputs: list[TurnInput] = []
        self.effects = list(effects)

    async def execute(self, input: TurnInput) -> TurnOutput:
        self.inputs.append(input)
        return TurnOutput(
            message=input.message,
            exit_reason=TurnOutput.new("").exit_reason,
            metadata=TurnMetadata.empty(),
            effects=self.effects,
        )


async def test_effects_apply_in_order() -> None:
    store = InMemoryStore()
    orch = LocalOrchestrator()
    ex = EffectExecutor(store, orch)
    wf = WorkflowId("wf")
    report = await ex.apply(
        output(
            WriteMemory(scope=S, key="k", value=1),
            WriteMemory(scope=S, key="k", value=2),
            DeleteMemory(scope=S, key="gone"),
            WriteMemory(scope=S, key="tmp", value="x"),
            DeleteMemory(scope=S, key="tmp"),
            Signal(target=wf, payload=SignalPayload(signal_type="done", data={"n": 1})),
        )
    )
    assert report.ok
    assert [o.effect for o in report.outcomes] == [
        "write_memory",
        "write_memory",
        "delete_memory",
        "write_memory",
        "delete_memory",
        "signal",
    ]
    assert [o.index for o in report.outcomes] == list(range(6))
    assert await store.read(S, "k") == 2
    assert await store.list(S, "") == ["k"]
    assert await orch.query(wf, QueryPayload(query_type="signal_count", params=None)) == 1


async def test_errors_are_reported_and_do_not_stop_later_effects() -> None:
    store = InMemoryStore()
    ex = EffectExecutor(store, None)
    report = await ex.apply(
        output(
            WriteMemory(scope=S, key="", value=1),
            Signal(target=WorkflowId("w"), payload=SignalPayload(signal_type="s", data=None)),
            WriteMemory(scope=S, key="after", value=True),
        )
    )
    assert [o.status for o in report.outcomes] == ["error", "error", "ok"]
    assert report.outcomes[0].detail is not None and "key must not be empty" in report.outcomes[0].detail
    assert report.outcomes[1].detail == "no Orchestrator configured"
    assert not report.ok
    assert await store.read(S, "after") is True


async def test_stop_on_error_skips_the_rest() -> None:
    store = InMemoryStore()
    ex = EffectExecutor(store, None, stop_on_error=True)
    report = await ex.apply(
        output(WriteMemory(scope=S, key="", value=1), WriteMemory(scope=S, key="after", value=True))
    )
    assert [o.status for o in report.outcomes] == ["error", "skipped"]
    assert await store.read(S, "after") is None


async def test_log_effects_go_to_logging_at_mapped_levels(caplog: pytest.LogCaptureFixture) -> None:
    ex = EffectExecutor(None, None)
    caplog.set_level(logging.DEBUG, logger="airlock.effects")
    levels = [LogLevel.TRACE, LogLevel.DEBUG, LogLevel.INFO, LogLevel.WARN, LogLevel.ERROR]
    report = await ex.apply(
        output(*(Log(level=lv, message=f"msg-{lv.value}", data={"lv": lv.value}) for lv in levels)),
        source=AgentId("agent-7"),
    )
    assert report.ok
    records = [r for r in caplog.records if r.getMessage().startswith("[agent-7] msg-")]
    assert [(r.getMessage(), r.levelno) for r in records] == [
        ("[agent-7] msg-trace", logging.DEBUG),
        ("[agent-7] msg-debug", logging.DEBUG),
        ("[agent-7] msg-info", logging.INFO),
        ("[agent-7] msg-warn", logging.WARNING),
        ("[agent-7] msg-error", logging.ERROR),
    ]
    assert [r.effect_data for r in records] == [{"lv": lv.value} for lv in levels]  # type: ignore[attr-defined]


async def test_custom_effects_handled_or_reported_unhandled(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[CustomEffect] = []

    async def handler(effect: CustomEffect) -> JsonValue:
        seen.append(effect)
        return {"handled": effect.data}

    async def bad(effect: CustomEffect) -> JsonValue:
        raise ValueError("handler broke")

    ex = EffectExecutor(None, None, custom_handlers={"notify": handler})
    ex.register_custom("bad", bad)
    report = await ex.apply(
        output(
            CustomEffect(effect_type="notify", data=[1]),
            CustomEffect(effect_type="mystery", data=None),
            CustomEffect(effect_type="bad", data=None),
        )
    )
    assert [o.status for o in report.outcomes] == ["ok", "unhandled", "error"]
    assert report.outcomes[0].result == {"handled": [1]}
    assert len(seen) == 1
    assert "no handler registered for custom effect 'mystery'" in (report.outcomes[1].detail or "")
    assert "ValueError: handler broke" in (report.outcomes[2].detail or "")
    assert any("unhandled custom effect 'mystery'" in r.getMessage() for r in caplog.records)


async def test_delegate_dispatches_child_and_applies_its_effects() -> None:
    store = InMemoryStore()
    orch = LocalOrchestrator()
    orch.register("child", EchoTurn(scope=S, key="child-wrote"))
    ex = EffectExecutor(store, orch)
    report = await ex.apply(output(Delegate(agent=AgentId("child"), input=TurnInput.new("task for child"))))
    (outcome,) = report.outcomes
    assert outcome.status == "ok" and outcome.agent == AgentId("child")
    assert outcome.child_output is not None and outcome.child_output.message.as_text() == "task for child"
    assert outcome.follow_up is not None and outcome.follow_up.depth == 1
    assert [o.effect for o in outcome.follow_up.outcomes] == ["write_memory"]
    assert await store.read(S, "child-wrote") == "task for child"


async def test_delegate_to_unknown_agent_is_an_error_outcome() -> None:
    ex = EffectExecutor(InMemoryStore(), LocalOrchestrator())
    report = await ex.apply(output(Delegate(agent=AgentId("ghost"), input=TurnInput.new("x"))))
    assert report.outcomes[0].status == "error"
    assert "agent not found: ghost" in (report.outcomes[0].detail or "")


async def test_handoff_passes_state_as_message_and_metadata() -> None:
    nxt = Recorder()
    orch = LocalOrchestrator()
    orch.register("next", nxt)
    ex = EffectExecutor(InMemoryStore(), orch)
    state: JsonValue = {"ticket": 42, "summary": "needs review"}
    report = await ex.apply(
        output(
            Handoff(agent=AgentId("next"), state=state), Handoff(agent=AgentId("next"), state="plain text")
        ),
        source=AgentId("triage"),
        session=SessionId("sess"),
    )
    assert report.ok
    first, second = nxt.inputs
    assert first.message == Content('{"summary": "needs review", "ticket": 42}')
    assert first.metadata == {"handoff_state": state, "handoff_from": "triage"}
    assert first.session == SessionId("sess")
    assert first.trigger.kind == "task"
    assert second.message.as_text() == "plain text"


async def test_self_delegation_stops_at_the_depth_limit(caplog: pytest.LogCaptureFixture) -> None:
    loop = Recorder(Delegate(agent=AgentId("loop"), input=TurnInput.new("again")))
    orch = LocalOrchestrator()
    orch.register("loop", loop)
    ex = EffectExecutor(InMemoryStore(), orch, max_depth=3)
    report = await ex.apply(output(Delegate(agent=AgentId("loop"), input=TurnInput.new("start"))))
    assert len(loop.inputs) == 3
    assert not report.ok and report.limit_reached
    statuses = [(o.status, o.effect) for o in report.walk()]
    assert statuses == [("ok", "delegate")] * 3 + [("limit_reached", "delegate")]
    last = list(report.walk())[-1]
    assert last.detail == "follow-up depth limit (3) reached: delegate to loop not dispatched"
    assert any("follow-up depth limit (3) reached" in r.getMessage() for r in caplog.records)


async def test_fan_out_stops_at_the_follow_up_count_limit() -> None:
    fan = Recorder(*(Delegate(agent=AgentId("fan"), input=TurnInput.new("x")) for _ in range(3)))
    orch = LocalOrchestrator()
    orch.register("fan", fan)
    ex = EffectExecutor(InMemoryStore(), orch, max_depth=10, max_follow_ups=5)
    report = await ex.apply(output(Delegate(agent=AgentId("fan"), input=TurnInput.new("go"))))
    assert len(fan.inputs) == 5
    limited = [o for o in report.walk() if o.status == "limit_reached"]
    assert limited and all("follow-up limit (5 per apply)" in (o.detail or "") for o in limited)


async def test_zero_depth_allows_no_follow_ups() -> None:
    orch = LocalOrchestrator()
    orch.register("echo", EchoTurn())
    ex = EffectExecutor(InMemoryStore(), orch, max_depth=0)
    report = await ex.apply(output(Handoff(agent=AgentId("echo"), state=None)))
    assert report.outcomes[0].status == "limit_reached"


async def test_report_is_json_serializable() -> None:
    orch = LocalOrchestrator()
    orch.register("child", EchoTurn(scope=S))
    report = await EffectExecutor(InMemoryStore(), orch).apply(
        output(Delegate(agent=AgentId("child"), input=TurnInput.new("x")))
    )
    again = EffectReport.model_validate_json(report.model_dump_json())
    assert again == report


async def test_negative_limits_rejected() -> None:
    with pytest.raises(ConfigError):
        EffectExecutor(None, None, max_depth=-1)


async def test_listeners_hear_each_outcome_as_applied_and_each_log_effect() -> None:
    heard: list[tuple[int, str, str, int, str | None]] = []
    logs: list[tuple[str, str | None]] = []
    store = InMemoryStore()

    async def on_outcome(outcome, depth, source):  # type: ignore[no-untyped-def]
        # Applied already when heard: the store shows the write at once.
        seen = await store.read(S, "k")
        heard.append((outcome.index, outcome.effect, outcome.status, depth, str(source) if source else None))
        if outcome.effect == "write_memory":
            assert seen == 1

    async def on_log(effect, source):  # type: ignore[no-untyped-def]
        logs.append((effect.message, str(source) if source else None))

    orch = LocalOrchestrator()
    orch.register("child", Recorder(Log(level=LogLevel.INFO, message="from child")))
    executor = EffectExecutor(store, orch, on_outcome=on_outcome, on_log=on_log)
    report = await executor.apply(
        output(
            WriteMemory(scope=S, key="k", value=1),
            Log(level=LogLevel.WARN, message="top"),
            Delegate(agent=AgentId("child"), input=TurnInput.new("go")),
        ),
        source=AgentId("parent"),
    )
    assert report.ok
    assert heard == [
        (0, "write_memory", "ok", 0, "parent"),
        (1, "log", "ok", 0, "parent"),
        (0, "log", "ok", 1, "child"),  # the follow-up's outcome comes before its delegate's
        (2, "delegate", "ok", 0, "parent"),
    ]
    assert logs == [("top", "parent"), ("from child", "child")]


# -- the gate -------------------------------------------------------------------------------------


async def test_a_refused_effect_is_not_applied_and_order_is_kept() -> None:
    store = InMemoryStore()
    orch = LocalOrchestrator()
    child = Recorder()
    orch.register("child", child)
    seen: list[tuple[str, int, int, AgentId | None, SessionId | None]] = []

    def gate(effect: Effect, context: EffectContext) -> str | None:
        seen.append((effect.type, context.index, context.count, context.agent, context.session))
        return "not this one" if effect.type in ("delegate", "signal") or context.index == 0 else None

    logged: list[Log] = []

    async def on_log(effect: Log, source: AgentId | None) -> None:
        logged.append(effect)

    ex = EffectExecutor(store, orch, gate=gate, on_log=on_log)
    wf = WorkflowId("wf")
    report = await ex.apply(
        output(
            WriteMemory(scope=S, key="first", value=1),
            Delegate(agent=AgentId("child"), input=TurnInput.new("x")),
            WriteMemory(scope=S, key="second", value=2),
            Signal(target=wf, payload=SignalPayload(signal_type="s", data=None)),
            Log(level=LogLevel.INFO, message="kept"),
        ),
        source=AgentId("boss"),
        session=SessionId("s1"),
    )
    assert [(o.index, o.effect, o.status) for o in report.outcomes] == [
        (0, "write_memory", "refused"),
        (1, "delegate", "refused"),
        (2, "write_memory", "ok"),
        (3, "signal", "refused"),
        (4, "log", "ok"),
    ]
    assert all(o.detail == "not this one" for o in report.outcomes if o.status == "refused")
    assert report.outcomes[1].agent == AgentId("child") and report.outcomes[1].follow_up is None
    assert not report.ok and len(report.refused) == 3
    assert child.inputs == []  # never dispatched
    assert await store.read(S, "first") is None and await store.read(S, "second") == 2
    with pytest.raises(OrchError, match="workflow not found"):  # no signal ever reached it
        await orch.query(wf, QueryPayload(query_type="signal_count", params=None))
    assert [e.message for e in logged] == ["kept"]
    assert seen == [
        (kind, i, 5, AgentId("boss"), SessionId("s1"))
        for i, kind in enumerate(["write_memory", "delegate", "write_memory", "signal", "log"])
    ]


async def test_a_refused_log_or_custom_effect_reaches_no_listener_or_handler() -> None:
    handled: list[CustomEffect] = []
    logged: list[Log] = []

    async def handler(effect: CustomEffect) -> JsonValue:
        handled.append(effect)
        return None

    async def on_log(effect: Log, source: AgentId | None) -> None:
        logged.append(effect)

    ex = EffectExecutor(
        None, None, custom_handlers={"notify": handler}, on_log=on_log, gate=lambda e, c: "refused"
    )
    report = await ex.apply(
        output(Log(level=LogLevel.ERROR, message="x"), CustomEffect(effect_type="notify", data=None))
    )
    assert [o.status for o in report.outcomes] == ["refused", "refused"]
    assert handled == [] and logged == []


async def test_follow_up_effects_are_checked_against_the_child_agents_policy() -> None:
    store = InMemoryStore()
    orch = LocalOrchestrator()
    orch.register(
        "worker",
        Recorder(
            WriteMemory(scope=Scope.global_(), key="by-worker", value=1),
            Delegate(agent=AgentId("admin"), input=TurnInput.new("escalate")),
        ),
    )
    admin = Recorder()
    orch.register("admin", admin)
    policies = {
        "boss": EffectPolicy(delegate=("worker", "admin"), memory=("global",)),
        "worker": EffectPolicy(),  # may neither write global memory nor delegate
    }
    contexts: list[EffectContext] = []

    def gate(effect: Effect, context: EffectContext) -> str | None:
        contexts.append(context)
        assert context.agent is not None
        return check_effect(policies[str(context.agent)], effect, context)

    ex = EffectExecutor(store, orch, gate=gate)
    report = await ex.apply(
        output(
            Delegate(agent=AgentId("worker"), input=TurnInput.new("work")),
            WriteMemory(scope=Scope.global_(), key="by-boss", value=1),
        ),
        source=AgentId("boss"),
    )
    delegated, wrote = report.outcomes
    assert (delegated.status, wrote.status) == ("ok", "ok")
    assert delegated.follow_up is not None
    follow_up = delegated.follow_up.outcomes
    assert [(o.effect, o.status) for o in follow_up] == [("write_memory", "refused"), ("delegate", "refused")]
    assert "agent worker may not write global memory" in (follow_up[0].detail or "")
    assert "agent worker may not delegate to 'admin'" in (follow_up[1].detail or "")
    assert admin.inputs == []
    assert await store.read(Scope.global_(), "by-worker") is None
    assert await store.read(Scope.global_(), "by-boss") == 1
    assert [(str(c.agent), c.depth, c.count) for c in contexts] == [
        ("boss", 0, 2),
        ("worker", 1, 2),
        ("worker", 1, 2),
        ("boss", 0, 2),
    ]


async def test_a_gate_that_raises_applies_nothing() -> None:
    store = InMemoryStore()

    def gate(effect: Effect, context: EffectContext) -> str | None:
        raise RuntimeError("policy lookup failed")

    report = await EffectExecutor(store, None, gate=gate).apply(
        output(WriteMemory(scope=S, key="k", value=1))
    )
    assert report.outcomes[0].status == "error" and "policy lookup failed" in (
        report.outcomes[0].detail or ""
    )
    assert await store.read(S, "k") is None


async def test_stop_on_error_skips_what_follows_a_refused_effect() -> None:
    store = InMemoryStore()
    ex = EffectExecutor(store, None, stop_on_error=True, gate=lambda e, c: "no" if c.index == 0 else None)
    report = await ex.apply(
        output(WriteMemory(scope=S, key="a", value=1), WriteMemory(scope=S, key="b", value=2))
    )
    assert [o.status for o in report.outcomes] == ["refused", "skipped"]
    assert await store.read(S, "b") is None
