"""NeuronTurn's loop: stop reasons, exit reasons, limits, config overrides, history and events."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from airlock.spec import LoopLimits
from airlock.state import InMemoryStore
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    NeuronTurn,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    ToolChoicePolicy,
    ToolResultPart,
    ToolUsePart,
    tool,
)
from layer0 import (
    Content,
    ExitReason,
    HookAction,
    HookContext,
    HookPoint,
    Log,
    Scope,
    SessionId,
    TextBlock,
    TurnConfig,
    TurnError,
    TurnInput,
    WriteMemory,
)

from .turn_helpers import Recorder, add, echo, result_parts


def turn_with(*script: object, **kwargs: object) -> tuple[NeuronTurn, FakeProvider]:
    provider = FakeProvider(list(script))  # type: ignore[arg-type]
    kwargs.setdefault("tools", [add, echo])
    return NeuronTurn(provider, **kwargs), provider  # type: ignore[arg-type]


# -- stop reasons -------------------------------------------------------------------------


@pytest.mark.parametrize("stop", [StopReason.END_TURN, StopReason.STOP_SEQUENCE])
async def test_end_turn_and_stop_sequence_complete(stop: StopReason) -> None:
    turn, provider = turn_with(text_response("done", stop=stop, tokens_in=7, tokens_out=3))
    out = await turn.execute(TurnInput.new("hi"))
    assert out.exit_reason == ExitReason.complete()
    assert out.message == Content.text("done")
    assert (out.metadata.tokens_in, out.metadata.tokens_out, out.metadata.turns_used) == (7, 3, 1)
    assert out.effects == []  # no session: no history effect; complete: no log
    assert provider.calls == 1


async def test_tool_use_runs_tools_and_feeds_results_back() -> None:
    turn, provider = turn_with(
        tool_response(("t1", "add", {"a": 2, "b": 3}), text="let me add"),
        text_response("it is 5"),
    )
    out = await turn.execute(TurnInput.new("2+3?"))
    assert out.message == Content.text("it is 5")
    second = provider.requests[1].messages
    assert [m.role for m in second] == [Role.USER, Role.ASSISTANT, Role.USER]
    assert second[2].content == [ToolResultPart(tool_use_id="t1", content="5", is_error=False)]
    assert [r.name for r in out.metadata.tools_called] == ["add"]
    assert out.metadata.tools_called[0].success


async def test_pause_turn_sends_the_content_back_and_continues() -> None:
    turn, provider = turn_with(
        text_response("searching…", stop=StopReason.PAUSE_TURN), text_response("found it")
    )
    out = await turn.execute(TurnInput.new("find"))
    assert out.exit_reason == ExitReason.complete()
    assert out.message == Content.text("found it")
    again = provider.requests[1].messages
    assert again[-1] == ProviderMessage(role=Role.ASSISTANT, content=[TextPart(text="searching…")])
    assert out.metadata.turns_used == 2


@pytest.mark.parametrize("stop", [StopReason.REFUSAL, StopReason.CONTENT_FILTER])
async def test_refusal_and_content_filter_are_safety_stops(stop: StopReason) -> None:
    turn, _ = turn_with(text_response("I can't", stop=stop, stop_detail="policy 7"))
    out = await turn.execute(TurnInput.new("bad"))
    assert out.exit_reason == ExitReason.safety_stop("policy 7")
    logs = [e for e in out.effects if isinstance(e, Log)]
    assert len(logs) == 1 and "safety_stop" in logs[0].message


async def test_safety_stop_without_detail_names_the_stop_reason() -> None:
    turn, _ = turn_with(text_response("", stop=StopReason.REFUSAL))
    out = await turn.execute(TurnInput.new("bad"))
    assert out.exit_reason == ExitReason.safety_stop("refusal")


@pytest.mark.parametrize(
    ("stop", "message"),
    [(StopReason.MAX_TOKENS, "output truncated"), (StopReason.CONTEXT_WINDOW_EXCEEDED, "context exceeded")],
)
async def test_truncation_and_context_overflow_raise_model_errors(stop: StopReason, message: str) -> None:
    turn, _ = turn_with(text_response("partial", stop=stop))
    with pytest.raises(TurnError) as info:
        await turn.execute(TurnInput.new("long"))
    assert info.value.kind == "model"
    assert message in str(info.value)


async def test_tool_use_stop_without_tool_calls_is_a_model_error() -> None:
    turn, _ = turn_with(text_response("hm", stop=StopReason.TOOL_USE))
    with pytest.raises(TurnError) as info:
        await turn.execute(TurnInput.new("x"))
    assert info.value.kind == "model"


async def test_end_turn_with_tool_calls_still_runs_them() -> None:
    turn, _ = turn_with(
        tool_response(("t1", "add", {"a": 1, "b": 1}), stop=StopReason.END_TURN), text_response("2")
    )
    out = await turn.execute(TurnInput.new("1+1"))
    assert [r.name for r in out.metadata.tools_called] == ["add"]
    assert out.message == Content.text("2")


async def test_provider_errors_are_not_retried() -> None:
    turn, provider = turn_with(TurnError.retryable("429"), text_response("never"))
    with pytest.raises(TurnError) as info:
        await turn.execute(TurnInput.new("x"))
    assert info.value.is_retryable
    assert provider.calls == 1


async def test_foreign_provider_exceptions_are_mapped() -> None:
    turn, _ = turn_with(RuntimeError("boom"))
    with pytest.raises(TurnError) as info:
        await turn.execute(TurnInput.new("x"))
    assert info.value.kind == "other"
    assert isinstance(info.value.__cause__, RuntimeError)


# -- exit reasons and limits --------------------------------------------------------------


async def test_max_turns_from_turn_config() -> None:
    calls = [tool_response((f"t{i}", "add", {"a": i, "b": 0})) for i in range(5)]
    turn, provider = turn_with(*calls)
    out = await turn.execute(TurnInput.new("loop", config=TurnConfig(max_turns=3)))
    assert out.exit_reason == ExitReason.max_turns()
    assert provider.calls == 3 and out.metadata.turns_used == 3
    assert any(isinstance(e, Log) and "max_turns" in e.message for e in out.effects)


async def test_max_turns_default_comes_from_agent_defaults() -> None:
    calls = [tool_response((f"t{i}", "add", {"a": i, "b": 0})) for i in range(5)]
    turn, provider = turn_with(*calls, defaults=TurnConfig(max_turns=2))
    out = await turn.execute(TurnInput.new("loop"))
    assert out.exit_reason == ExitReason.max_turns() and provider.calls == 2


async def test_max_turns_zero_never_calls_the_model() -> None:
    turn, provider = turn_with(text_response("x"))
    out = await turn.execute(TurnInput.new("x", config=TurnConfig(max_turns=0)))
    assert out.exit_reason == ExitReason.max_turns() and provider.calls == 0


async def test_max_cost_with_decimal_budget() -> None:
    cost = Decimal("0.0004")
    calls = [tool_response((f"t{i}", "add", {"a": i, "b": 0}), cost=cost) for i in range(10)]
    turn, provider = turn_with(*calls)
    out = await turn.execute(TurnInput.new("spend", config=TurnConfig(max_cost=Decimal("0.0012"))))
    assert out.exit_reason == ExitReason.budget_exhausted()
    assert provider.calls == 3
    assert out.metadata.cost == Decimal("0.0012")  # exact, no float drift


async def test_unknown_cost_counts_as_zero() -> None:
    turn, _ = turn_with(tool_response(("t1", "add", {"a": 1, "b": 1}), cost=None), text_response("2"))
    out = await turn.execute(TurnInput.new("x", config=TurnConfig(max_cost=Decimal("0.000001"))))
    assert out.exit_reason == ExitReason.complete() and out.metadata.cost == Decimal(0)


async def test_max_duration_cuts_a_slow_provider_call() -> None:
    async def slow(request: ProviderRequest) -> ProviderResponse:
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    turn, _ = turn_with(slow)
    out = await turn.execute(TurnInput.new("x", config=TurnConfig(max_duration=50)))
    assert out.exit_reason == ExitReason.timeout()
    assert out.metadata.duration < 5_000


async def test_max_duration_cuts_a_slow_tool_and_keeps_history_well_formed() -> None:
    started = asyncio.Event()

    @tool
    async def sleepy() -> str:
        """Sleeps."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    store = InMemoryStore()
    both = tool_response(("t1", "sleepy", {}), ("t2", "add", {"a": 1, "b": 2}))
    turn, _ = turn_with(both, tools=[sleepy, add])
    turn.state = store
    out = await turn.execute(TurnInput.new("x", session=SessionId("s"), config=TurnConfig(max_duration=100)))
    assert started.is_set()
    assert out.exit_reason == ExitReason.timeout()
    history = next(e for e in out.effects if isinstance(e, WriteMemory)).value
    assert isinstance(history, list)
    messages = [ProviderMessage.model_validate(m) for m in history]
    results = {r.tool_use_id: r for r in result_parts(messages)}
    assert results["t1"].is_error and "time limit" in results["t1"].content
    assert results["t2"] == ToolResultPart(tool_use_id="t2", content="3", is_error=False)


async def test_circuit_breaker_after_consecutive_tool_failures() -> None:
    calls = [tool_response((f"t{i}", "add", {"a": "x", "b": i})) for i in range(10)]
    turn, provider = turn_with(*calls, limits=LoopLimits(circuit_breaker_threshold=3, stuck_threshold=9))
    out = await turn.execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.circuit_breaker()
    assert provider.calls == 3
    assert [r.success for r in out.metadata.tools_called] == [False, False, False]


async def test_a_success_resets_the_circuit_breaker() -> None:
    bad = {"a": "x", "b": 0}
    script = [
        tool_response(("t1", "add", bad)),
        tool_response(("t2", "add", {"a": 1, "b": 1})),
        tool_response(("t3", "add", bad)),
        text_response("ok"),
    ]
    turn, _ = turn_with(*script, limits=LoopLimits(circuit_breaker_threshold=2))
    out = await turn.execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.complete()


async def test_stuck_detection_on_repeated_identical_calls() -> None:
    same = ("t", "add", {"b": 2, "a": 1})
    reordered = ("t", "add", {"a": 1, "b": 2})  # same canonical JSON
    script = [tool_response(same), tool_response(reordered), tool_response(same), text_response("never")]
    turn, provider = turn_with(*script, limits=LoopLimits(stuck_threshold=3))
    out = await turn.execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.custom("stuck_detected")
    assert provider.calls == 3
    assert len(out.metadata.tools_called) == 2  # the third identical call is not run


async def test_different_inputs_are_not_stuck() -> None:
    script = [tool_response((f"t{i}", "add", {"a": i, "b": 0})) for i in range(4)] + [text_response("ok")]
    turn, _ = turn_with(*script, limits=LoopLimits(stuck_threshold=2))
    out = await turn.execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.complete()


# -- config overrides ---------------------------------------------------------------------


async def test_system_addendum_model_and_metadata_reach_the_request() -> None:
    turn, provider = turn_with(text_response("ok"), system="You are terse.", model="base-model")
    await turn.execute(
        TurnInput.new(
            "hi",
            config=TurnConfig(system_addendum="Answer in French.", model="override-model"),
            metadata={"trace_id": "abc"},
        )
    )
    request = provider.requests[0]
    assert request.system == "You are terse.\nAnswer in French."
    assert request.model == "override-model"
    assert request.extra == {"metadata": {"trace_id": "abc"}}


async def test_tool_choice_first_requires_a_call_on_the_first_model_call_only() -> None:
    turn, provider = turn_with(
        tool_response(("t1", "add", {"a": 1, "b": 2})),
        text_response("3"),
        tool_choice=ToolChoicePolicy(first="required"),
    )
    out = await turn.execute(TurnInput.new("1+2?", metadata={"trace_id": "abc"}))
    assert out.exit_reason == ExitReason.complete()
    first, second = provider.requests
    assert first.extra == {"metadata": {"trace_id": "abc"}, "tool_choice": "required"}
    assert second.extra == {"metadata": {"trace_id": "abc"}}


async def test_tool_choice_first_asks_nothing_without_tools() -> None:
    turn, provider = turn_with(
        text_response("hi"), tools=[], tool_choice=ToolChoicePolicy(first="required", parallel=False)
    )
    await turn.execute(TurnInput.new("hello"))
    assert provider.requests[0].extra == {}


async def test_defaults_apply_when_the_input_sets_nothing() -> None:
    turn, provider = turn_with(
        text_response("ok"), system="Base.", defaults=TurnConfig(system_addendum="Default addendum.")
    )
    await turn.execute(TurnInput.new("hi"))
    assert provider.requests[0].system == "Base.\nDefault addendum."
    assert provider.requests[0].extra == {}


async def test_allowed_tools_filters_offer_and_execution() -> None:
    turn, provider = turn_with(
        tool_response(("t1", "add", {"a": 1, "b": 1})),
        text_response("ok"),
        effect_tools=["signal"],
    )
    out = await turn.execute(TurnInput.new("x", config=TurnConfig(allowed_tools=["echo"])))
    assert [t.name for t in provider.requests[0].tools] == ["echo"]
    result = result_parts(provider.requests[1].messages)[0]
    assert result.is_error and "unknown tool 'add'" in result.content and "echo" in result.content
    assert out.metadata.tools_called[0].success is False


async def test_unknown_tool_lists_the_available_ones() -> None:
    script = (tool_response(("t1", "nope", {})), text_response("ok"))
    turn, provider = turn_with(*script, effect_tools=["signal"])
    await turn.execute(TurnInput.new("x"))
    result = result_parts(provider.requests[1].messages)[0]
    assert result.is_error
    assert result.content == "unknown tool 'nope'; available tools: add, echo, signal"


# -- history and effects ------------------------------------------------------------------


async def test_history_is_read_and_returned_as_one_write_memory_effect() -> None:
    store = InMemoryStore()
    old = [
        ProviderMessage(role=Role.USER, content=[TextPart(text="earlier")]),
        ProviderMessage(role=Role.ASSISTANT, content=[TextPart(text="noted")]),
    ]
    await store.write(Scope.session("s1"), "history", [m.model_dump(mode="json") for m in old])
    provider = FakeProvider([text_response("hello again")])
    turn = NeuronTurn(provider, state=store)
    out = await turn.execute(TurnInput.new("hi", session=SessionId("s1")))
    assert provider.requests[0].messages[:2] == old
    writes = [e for e in out.effects if isinstance(e, WriteMemory)]
    assert len(writes) == 1
    assert writes[0].scope == Scope.session("s1") and writes[0].key == "history"
    assert isinstance(writes[0].value, list)
    assert [ProviderMessage.model_validate(m) for m in writes[0].value] == [
        *old,
        ProviderMessage(role=Role.USER, content=[TextPart(text="hi")]),
        ProviderMessage(role=Role.ASSISTANT, content=[TextPart(text="hello again")]),
    ]
    # the turn never writes: the store still holds the old history
    assert await store.read(Scope.session("s1"), "history") == [m.model_dump(mode="json") for m in old]


async def test_unreadable_history_is_a_context_assembly_error() -> None:
    store = InMemoryStore()
    await store.write(Scope.session("s1"), "history", [{"role": "robot", "content": 3}])
    turn = NeuronTurn(FakeProvider([text_response("x")]), state=store)
    with pytest.raises(TurnError) as info:
        await turn.execute(TurnInput.new("hi", session=SessionId("s1")))
    assert info.value.kind == "context_assembly"


async def test_block_input_and_final_message() -> None:
    turn, provider = turn_with(text_response("seen"))
    out = await turn.execute(TurnInput.new(Content.blocks([TextBlock(text="a"), TextBlock(text="b")])))
    assert provider.requests[0].messages[0].content == [TextPart(text="a"), TextPart(text="b")]
    assert out.message.as_text() == "seen"


async def test_final_message_is_the_last_assistant_text() -> None:
    turn, _ = turn_with(tool_response(("t1", "add", {"a": 1, "b": 1}), text="thinking"), text_response(""))
    out = await turn.execute(TurnInput.new("x"))
    assert out.message == Content.text("thinking")


async def test_empty_input_message_is_rejected() -> None:
    turn, _ = turn_with(text_response("x"))
    with pytest.raises(TurnError) as info:
        await turn.execute(TurnInput.new(""))
    assert info.value.kind == "context_assembly"


# -- events -------------------------------------------------------------------------------


async def test_events_in_order_with_running_totals() -> None:
    rec = Recorder()
    turn, _ = turn_with(
        tool_response(("t1", "add", {"a": 1, "b": 2}), cost=Decimal("0.01")),
        text_response("3", cost=Decimal("0.02")),
        events=rec,
    )
    await turn.execute(TurnInput.new("x"))
    assert rec.types() == [
        "started",
        "checkpoint",  # context assembled
        "inference_started",
        "inference_finished",
        "lifecycle",  # cost_incurred
        "checkpoint",  # the model asked for a tool
        "tool_started",
        "tool_finished",
        "checkpoint",  # the tool ran (and so the step is done)
        "inference_started",
        "inference_finished",
        "lifecycle",  # cost_incurred
        "checkpoint",  # the final answer
        "checkpoint",  # the turn ended
    ]
    finished = [e for e in rec.events if e.type == "inference_finished"]
    assert [e.total_cost for e in finished] == [Decimal("0.01"), Decimal("0.03")]  # type: ignore[union-attr]
    assert [e.total_tokens_in for e in finished] == [10, 20]  # type: ignore[union-attr]
    tool_done = next(e for e in rec.events if e.type == "tool_finished")
    assert tool_done.output == "3" and tool_done.success  # type: ignore[union-attr]


async def test_a_failing_event_sink_does_not_break_the_turn() -> None:
    async def broken(event: object) -> None:
        raise RuntimeError("sink down")

    turn, _ = turn_with(text_response("fine"), events=broken)
    out = await turn.execute(TurnInput.new("x"))
    assert out.exit_reason == ExitReason.complete()


async def test_non_complete_exit_emits_a_log_event() -> None:
    rec = Recorder()
    turn, _ = turn_with(text_response("no", stop=StopReason.REFUSAL), events=rec)
    await turn.execute(TurnInput.new("x"))
    assert rec.types()[-1] == "log"


async def test_tool_use_part_round_trips_in_history() -> None:
    turn, provider = turn_with(tool_response(("t1", "echo", {"text": "hi"})), text_response("ok"))
    await turn.execute(TurnInput.new("x"))
    expected = [ToolUsePart(id="t1", name="echo", input={"text": "hi"})]
    assert provider.requests[1].messages[1].content == expected


class HangingHook:
    """A hook that never answers at one point."""

    def __init__(self, point: HookPoint) -> None:
        self.point = point

    def points(self) -> list[HookPoint]:
        return [self.point]

    async def on_event(self, ctx: HookContext) -> HookAction:
        await asyncio.Event().wait()
        raise AssertionError("not reached")


@pytest.mark.parametrize("point", list(HookPoint))
async def test_max_duration_also_bounds_hooks(point: HookPoint) -> None:
    turn, _ = turn_with(tool_response(("t1", "add", {"a": 1, "b": 2})), text_response("3"))
    turn.hooks.add(HangingHook(point))
    session = turn.start(TurnInput.new("x", config=TurnConfig(max_duration=50)))
    out = await asyncio.wait_for(session.run(), 10)
    assert out is not None and out.exit_reason == ExitReason.timeout()
    messages = session.state.messages
    answered = {p.tool_use_id for p in result_parts(messages)}
    asked = {p.id for m in messages for p in m.content if isinstance(p, ToolUsePart)}
    assert asked == answered  # no tool call left without a result


async def test_max_duration_also_bounds_compaction() -> None:
    class SlowStrategy:
        def token_estimate(self, messages: object) -> int:
            return 0

        def should_compact(self, messages: object, limit: int) -> bool:
            return True

        async def compact(self, messages: list[ProviderMessage]) -> list[ProviderMessage]:
            await asyncio.Event().wait()
            return messages

    turn, provider = turn_with(tool_response(("t1", "add", {"a": 1, "b": 2})), text_response("3"))
    turn.context = SlowStrategy()
    out = await asyncio.wait_for(turn.execute(TurnInput.new("x", config=TurnConfig(max_duration=50))), 10)
    assert out.exit_reason == ExitReason.timeout() and provider.calls == 1
