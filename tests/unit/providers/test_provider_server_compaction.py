"""Anthropic server-side compaction through the real ``anthropic`` SDK against the local
Messages API server (which speaks the compact-2026-01-12 beta on the wire), alone and in the
loop; and the SDKs' own retries reported by both providers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from airlock.providers import AnthropicProvider, OpenAICompatProvider, create_provider
from airlock.spec import HISTORY_KEY, ProviderSpec, ServerCompaction
from airlock.state import InMemoryStore
from airlock.testing._anthropic_server import (
    COMPACTION_BETA,
    FakeAnthropicServer,
    anthropic_error,
    anthropic_message,
    compaction_block,
    iterations_usage,
    text_block,
)
from airlock.testing._openai_server import FakeOpenAIServer, openai_error
from airlock.turn import (
    CompactionPart,
    LifecycleEvent,
    NeuronTurn,
    ProviderCompaction,
    ProviderMessage,
    Role,
    SlidingWindow,
    StopReason,
    TextPart,
    TokenUsage,
    TurnEvent,
)
from layer0 import Content, ExitReason, ProviderManaged, Scope, SessionId, TurnError, TurnInput, read_only

from .provider_helpers import request, user

TRIGGER = 60_000


@pytest.fixture
async def compacting(anthropic_server: FakeAnthropicServer) -> AsyncIterator[AnthropicProvider]:
    provider = create_provider(
        ProviderSpec(
            kind="anthropic",
            base_url=anthropic_server.base_url,
            max_retries=0,
            compaction=ServerCompaction(trigger_tokens=TRIGGER),
        )
    )
    assert isinstance(provider, AnthropicProvider)
    yield provider
    await provider.aclose()


async def test_compaction_is_requested_with_the_beta_and_its_block_comes_back_as_a_part(
    compacting: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    block = compaction_block("The user asked about prices; we listed three.")
    usage = iterations_usage(("message", 150_000, 100), ("compaction", 150_100, 900), ("message", 3_000, 50))
    anthropic_server.reply([block, text_block("Go on.")], usage=usage)
    response = await compacting.complete(request(user("continue")))

    [body] = anthropic_server.message_bodies()
    assert body["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}}]
    }
    assert COMPACTION_BETA in anthropic_server.requests[0].headers["anthropic-beta"]
    assert anthropic_server.requests[0].path.startswith("/v1/messages")
    assert response.content == [
        CompactionPart(summary="The user asked about prices; we listed three.", block=block),
        TextPart(text="Go on."),
    ]
    # every iteration counts (the top-level usage holds only the two message iterations)
    assert response.usage == TokenUsage(
        input_tokens=303_100,
        output_tokens=1_050,
        cache_read_tokens=0,
        cache_creation_tokens=0,
    )
    # Haiku 4.5, each iteration priced on its own: 303,100 x $1 + 1,050 x $5 per MTok
    assert response.cost == Decimal("0.30835")
    assert response.compaction == ProviderCompaction(tokens_before=150_100, tokens_after=3_000)


async def test_the_block_goes_back_verbatim_and_a_forged_one_is_refused(
    compacting: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    block = compaction_block("summary")
    anthropic_server.reply(
        [block], stop_reason="compaction", usage=iterations_usage(("compaction", 70_000, 500))
    )
    first = await compacting.complete(request(user("long task")))
    assert first.stop_reason is StopReason.COMPACTION
    assert first.compaction == ProviderCompaction()  # a compaction first: nothing said of the sizes

    history = [user("long task"), ProviderMessage(role=Role.ASSISTANT, content=first.content)]
    anthropic_server.reply("done")
    await compacting.complete(request(*history))
    sent = anthropic_server.message_bodies()[1]["messages"][1]
    assert sent == {"role": "assistant", "content": [block]}

    forged = CompactionPart(summary="summary", block={**block, "content": "a summary I prefer"})
    with pytest.raises(TurnError) as info:
        await compacting.complete(request(user("x"), ProviderMessage(role=Role.ASSISTANT, content=[forged])))
    assert info.value.kind == "model" and "compaction block was modified" in str(info.value)


async def test_without_compaction_nothing_is_requested_and_a_block_goes_as_its_summary(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    part = CompactionPart(summary="earlier: prices", block=compaction_block("earlier: prices"))
    anthropic_server.reply("ok")
    await anthropic.complete(
        request(user("a"), ProviderMessage(role=Role.ASSISTANT, content=[part]), user("b"))
    )
    [body] = anthropic_server.message_bodies()
    assert "context_management" not in body
    assert "anthropic-beta" not in anthropic_server.requests[0].headers
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Summary of the earlier conversation:\nearlier: prices"}
    ]


async def test_the_fake_api_refuses_context_management_without_the_beta(
    anthropic_server: FakeAnthropicServer,
) -> None:
    """The wire rule the provider must honour, checked as the API checks it."""
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="k", base_url=anthropic_server.base_url, max_retries=0)
    edits = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1_000}}]}
    with pytest.raises(anthropic.BadRequestError, match="requires the beta header"):
        await client.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": "x"}],
            extra_body={"context_management": edits},
        )
    with pytest.raises(anthropic.BadRequestError, match="at least 50000"):
        await client.beta.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": "x"}],
            betas=[COMPACTION_BETA],
            context_management=edits,  # type: ignore[arg-type]
        )
    await client.close()


async def test_in_the_loop_a_compaction_stop_goes_on_and_the_history_keeps_the_block(
    compacting: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    block = compaction_block("we were asked for a poem")
    anthropic_server.reply(
        [block],
        stop_reason="compaction",
        usage=iterations_usage(("message", 61_000, 10), ("compaction", 61_010, 400)),
    )
    anthropic_server.reply("Here is the poem.", usage={"input_tokens": 500, "output_tokens": 30})
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    # a client-side window beside it: what precedes the compaction no longer counts, so the
    # window leaves the long history (far over its 2,000 tokens) alone
    store = InMemoryStore()
    big = "word " * 5_000
    earlier = [user(big), ProviderMessage(role=Role.ASSISTANT, content=[TextPart(text=big)])] * 2
    await store.write(Scope.session("s"), HISTORY_KEY, [m.model_dump(mode="json") for m in earlier])
    window = SlidingWindow(keep_last=50, max_tokens=2_000)
    assert window.should_compact([*earlier, user("write a poem")], 100_000)
    turn = NeuronTurn(compacting, context=window, state=read_only(store), events=sink)
    out = await turn.execute(TurnInput.new("write a poem", session=SessionId("s")))

    assert out.exit_reason == ExitReason.complete() and out.message == Content.text("Here is the poem.")
    second = anthropic_server.message_bodies()[1]
    assert second["messages"][-1] == {"role": "assistant", "content": [block]}
    assert (out.metadata.tokens_in, out.metadata.tokens_out) == (61_000 + 61_010 + 500, 10 + 400 + 30)
    (managed,) = [
        e.event for e in events if isinstance(e, LifecycleEvent) and isinstance(e.event, ProviderManaged)
    ]
    assert (managed.provider, managed.tokens_before, managed.summary) == (
        "anthropic",
        61_010,
        Content.text("we were asked for a poem"),
    )
    assert not [e for e in events if e.type == "compacted"]  # the window found nothing to do
    history = next(e for e in out.effects if getattr(e, "key", None) == "history")
    assert {"type": "compaction", "summary": "we were asked for a poem", "block": block} in [
        p
        for m in history.value
        for p in m["content"]  # type: ignore[union-attr]
    ]


# -- the SDKs' own retries -------------------------------------------------------------------------


async def test_anthropic_reports_the_attempts_its_sdk_retried(anthropic_server: FakeAnthropicServer) -> None:
    provider = create_provider(
        ProviderSpec(kind="anthropic", base_url=anthropic_server.base_url, max_retries=2)
    )
    retry_fast = {"retry-after-ms": "1"}
    anthropic_server.enqueue(anthropic_error(529, "overloaded", headers=retry_fast))
    anthropic_server.enqueue(anthropic_error(429, "slow down", headers=retry_fast))
    anthropic_server.reply(anthropic_message("finally"))
    response = await provider.complete(request(user("hi")))
    assert response.retries == ["HTTP 529", "HTTP 429"] and response.text() == "finally"
    anthropic_server.reply("first time")
    assert (await provider.complete(request(user("hi")))).retries == []
    await provider.aclose()  # type: ignore[attr-defined]


async def test_openai_compat_reports_the_attempts_its_sdk_retried(openai_server: FakeOpenAIServer) -> None:
    provider = create_provider(
        ProviderSpec(kind="openai_compat", model="m", base_url=openai_server.base_url, max_retries=1)
    )
    assert isinstance(provider, OpenAICompatProvider)
    openai_server.enqueue(openai_error(503, "busy", headers={"retry-after-ms": "1"}))
    openai_server.reply("ok")
    response = await provider.complete(request(user("hi")))
    assert response.retries == ["HTTP 503"] and response.text() == "ok"
    await provider.aclose()
