"""AnthropicProvider through the real ``anthropic`` SDK against a local Messages API server."""

from __future__ import annotations

import asyncio
import socket
import time
from decimal import Decimal
from typing import Any

import pytest

from airlock.errors import SpecError
from airlock.providers import PLACEHOLDER_API_KEY, AnthropicProvider, create_provider
from airlock.spec import ProviderSpec
from airlock.testing._anthropic_server import (
    FakeAnthropicServer,
    anthropic_message,
    presented_api_key,
    text_block,
    tool_use_block,
)
from airlock.testing._fake_http import FakeResponse
from airlock.turn import (
    ImagePart,
    ProviderMessage,
    Role,
    StopReason,
    TextPart,
    TokenUsage,
    ToolResultPart,
    ToolUsePart,
)
from layer0 import TurnError

from .provider_helpers import CALC, ECHO, request, tool_round_trip, user


async def test_text_response_and_request_on_the_wire(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply("Hello there.", usage={"input_tokens": 12, "output_tokens": 4})
    response = await anthropic.complete(
        request(user("hi"), system="Be brief.", temperature=0.2, max_tokens=99)
    )

    assert response.content == [TextPart(text="Hello there.")]
    assert response.stop_reason is StopReason.END_TURN
    assert response.model == "claude-haiku-4-5-20251001"
    assert response.usage == TokenUsage(input_tokens=12, output_tokens=4)
    # Haiku 4.5: 12 x $1/MTok + 4 x $5/MTok
    assert response.cost == Decimal("0.000032")
    [body] = anthropic_server.message_bodies()
    assert body == {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 99,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "system": "Be brief.",
        "temperature": 0.2,
    }
    headers = anthropic_server.requests[0].headers
    assert "anthropic-version" in headers
    # no key configured: the placeholder a credential sidecar replaces
    assert presented_api_key(anthropic_server.requests[0]) == PLACEHOLDER_API_KEY


async def test_spec_defaults_model_and_key_from_env(
    anthropic_server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRLOCK_TEST_ANTHROPIC_KEY", "sk-test-123")
    provider = create_provider(
        ProviderSpec(
            kind="anthropic",
            model="claude-3-haiku-20240307",
            base_url=anthropic_server.base_url,
            api_key_env="AIRLOCK_TEST_ANTHROPIC_KEY",
            max_tokens=321,
            temperature=0.5,
            max_retries=0,
        )
    )
    anthropic_server.reply("ok", model="claude-3-haiku-20240307")
    await provider.complete(request())
    [body] = anthropic_server.message_bodies()
    assert (body["model"], body["max_tokens"], body["temperature"]) == ("claude-3-haiku-20240307", 321, 0.5)
    assert presented_api_key(anthropic_server.requests[0]) == "sk-test-123"


def test_api_key_env_unset_is_a_spec_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRLOCK_TEST_MISSING_KEY", raising=False)
    with pytest.raises(SpecError, match="AIRLOCK_TEST_MISSING_KEY"):
        create_provider(ProviderSpec(kind="anthropic", api_key_env="AIRLOCK_TEST_MISSING_KEY"))


async def test_require_api_key_rejects_wrong_key() -> None:
    async with FakeAnthropicServer(require_api_key="sk-right") as server:
        provider = create_provider(ProviderSpec(kind="anthropic", base_url=server.base_url, max_retries=0))
        server.reply("never sent")
        with pytest.raises(TurnError) as info:
            await provider.complete(request())
        assert info.value.kind == "non_retryable"
        assert "AuthenticationError" in str(info.value) and "401" in str(info.value)
        assert server.pending == 1


async def test_tool_use_round_trip(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply(
        [text_block("Computing."), tool_use_block("toolu_1", "calc", {"expr": "2+2"})], stop_reason="tool_use"
    )
    first = await anthropic.complete(request(user("what is 2+2?"), tools=[CALC, ECHO]))
    assert first.stop_reason is StopReason.TOOL_USE
    assert first.tool_uses() == [ToolUsePart(id="toolu_1", name="calc", input={"expr": "2+2"})]

    anthropic_server.reply("2+2 is 4.")
    second = await anthropic.complete(request(*tool_round_trip(), tools=[CALC, ECHO]))
    assert second.text() == "2+2 is 4."

    bodies = anthropic_server.message_bodies()
    assert bodies[0]["tools"] == [
        {"name": "calc", "description": CALC.description, "input_schema": CALC.input_schema},
        {"name": "echo", "description": ECHO.description, "input_schema": ECHO.input_schema},
    ]
    messages = bodies[1]["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Computing."},
            {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"expr": "2+2"}},
        ],
    }
    # the tool_result was moved ahead of the text (the API rule; the fake server enforces it)
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4"},
        {"type": "text", "text": "(result below)"},
    ]


async def test_tool_result_order_is_enforced_by_the_server(anthropic_server: FakeAnthropicServer) -> None:
    """The fake server rejects what the real API rejects, so the reordering above is meaningful."""
    import anthropic as sdk

    client = sdk.AsyncAnthropic(api_key="k", base_url=anthropic_server.base_url, max_retries=0)
    anthropic_server.reply("unused")
    with pytest.raises(sdk.BadRequestError, match="tool_result blocks must come FIRST"):
        await client.messages.create(
            model="m",
            max_tokens=10,
            messages=[
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "calc", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "x"},
                        {"type": "tool_result", "tool_use_id": "t", "content": "4"},
                    ],
                },
            ],
        )
    await client.close()


async def test_error_results_images_system_messages_and_merging(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply("seen")
    messages = [
        ProviderMessage(role=Role.SYSTEM, content=[TextPart(text="Extra rule.")]),
        ProviderMessage(
            role=Role.USER,
            content=[
                TextPart(text="look"),
                ImagePart(source_type="base64", data="aGVsbG8=", media_type="image/png"),
                ImagePart(source_type="url", data="https://example.invalid/a.png", media_type="image/png"),
            ],
        ),
        ProviderMessage(
            role=Role.ASSISTANT, content=[ToolUsePart(id="t1", name="calc", input={"expr": "x"})]
        ),
        ProviderMessage(
            role=Role.USER, content=[ToolResultPart(tool_use_id="t1", content="bad", is_error=True)]
        ),
        ProviderMessage(role=Role.USER, content=[TextPart(text="and then?")]),
    ]
    await anthropic.complete(request(*messages, system="Base."))
    [body] = anthropic_server.message_bodies()
    assert body["system"] == "Base.\n\nExtra rule."
    assert body["messages"][0]["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}},
        {"type": "image", "source": {"type": "url", "url": "https://example.invalid/a.png"}},
    ]
    # two consecutive user messages merged into one, tool result first
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "bad", "is_error": True},
            {"type": "text", "text": "and then?"},
        ],
    }
    assert len(body["messages"]) == 3


@pytest.mark.parametrize(
    ("choice", "sent"), [("required", {"type": "any"}), ({"type": "tool", "name": "x"}, None)]
)
async def test_tool_choice_by_its_portable_name_or_as_the_api_has_it(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer, choice: Any, sent: Any
) -> None:
    anthropic_server.reply("ok")
    await anthropic.complete(request(extra={"tool_choice": choice}))
    [body] = anthropic_server.message_bodies()
    assert body["tool_choice"] == (sent or choice)


@pytest.mark.parametrize(
    ("extra", "sent"),
    [
        ({"parallel_tool_calls": False}, {"type": "auto", "disable_parallel_tool_use": True}),
        (
            {"parallel_tool_calls": False, "tool_choice": "required"},
            {"type": "any", "disable_parallel_tool_use": True},
        ),
        ({"parallel_tool_calls": False, "tool_choice": "none"}, {"type": "none"}),
        ({"parallel_tool_calls": True}, None),
    ],
)
async def test_parallel_tool_calls_false_disables_parallel_tool_use(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer, extra: Any, sent: Any
) -> None:
    anthropic_server.reply("ok")
    await anthropic.complete(request(extra=extra))
    [body] = anthropic_server.message_bodies()
    assert body.get("tool_choice") == sent


async def test_extra_passthrough_only_known_keys(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply("ok")
    extra = {
        "metadata": {"user_id": "u-42", "trace_id": "tr-1"},
        "stop_sequences": ["STOP"],
        "top_k": 5,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "something_unknown": 1,
    }
    await anthropic.complete(request(extra=extra))
    [body] = anthropic_server.message_bodies()
    assert body["metadata"] == {"user_id": "u-42"}
    assert body["stop_sequences"] == ["STOP"]
    assert body["top_k"] == 5
    assert "thinking" not in body and "something_unknown" not in body and "trace_id" not in str(body)


@pytest.mark.parametrize(
    ("wire", "expected"),
    [
        ("end_turn", StopReason.END_TURN),
        ("tool_use", StopReason.TOOL_USE),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("pause_turn", StopReason.PAUSE_TURN),
        ("refusal", StopReason.REFUSAL),
        ("model_context_window_exceeded", StopReason.CONTEXT_WINDOW_EXCEEDED),
    ],
)
async def test_every_stop_reason(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer, wire: str, expected: StopReason
) -> None:
    anthropic_server.reply("partial", stop_reason=wire)
    response = await anthropic.complete(request())
    assert response.stop_reason is expected
    assert response.stop_detail is None
    assert response.truncated is (expected is StopReason.MAX_TOKENS)


async def test_refusal_carries_its_explanation(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply(
        "",
        stop_reason="refusal",
        stop_details={
            "type": "refusal",
            "category": "cyber",
            "explanation": "Declined: exploit development.",
        },
    )
    response = await anthropic.complete(request())
    assert response.stop_reason is StopReason.REFUSAL
    assert response.stop_detail == "Declined: exploit development."

    anthropic_server.reply("", stop_reason="refusal", stop_details={"type": "refusal", "category": "bio"})
    assert (await anthropic.complete(request())).stop_detail == "category: bio"


@pytest.mark.parametrize("wire", ["compaction_needed", None])
async def test_unknown_or_missing_stop_reason_is_a_model_error(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer, wire: str | None
) -> None:
    anthropic_server.reply("text", stop_reason=wire)
    with pytest.raises(TurnError) as info:
        await anthropic.complete(request())
    assert info.value.kind == "model"
    assert "unknown stop_reason" in str(info.value) and repr(wire) in str(info.value)


async def test_thinking_server_tool_and_unknown_blocks_are_dropped(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    anthropic_server.reply(
        [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            text_block("answer"),
            {"type": "hologram", "payload": 1},
            tool_use_block("toolu_9", "echo", {"text": "x"}),
        ],
        stop_reason="tool_use",
    )
    with caplog.at_level("WARNING"):
        response = await anthropic.complete(request())
    assert response.content == [
        TextPart(text="answer"),
        ToolUsePart(id="toolu_9", name="echo", input={"text": "x"}),
    ]
    assert "hologram" in caplog.text
    assert "thinking" not in caplog.text  # known blocks are dropped quietly (debug)


async def test_usage_all_counters_and_cost(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply(
        "cached",
        usage={
            "input_tokens": 100,
            "output_tokens": 20,
            "cache_creation_input_tokens": 50,
            "cache_read_input_tokens": 1000,
            "cache_creation": {"ephemeral_5m_input_tokens": 30, "ephemeral_1h_input_tokens": 20},
        },
    )
    response = await anthropic.complete(request())
    assert response.usage == TokenUsage(
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=1000,
        cache_creation_tokens=50,
        cache_creation_5m_tokens=30,
        cache_creation_1h_tokens=20,
    )
    # 100x1.00 + 30x1.25 + 20x2.00 + 1000x0.10 + 20x5.00 = 377.5 per MTok
    assert response.cost == Decimal("0.0003775")


async def test_cost_is_priced_by_the_model_that_answered(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    usage = {"input_tokens": 150_000, "output_tokens": 1_000}
    anthropic_server.reply("long", model="claude-haiku-5-5", usage=usage)
    response = await anthropic.complete(request(model="claude-haiku-5-5"))
    # > 100K prompt: every token at the long band, 150000x0.50 + 1000x2.50
    assert response.cost == Decimal("0.0775")

    anthropic_server.reply("?", model="claude-opus-99", usage=usage)
    with caplog.at_level("WARNING"):
        response = await anthropic.complete(request(model="claude-opus-99"))
    assert response.cost is None
    assert "claude-opus-99" in caplog.text


@pytest.mark.parametrize(
    ("status", "kind", "sdk_class"),
    [
        (400, "model", "BadRequestError"),
        (401, "non_retryable", "AuthenticationError"),
        (403, "non_retryable", "PermissionDeniedError"),
        (404, "non_retryable", "NotFoundError"),
        (413, "model", "ContentTooLargeError"),
        (429, "retryable", "RateLimitError"),
        (500, "retryable", "InternalServerError"),
        (529, "retryable", "OverloadedError"),
    ],
)
async def test_error_statuses(
    anthropic: AnthropicProvider,
    anthropic_server: FakeAnthropicServer,
    status: int,
    kind: str,
    sdk_class: str,
) -> None:
    anthropic_server.fail(status, f"simulated {status}")
    with pytest.raises(TurnError) as info:
        await anthropic.complete(request())
    assert info.value.kind == kind
    assert f"HTTP {status}" in str(info.value)
    assert f"simulated {status}" in str(info.value)
    cause = info.value.__cause__
    assert cause is not None
    assert type(cause).__name__ == sdk_class


async def test_sdk_retries_are_configurable(anthropic_server: FakeAnthropicServer) -> None:
    provider = create_provider(
        ProviderSpec(kind="anthropic", base_url=anthropic_server.base_url, max_retries=1)
    )
    anthropic_server.enqueue(
        FakeResponse(
            429,
            {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}},
            headers={"retry-after-ms": "10"},
        )
    )
    anthropic_server.reply("after retry")
    response = await provider.complete(request())
    assert response.text() == "after retry"
    assert len(anthropic_server.requests) == 2


async def test_timeout_is_retryable(anthropic_server: FakeAnthropicServer) -> None:
    provider = create_provider(
        ProviderSpec(kind="anthropic", base_url=anthropic_server.base_url, timeout_s=0.3, max_retries=0)
    )
    anthropic_server.enqueue(FakeResponse(200, anthropic_message("late"), delay_s=5))
    started = time.monotonic()
    with pytest.raises(TurnError) as info:
        await provider.complete(request())
    assert time.monotonic() - started < 3
    assert info.value.kind == "retryable"
    assert "APITimeoutError" in str(info.value)


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = create_provider(
        ProviderSpec(kind="anthropic", base_url=f"http://127.0.0.1:{port}", max_retries=0)
    )
    with pytest.raises(TurnError) as info:
        await provider.complete(request())
    assert info.value.kind == "retryable"
    assert "APIConnectionError" in str(info.value)


async def test_dropped_connection_is_retryable(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.enqueue(FakeResponse(drop_connection=True))
    with pytest.raises(TurnError) as info:
        await anthropic.complete(request())
    assert info.value.kind == "retryable"


async def test_malformed_response_body_is_a_model_error(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.enqueue(
        FakeResponse(200, b"this is not json", headers={"content-type": "application/json"})
    )
    with pytest.raises(TurnError) as info:
        await anthropic.complete(request())
    assert info.value.kind == "model"
    assert "malformed response" in str(info.value)
    assert info.value.__cause__ is not None


async def test_concurrent_calls_share_one_client(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    for i in range(5):
        anthropic_server.reply(f"r{i}")
    responses = await asyncio.gather(*(anthropic.complete(request(user(f"q{i}"))) for i in range(5)))
    assert sorted(r.text() for r in responses) == [f"r{i}" for i in range(5)]
