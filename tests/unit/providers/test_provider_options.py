"""Per-agent provider options (extended thinking, reasoning effort, response format) on the
wire of the real SDKs, priced, and validated by the spec."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from airlock.providers import AnthropicProvider, OpenAICompatProvider, create_provider
from airlock.spec import ProviderSpec
from airlock.testing._anthropic_server import (
    FakeAnthropicServer,
    text_block,
    thinking_block,
    tool_use_block,
)
from airlock.testing._openai_server import FakeOpenAIServer, chat_completion
from airlock.turn import ProviderMessage, Role, ToolResultPart

from .provider_helpers import CALC, request, user


@pytest.fixture
async def thinker(anthropic_server: FakeAnthropicServer) -> AsyncIterator[AnthropicProvider]:
    spec = ProviderSpec(
        kind="anthropic",
        base_url=anthropic_server.base_url,
        max_retries=0,
        max_tokens=4000,
        temperature=1,
        thinking={"budget_tokens": 2048},
    )
    provider = create_provider(spec)
    assert isinstance(provider, AnthropicProvider)
    yield provider
    await provider.aclose()


def _continuation(answer: list[Any]) -> list[ProviderMessage]:
    calls = [p for p in answer if getattr(p, "type", None) == "tool_use"]
    return [
        user("what is 2+2?"),
        ProviderMessage(role=Role.ASSISTANT, content=answer),
        ProviderMessage(role=Role.USER, content=[ToolResultPart(tool_use_id=calls[0].id, content="4")]),
    ]


async def test_thinking_goes_on_the_wire_and_its_blocks_come_back_before_the_calls(
    thinker: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    thought = thinking_block("2+2 needs the calculator")
    anthropic_server.reply(
        [thought, tool_use_block("toolu_1", "calc", {"expr": "2+2"})],
        stop_reason="tool_use",
        usage={"input_tokens": 100, "output_tokens": 300},  # thinking included, as the API counts
    )
    first = await thinker.complete(request(user("what is 2+2?"), tools=[CALC]))
    anthropic_server.reply("4.", usage={"input_tokens": 150, "output_tokens": 10})
    await thinker.complete(request(*_continuation(list(first.content)), tools=[CALC]))

    sent, continued = anthropic_server.message_bodies()
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in sent
    assert continued["messages"][1]["content"][0] == thought  # verbatim, first
    assert [b["type"] for b in continued["messages"][1]["content"]] == ["thinking", "tool_use"]
    # thinking tokens are output tokens: 100 x 1.00 + 300 x 5.00 per MTok (Haiku 4.5)
    assert first.usage.output_tokens == 300
    assert first.cost == Decimal("0.0016")


async def test_a_tool_use_whose_thinking_is_not_held_continues_without_thinking(
    thinker: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    from airlock.turn import ToolUsePart

    anthropic_server.reply([text_block("4.")])
    answer = [ToolUsePart(id="toolu_9", name="calc", input={"expr": "2+2"})]
    await thinker.complete(request(*_continuation(answer), tools=[CALC]))
    (body,) = anthropic_server.message_bodies()
    assert "thinking" not in body


async def test_thinking_is_off_when_a_tool_call_is_forced(
    thinker: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    anthropic_server.reply([text_block("ok")])
    await thinker.complete(request(user("go"), tools=[CALC], extra={"tool_choice": "required"}))
    (body,) = anthropic_server.message_bodies()
    assert "thinking" not in body and body["tool_choice"] == {"type": "any"}


async def _openai(server: FakeOpenAIServer, **options: Any) -> OpenAICompatProvider:
    spec = ProviderSpec(
        kind="openai_compat",
        model="o-local",
        base_url=server.base_url,
        max_retries=0,
        price_per_mtok_in=Decimal("1"),
        price_per_mtok_out=Decimal("4"),
        **options,
    )
    provider = create_provider(spec)
    assert isinstance(provider, OpenAICompatProvider)
    return provider


async def test_reasoning_effort_and_a_json_schema_go_on_the_wire(openai_server: FakeOpenAIServer) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    provider = await _openai(
        openai_server,
        reasoning_effort="high",
        response_format={"type": "json_schema", "name": "answer", "json_schema": schema, "strict": True},
    )
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 500,
        "total_tokens": 600,
        "completion_tokens_details": {"reasoning_tokens": 450},
    }
    openai_server.reply(chat_completion('{"answer": 4}', usage=usage))
    response = await provider.complete(request())
    await provider.aclose()
    (body,) = openai_server.chat_bodies()
    assert body["reasoning_effort"] == "high"
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": True},
    }
    # reasoning tokens are part of the completion tokens: priced once, 100 x 1 + 500 x 4 per MTok
    assert response.usage.output_tokens == 500
    assert response.cost == Decimal("0.0021")


async def test_json_object_format(openai_server: FakeOpenAIServer) -> None:
    provider = await _openai(openai_server, response_format={"type": "json_object"})
    openai_server.reply(chat_completion("{}"))
    await provider.complete(request())
    await provider.aclose()
    (body,) = openai_server.chat_bodies()
    assert body["response_format"] == {"type": "json_object"} and "reasoning_effort" not in body


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"kind": "anthropic", "thinking": {"budget_tokens": 100}}, "thinking.budget_tokens"),
        (
            {"kind": "anthropic", "max_tokens": 2000, "thinking": {"budget_tokens": 4096}},
            "thinking.budget_tokens",
        ),
        ({"kind": "anthropic", "temperature": 0.2, "thinking": {"budget_tokens": 1024}}, "temperature"),
        ({"kind": "openai_compat", "thinking": {"budget_tokens": 1024}}, "thinking"),
        ({"kind": "anthropic", "reasoning_effort": "low"}, "reasoning_effort"),
        ({"kind": "openai_compat", "reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"kind": "openai_compat", "response_format": {"type": "yaml"}}, "response_format.type"),
        (
            {"kind": "openai_compat", "response_format": {"type": "json_schema"}},
            "response_format.json_schema",
        ),
        (
            {
                "kind": "openai_compat",
                "response_format": {"type": "json_schema", "name": "a b", "json_schema": {}},
            },
            "response_format.name",
        ),
        (
            {"kind": "openai_compat", "response_format": {"type": "json_object", "strict": True}},
            "response_format.strict",
        ),
    ],
)
def test_bad_values_name_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ValidationError) as info:
        ProviderSpec(model="m", **options)
    assert key in str(info.value)


@pytest.mark.parametrize(
    "options",
    [
        {"kind": "anthropic", "thinking": {"budget_tokens": 2048}},
        {"kind": "openai_compat", "reasoning_effort": "low", "response_format": {"type": "json_object"}},
        {
            "kind": "openai_compat",
            "response_format": {"type": "json_schema", "name": "a", "json_schema": {"type": "object"}},
        },
    ],
)
def test_options_cross_the_wire(options: dict[str, Any]) -> None:
    from airlock import wire
    from airlock.spec import AgentSpec

    spec = AgentSpec(name="a", provider=ProviderSpec(model="m", **options))
    assert wire.spec_from_proto(wire.spec_to_proto(spec)) == spec
