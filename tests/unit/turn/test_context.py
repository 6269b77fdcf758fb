"""Context strategies: token estimate, sliding window and summarization keep tool pairs together."""

from __future__ import annotations

from decimal import Decimal

import pytest

from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    Compaction,
    Composite,
    ContextStrategy,
    NeuronTurn,
    NoCompaction,
    ProviderMessage,
    ProviderRequest,
    Role,
    SlidingWindow,
    Summarization,
    TextPart,
    ToolResultPart,
    ToolUsePart,
    estimate_tokens,
    tool,
)
from layer0 import ExitReason, TurnInput


def user(text: str) -> ProviderMessage:
    return ProviderMessage(role=Role.USER, content=[TextPart(text=text)])


def assistant(text: str) -> ProviderMessage:
    return ProviderMessage(role=Role.ASSISTANT, content=[TextPart(text=text)])


def call(i: int) -> ProviderMessage:
    return ProviderMessage(role=Role.ASSISTANT, content=[ToolUsePart(id=f"t{i}", name="f", input={"i": i})])


def result(i: int) -> ProviderMessage:
    return ProviderMessage(role=Role.USER, content=[ToolResultPart(tool_use_id=f"t{i}", content="r" * 40)])


def conversation(pairs: int) -> list[ProviderMessage]:
    msgs = [user("the task")]
    for i in range(pairs):
        msgs += [call(i), result(i)]
    return msgs


def assert_pairs_intact(messages: list[ProviderMessage]) -> None:
    """Every tool_result's tool_use is in the message right before it."""
    for idx, msg in enumerate(messages):
        for part in msg.content:
            if isinstance(part, ToolResultPart):
                assert idx > 0, "conversation starts with a tool result"
                prev = messages[idx - 1]
                ids = {p.id for p in prev.content if isinstance(p, ToolUsePart)}
                assert part.tool_use_id in ids, f"tool_result {part.tool_use_id} lost its tool_use"


def test_estimate_is_about_four_chars_per_token() -> None:
    assert estimate_tokens([]) == 0
    small = estimate_tokens([user("x" * 400)])
    assert 100 <= small <= 110
    assert estimate_tokens([user("x" * 4000)]) > 9 * small


def test_strategies_implement_the_protocol() -> None:
    provider = FakeProvider()
    for s in (NoCompaction(), SlidingWindow(), Summarization(provider), Composite([], limit=10)):
        assert isinstance(s, ContextStrategy)


async def test_no_compaction() -> None:
    msgs = conversation(50)
    strategy = NoCompaction()
    assert not strategy.should_compact(msgs, 1)
    assert await strategy.compact(msgs) == msgs


@pytest.mark.parametrize("keep_last", range(1, 12))
async def test_sliding_window_never_splits_pairs_and_keeps_the_task(keep_last: int) -> None:
    msgs = conversation(10)
    window = SlidingWindow(keep_last=keep_last)
    assert window.should_compact(msgs, 1_000_000)
    out = await window.compact(msgs)
    assert out[0] == user("the task")
    assert_pairs_intact(out)
    assert len(out) <= max(keep_last, 2) + 1
    assert out[-1] == msgs[-1]
    assert [m.role for m in out[:2]] == [Role.USER, Role.ASSISTANT]


async def test_sliding_window_starts_at_a_plain_user_message_without_a_task() -> None:
    msgs = [call(0), result(0), user("next"), assistant("a"), user("more"), call(1), result(1)]
    out = await SlidingWindow(keep_last=4).compact(msgs)
    assert out == msgs[4:]
    assert_pairs_intact(out)


async def test_sliding_window_shrinks_further_for_the_token_limit() -> None:
    msgs = conversation(10)
    window = SlidingWindow(keep_last=100, max_tokens=60)
    assert window.should_compact(msgs, 1_000_000)
    out = await window.compact(msgs)
    assert len(out) == 3 and estimate_tokens(out) <= 60
    assert_pairs_intact(out)


async def test_sliding_window_leaves_uncuttable_conversations_alone() -> None:
    msgs = [user("only"), assistant("answer")]
    assert await SlidingWindow(keep_last=1).compact(msgs) == msgs


async def test_summarization_replaces_old_messages_with_a_summary() -> None:
    summary_call = text_response("they talked about f", tokens_in=300, tokens_out=20, cost=Decimal("0.002"))
    provider = FakeProvider([summary_call])
    msgs = conversation(6)
    strategy = Summarization(provider, keep_last=4, max_tokens=50)
    assert strategy.should_compact(msgs, 1_000_000)
    done = await strategy.compact(msgs)
    assert isinstance(done, Compaction) and done.calls == (summary_call,)  # its usage is reported
    out = done.messages
    assert out[0] == user("Summary of the earlier conversation:\nthey talked about f")
    assert out[1:] == msgs[-4:]
    assert_pairs_intact(out)
    request: ProviderRequest = provider.requests[0]
    prompt = request.messages[0].content[0]
    assert isinstance(prompt, TextPart) and "user: the task" in prompt.text and "called f" in prompt.text
    assert request.tools == []


async def test_summarization_below_the_limit_does_nothing() -> None:
    strategy = Summarization(FakeProvider(), keep_last=4, max_tokens=1_000_000)
    assert not strategy.should_compact(conversation(6), 1_000_000)


async def test_composite_applies_each_strategy_while_needed() -> None:
    provider = FakeProvider([text_response("summary")])
    composite = Composite(
        [SlidingWindow(keep_last=6), Summarization(provider, keep_last=2, max_tokens=10)], limit=10
    )
    msgs = conversation(10)
    assert composite.should_compact(msgs, 10)
    done = await composite.compact(msgs)
    assert isinstance(done, Compaction) and len(done.calls) == 1
    out = done.messages
    assert out[0].content[0] == TextPart(text="Summary of the earlier conversation:\nsummary")
    assert len(out) == 3
    assert_pairs_intact(out)


async def test_loop_compacts_between_calls_and_every_request_keeps_pairs() -> None:
    @tool
    async def f(i: int) -> str:
        """F."""
        return "r" * 40

    script = [tool_response((f"t{i}", "f", {"i": i})) for i in range(12)] + [text_response("done")]
    provider = FakeProvider(script)
    turn = NeuronTurn(provider, tools=[f], context=SlidingWindow(keep_last=5))
    out = await turn.execute(TurnInput.new("the task"))
    assert out.exit_reason == ExitReason.complete()
    for request in provider.requests:
        assert len(request.messages) <= 7
        assert request.messages[0] == user("the task")
        assert_pairs_intact(request.messages)
