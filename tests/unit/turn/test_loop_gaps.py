"""The loop's accounting and reporting: a compaction's model call counted, the trigger stated,
log effects while running, tool-declared effects, images kept in the output, and the layer0
lifecycle events (budget, compaction) on the event stream and to observers."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from airlock.spec import LoopLimits
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    MAX_RUN_LOGS,
    MAX_TOOL_EFFECTS,
    BudgetHook,
    CompactionPart,
    ContextCompacted,
    ImagePart,
    LifecycleEvent,
    LoggingHook,
    NeuronTurn,
    ProviderCompaction,
    ProviderResponse,
    StopReason,
    Summarization,
    TextPart,
    TokenUsage,
    ToolContext,
    ToolResult,
    ToolUsePart,
    tool,
)
from layer0 import (
    BudgetAction,
    BudgetDecision,
    BudgetWarning,
    CompactionComplete,
    Content,
    ContextPressure,
    CostIncurred,
    CustomEffect,
    ExitReason,
    ImageBlock,
    Log,
    LogLevel,
    ObservableEvent,
    PreCompactionFlush,
    ProviderManaged,
    Scope,
    SessionId,
    TextBlock,
    TriggerType,
    TurnConfig,
    TurnInput,
    UrlSource,
    WorkflowId,
)

from .turn_helpers import Recorder, add


def lifecycle(rec: Recorder) -> list[object]:
    """The layer0 lifecycle events a recorder saw, in order."""
    return [e.event for e in rec.events if isinstance(e, LifecycleEvent)]


def logs(effects: list[object]) -> list[Log]:
    return [e for e in effects if isinstance(e, Log)]


class Observer:
    """A lifecycle observer (not a hook): keeps every ObservableEvent."""

    def __init__(self) -> None:
        self.seen: list[ObservableEvent] = []

    async def observe(self, event: ObservableEvent) -> None:
        self.seen.append(event)


# -- 2. a compaction's model call counts --------------------------------------------------------


async def test_the_summary_call_counts_in_cost_tokens_and_budget() -> None:
    provider = FakeProvider(
        [
            tool_response(
                ("t1", "add", {"a": 1, "b": 2}), tokens_in=100, tokens_out=10, cost=Decimal("0.01")
            ),
            text_response("summary", tokens_in=500, tokens_out=40, cost=Decimal("0.05")),  # the summary call
            text_response("never asked", cost=Decimal("0.01")),
        ]
    )
    rec = Recorder()
    turn = NeuronTurn(
        provider,
        tools=[add],
        context=Summarization(provider, keep_last=2, max_tokens=1),
        events=rec,
        defaults=TurnConfig(max_cost=Decimal("0.05")),
    )
    out = await turn.execute(TurnInput.new("add 1 and 2, then tell me"))
    # the summary's cost reached max_cost: the turn stops before another model call
    assert out.exit_reason == ExitReason.budget_exhausted() and provider.calls == 2
    assert out.metadata.cost == Decimal("0.06")
    assert (out.metadata.tokens_in, out.metadata.tokens_out) == (600, 50)
    assert out.metadata.turns_used == 1  # a summary is not an iteration of the loop
    costs = [e for e in lifecycle(rec) if isinstance(e, CostIncurred)]
    assert [(c.cost, c.cumulative) for c in costs] == [
        (Decimal("0.01"), Decimal("0.01")),
        (Decimal("0.05"), Decimal("0.06")),
    ]
    (action,) = [e for e in lifecycle(rec) if isinstance(e, BudgetAction)]
    assert action.action == BudgetDecision.halt_workflow() and action.workflow == WorkflowId("agent")


# -- 3. the trigger is stated -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("trigger", "metadata", "starts"),
    [
        (TriggerType.task(), None, "[Trigger: task] Another agent assigned you the task below"),
        (TriggerType.schedule(), None, "[Trigger: schedule] A schedule started this turn"),
        (TriggerType.signal(), None, "[Trigger: signal]"),
        (TriggerType.system_event(), None, "[Trigger: system event]"),
        (TriggerType.custom("cron-nightly"), None, "[Trigger: cron-nightly]"),
        (
            TriggerType.task(),
            {"handoff_state": {"step": 2}, "handoff_from": "triage"},
            "[Trigger: handoff] Agent triage handed this conversation over to you",
        ),
    ],
)
async def test_a_trigger_other_than_a_person_is_stated_before_the_input(
    trigger: TriggerType, metadata: object, starts: str
) -> None:
    provider = FakeProvider([text_response("ok")])
    await NeuronTurn(provider).execute(TurnInput.new("the task", trigger=trigger, metadata=metadata))
    note, message = provider.requests[0].messages[-1].content
    assert isinstance(note, TextPart) and note.text.startswith(starts)
    assert message == TextPart(text="the task")
    assert provider.requests[0].system is None  # the system prompt is the agent's, unchanged


async def test_a_persons_message_gets_no_preamble() -> None:
    provider = FakeProvider([text_response("ok")])
    await NeuronTurn(provider, system="be kind").execute(TurnInput.new("hi", trigger=TriggerType.user()))
    assert provider.requests[0].messages[-1].content == [TextPart(text="hi")]
    assert provider.requests[0].system == "be kind"


# -- 4. log effects while running ------------------------------------------------------------------


async def test_tool_failures_retries_and_compactions_are_declared_as_log_effects_in_order() -> None:
    @tool
    async def boom() -> str:
        """Fails."""
        raise RuntimeError("disk full")

    retried = tool_response(("t1", "boom", {}), ("t2", "nope", {}))
    retried = retried.model_copy(update={"retries": ["HTTP 529", "no response"]})
    provider = FakeProvider([retried, text_response("summary"), text_response("sorry")])
    out = await NeuronTurn(
        provider, tools=[boom], context=Summarization(provider, keep_last=2, max_tokens=1)
    ).execute(TurnInput.new("x", session=SessionId("s")))
    assert out.exit_reason == ExitReason.complete()
    lines = logs(out.effects)
    assert [line.message.split(":")[0] for line in lines] == [
        "model call 1",
        "tool boom failed",
        "tool nope failed",
        "context compacted by Summarization",
    ]
    assert lines[0].data == {"retries": ["HTTP 529", "no response"]} and lines[0].level is LogLevel.WARN
    assert "disk full" in lines[1].message and lines[1].data == {"tool": "boom", "tool_use_id": "t1"}
    assert "unknown tool 'nope'" in lines[2].message
    assert lines[3].level is LogLevel.INFO and lines[3].data["model_calls"] == 1  # type: ignore[index]
    assert type(out.effects[-1]).__name__ == "WriteMemory"  # the history comes last, as before


async def test_log_effects_are_capped_and_the_rest_counted() -> None:
    calls = [tool_response((f"t{i}", "nope", {"i": i})) for i in range(MAX_RUN_LOGS + 4)]
    provider = FakeProvider([*calls, text_response("done")])
    out = await NeuronTurn(provider, limits=LoopLimits(circuit_breaker_threshold=100)).execute(
        TurnInput.new("x")
    )
    lines = logs(out.effects)
    assert len(lines) == MAX_RUN_LOGS + 1
    assert lines[-1].message.startswith("4 more log line(s)") and lines[-1].data == {"dropped": 4}


# -- 5. tools declare effects --------------------------------------------------------------------


async def test_a_tool_result_declares_custom_effects_in_call_order() -> None:
    @tool
    async def ticket(title: str, ctx: ToolContext) -> ToolResult:
        """Open a ticket."""
        effect = CustomEffect(effect_type="ticket.opened", data={"title": title, "session": str(ctx.session)})
        return ToolResult(content={"id": 7}, effects=[effect])

    @tool
    def plain() -> int:
        """A plain value."""
        return 3

    provider = FakeProvider(
        [
            tool_response(
                ("t1", "ticket", {"title": "a"}), ("t2", "plain", {}), ("t3", "ticket", {"title": "b"})
            ),
            text_response("ok"),
        ]
    )
    out = await NeuronTurn(provider, tools=[ticket, plain]).execute(
        TurnInput.new("x", session=SessionId("s"))
    )
    customs = [e for e in out.effects if isinstance(e, CustomEffect)]
    assert [c.data for c in customs] == [{"title": "a", "session": "s"}, {"title": "b", "session": "s"}]
    results = provider.requests[1].messages[-1].content
    assert [r.content for r in results] == ['{"id": 7}', "3", '{"id": 7}']  # type: ignore[union-attr]


async def test_too_many_effects_in_one_result_is_an_error_and_declares_none() -> None:
    @tool
    async def spam() -> ToolResult:
        """Too many."""
        return ToolResult(content="x", effects=[CustomEffect(effect_type="e", data=i) for i in range(17)])

    provider = FakeProvider([tool_response(("t1", "spam", {})), text_response("ok")])
    out = await NeuronTurn(provider, tools=[spam]).execute(TurnInput.new("x"))
    assert not [e for e in out.effects if isinstance(e, CustomEffect)]
    (result,) = provider.requests[1].messages[-1].content
    assert result.is_error and f"more than the {MAX_TOOL_EFFECTS} allowed" in result.content  # type: ignore[union-attr]


# -- 6. images stay in the output --------------------------------------------------------------------


async def test_the_output_keeps_the_final_answers_images() -> None:
    image = ImagePart(source_type="url", data="https://example.test/chart.png", media_type="image/png")
    answer = ProviderResponse(
        content=[TextPart(text="Here is the chart."), image], stop_reason=StopReason.END_TURN
    )
    out = await NeuronTurn(FakeProvider([answer])).execute(TurnInput.new("chart?"))
    assert out.message == Content.blocks(
        [
            TextBlock(text="Here is the chart."),
            ImageBlock(source=UrlSource(url="https://example.test/chart.png"), media_type="image/png"),
        ]
    )
    text_only = await NeuronTurn(FakeProvider([text_response("plain")])).execute(TurnInput.new("x"))
    assert text_only.message == Content.text("plain")  # text stays plain text


# -- 7. lifecycle events -------------------------------------------------------------------------------


async def test_budget_warnings_once_per_fraction_then_the_budget_action() -> None:
    calls = [tool_response((f"t{i}", "add", {"a": i, "b": 1}), cost=Decimal("0.3")) for i in range(5)]
    rec, observer = Recorder(), Observer()
    turn = NeuronTurn(
        FakeProvider(calls),
        tools=[add],
        events=rec,
        hooks=[observer],
        limits=LoopLimits(budget_warnings=[0.5, 0.8, 0.9]),
        defaults=TurnConfig(max_cost=Decimal("1")),
    )
    out = await turn.execute(TurnInput.new("x", metadata={"workflow": "wf-7"}))
    assert out.exit_reason == ExitReason.budget_exhausted()
    events = lifecycle(rec)
    warnings = [e for e in events if isinstance(e, BudgetWarning)]
    # 0.3, 0.6 (crosses 0.5), 0.9 (crosses 0.8 and 0.9), 1.2 (stops)
    assert [(w.spent, w.limit) for w in warnings] == [(Decimal("0.6"), Decimal("1"))] + [
        (Decimal("0.9"), Decimal("1"))
    ] * 2
    assert all(w.workflow == WorkflowId("wf-7") for w in warnings)
    assert isinstance(events[-1], BudgetAction)
    assert [type(e).__name__ for e in events].count("CostIncurred") == 4
    # the observer saw the same events, as layer0 ObservableEvents
    assert [o.event_type for o in observer.seen] == [f"budget.{e.type}" for e in events]  # type: ignore[attr-defined]
    first = observer.seen[0]
    assert first.source.value == "turn" and first.agent_id is not None and str(first.agent_id) == "agent"
    assert first.data == {"type": "cost_incurred", "agent": "agent", "cost": "0.3", "cumulative": "0.3"}


async def test_no_warning_without_max_cost_and_a_budget_hook_halt_is_a_budget_action() -> None:
    rec = Recorder()
    calls = [tool_response((f"t{i}", "add", {"a": i, "b": 1}), cost=Decimal("0.5")) for i in range(3)]
    turn = NeuronTurn(FakeProvider(calls), tools=[add], events=rec, hooks=[BudgetHook(Decimal("1"))])
    out = await turn.execute(TurnInput.new("x"))
    assert out.exit_reason.kind == "observer_halt"
    events = lifecycle(rec)
    assert not [e for e in events if isinstance(e, BudgetWarning)]  # no max_cost: no fractions of it
    assert isinstance(events[-1], BudgetAction) and events[-1].action == BudgetDecision.halt_workflow()


async def test_client_compaction_emits_pressure_flush_and_complete_around_it() -> None:
    provider = FakeProvider(
        [tool_response(("t1", "add", {"a": 1, "b": 2})), text_response("summary"), text_response("3")]
    )
    rec = Recorder()
    turn = NeuronTurn(
        provider,
        tools=[add],
        context=Summarization(provider, keep_last=2, max_tokens=1),
        context_limit=40,
        events=rec,
    )
    long_task = "please add one and two together, " * 10  # the summary replacing it is shorter
    await turn.execute(TurnInput.new(long_task, session=SessionId("s9")))
    kinds = [e.type if not isinstance(e, LifecycleEvent) else e.event.type for e in rec.events]
    at = kinds.index("context_pressure")
    assert kinds[at : at + 5] == [
        "context_pressure",
        "pre_compaction_flush",
        "cost_incurred",  # the summary call
        "compacted",
        "compaction_complete",
    ]
    events = lifecycle(rec)
    (pressure,) = [e for e in events if isinstance(e, ContextPressure)]
    assert pressure.tokens_available == 40 and pressure.fill_percent == round(
        100 * pressure.tokens_used / 40, 2
    )
    (flush,) = [e for e in events if isinstance(e, PreCompactionFlush)]
    assert flush.scope == Scope.session("s9")
    (done,) = [e for e in events if isinstance(e, CompactionComplete)]
    assert done.strategy == "Summarization" and done.tokens_freed > 0
    assert any(isinstance(e, ContextCompacted) for e in rec.events)


async def test_a_provider_compaction_continues_the_loop_and_is_reported() -> None:
    block = {"type": "compaction", "content": "we added numbers", "encrypted_content": "opaque"}
    compacted = ProviderResponse(
        content=[CompactionPart(summary="we added numbers", block=block)],
        stop_reason=StopReason.COMPACTION,
        usage=TokenUsage(input_tokens=3000, output_tokens=200),
        compaction=ProviderCompaction(tokens_before=160_000, tokens_after=2_000),
        cost=Decimal("0.01"),
    )
    provider = FakeProvider([compacted, text_response("the answer")])
    rec = Recorder()
    out = await NeuronTurn(provider, events=rec).execute(TurnInput.new("x", session=SessionId("s")))
    # the compaction stop did not end the turn; the block stays in the history for the next call
    assert out.exit_reason == ExitReason.complete() and out.message == Content.text("the answer")
    assert provider.requests[1].messages[-1].content == [
        CompactionPart(summary="we added numbers", block=block)
    ]
    (managed,) = [e for e in lifecycle(rec) if isinstance(e, ProviderManaged)]
    assert (managed.provider, managed.tokens_before, managed.tokens_after) == ("fake", 160_000, 2_000)
    assert managed.summary == Content.text("we added numbers")
    (line,) = logs(out.effects)
    assert line.message == "provider fake compacted the context server-side: about 160000 → 2000 tokens"
    assert out.metadata.tokens_in == 3010  # both calls counted


async def test_the_logging_hook_logs_lifecycle_events(caplog: pytest.LogCaptureFixture) -> None:
    turn = NeuronTurn(FakeProvider([text_response("x", cost=Decimal("0.2"))]), hooks=[LoggingHook()])
    with caplog.at_level(logging.INFO, logger="airlock.turn.hooks"):
        await turn.execute(TurnInput.new("x"))
    records = [r for r in caplog.records if hasattr(r, "observable_event")]
    assert [r.observable_event.event_type for r in records] == ["budget.cost_incurred"]  # type: ignore[attr-defined]


async def test_an_observer_that_raises_is_ignored() -> None:
    class Broken:
        async def observe(self, event: ObservableEvent) -> None:
            raise RuntimeError("observer bug")

    out = await NeuronTurn(FakeProvider([text_response("ok")]), hooks=[Broken()]).execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.complete()


async def test_something_neither_hook_nor_observer_is_refused() -> None:
    with pytest.raises(TypeError, match="neither a hook"):
        NeuronTurn(FakeProvider(), hooks=[object()])  # type: ignore[list-item]


async def test_the_budget_bookkeeping_needs_no_listener() -> None:
    """Nobody observes, yet the warned fractions are kept (a resumed session warns once)."""
    calls = [tool_response(("t1", "add", {"a": 1, "b": 1}), cost=Decimal("0.6")), text_response("2")]
    session = NeuronTurn(FakeProvider(calls), tools=[add], defaults=TurnConfig(max_cost=Decimal("1"))).start(
        TurnInput.new("x")
    )
    await session.run()
    assert session.state.budget_warned == [0.5]


async def test_a_tool_use_part_is_kept_with_the_compaction_block() -> None:
    """A response that compacted and then asked for a tool runs the tool in the same step."""
    block = {"type": "compaction", "content": "s"}
    response = ProviderResponse(
        content=[
            CompactionPart(summary="s", block=block),
            ToolUsePart(id="t1", name="add", input={"a": 1, "b": 2}),
        ],
        stop_reason=StopReason.TOOL_USE,
    )
    provider = FakeProvider([response, text_response("3")])
    out = await NeuronTurn(provider, tools=[add]).execute(TurnInput.new("x"))
    assert out.message == Content.text("3")
    assert provider.requests[1].messages[-2].content[0] == CompactionPart(summary="s", block=block)
