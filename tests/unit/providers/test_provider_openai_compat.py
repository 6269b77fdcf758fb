"""OpenAICompatProvider through the real ``openai`` SDK against a local chat-completions server."""

from __future__ import annotations

import socket
from decimal import Decimal

import pytest

from airlock.errors import SpecError
from airlock.providers import PLACEHOLDER_API_KEY, OpenAICompatProvider, create_provider
from airlock.spec import ProviderSpec
from airlock.testing._fake_http import FakeResponse
from airlock.testing._openai_server import FakeOpenAIServer, chat_completion, tool_call
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
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply("Hello.", usage={"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14})
    response = await openai_compat.complete(
        request(user("hi"), system="Be brief.", temperature=0.1, max_tokens=64)
    )
    assert response.content == [TextPart(text="Hello.")]
    assert response.stop_reason is StopReason.END_TURN
    assert response.usage == TokenUsage(input_tokens=11, output_tokens=3)
    assert response.model == "local-model"
    assert response.cost is None  # no price configured: unknown, not a guess
    [body] = openai_server.chat_bodies()
    assert body == {
        "model": "local-model",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "max_tokens": 64,
        "temperature": 0.1,
    }
    assert openai_server.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"


async def test_tool_calls_round_trip(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        "Computing.", tool_calls=[tool_call("call_1", "calc", {"expr": "2+2"})], finish_reason="tool_calls"
    )
    first = await openai_compat.complete(request(user("what is 2+2?"), tools=[CALC, ECHO]))
    assert first.stop_reason is StopReason.TOOL_USE
    assert first.content == [
        TextPart(text="Computing."),
        ToolUsePart(id="call_1", name="calc", input={"expr": "2+2"}),
    ]

    openai_server.reply("It is 4.")
    messages = tool_round_trip()
    messages[1] = ProviderMessage(role=Role.ASSISTANT, content=list(first.content))
    messages[2] = ProviderMessage(
        role=Role.USER,
        content=[TextPart(text="(result below)"), ToolResultPart(tool_use_id="call_1", content="4")],
    )
    second = await openai_compat.complete(request(*messages, tools=[CALC, ECHO]))
    assert second.text() == "It is 4."

    bodies = openai_server.chat_bodies()
    assert bodies[0]["tools"][0] == {
        "type": "function",
        "function": {"name": "calc", "description": CALC.description, "parameters": CALC.input_schema},
    }
    assert bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Computing.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calc", "arguments": '{"expr": "2+2"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "4"},
        {"role": "user", "content": "(result below)"},
    ]


async def test_malformed_arguments_pass_through_as_raw(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        None,
        tool_calls=[tool_call("c1", "calc", '{"expr": "2+'), tool_call("c2", "echo", "[1, 2]")],
        finish_reason="tool_calls",
    )
    response = await openai_compat.complete(request(tools=[CALC, ECHO]))
    assert response.tool_uses() == [
        ToolUsePart(id="c1", name="calc", input={"_raw": '{"expr": "2+'}),
        ToolUsePart(id="c2", name="echo", input={"_raw": "[1, 2]"}),
    ]
    # sent back exactly as the model wrote it
    openai_server.reply("fixed")
    await openai_compat.complete(
        request(
            user("q"),
            ProviderMessage(role=Role.ASSISTANT, content=list(response.content)),
            ProviderMessage(
                role=Role.USER,
                content=[
                    ToolResultPart(tool_use_id="c1", content="invalid input", is_error=True),
                    ToolResultPart(tool_use_id="c2", content="invalid input", is_error=True),
                ],
            ),
            tools=[CALC, ECHO],
        )
    )
    sent = openai_server.chat_bodies()[1]["messages"]
    assert [c["function"]["arguments"] for c in sent[1]["tool_calls"]] == ['{"expr": "2+', "[1, 2]"]
    assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": "[error] invalid input"}


async def test_images_and_system_messages(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply("a cat")
    await openai_compat.complete(
        request(
            ProviderMessage(role=Role.SYSTEM, content=[TextPart(text="Rule.")]),
            ProviderMessage(
                role=Role.USER,
                content=[
                    TextPart(text="what?"),
                    ImagePart(source_type="base64", data="aGk=", media_type="image/png"),
                ],
            ),
        )
    )
    [body] = openai_server.chat_bodies()
    assert body["messages"] == [
        {"role": "system", "content": "Rule."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            ],
        },
    ]


async def test_extra_passthrough_only_known_keys(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply("ok")
    extra = {
        "metadata": {"user_id": "u-1", "trace": "x"},
        "stop_sequences": ["END"],
        "seed": 7,
        "parallel_tool_calls": False,
        "bogus": True,
    }
    await openai_compat.complete(request(extra=extra))
    [body] = openai_server.chat_bodies()
    assert (body["user"], body["stop"], body["seed"]) == ("u-1", ["END"], 7)
    assert body["parallel_tool_calls"] is False
    assert "bogus" not in body and "metadata" not in body


@pytest.mark.parametrize(
    ("finish", "expected"),
    [
        ("stop", StopReason.END_TURN),
        ("tool_calls", StopReason.TOOL_USE),
        ("length", StopReason.MAX_TOKENS),
        ("content_filter", StopReason.CONTENT_FILTER),
    ],
)
async def test_finish_reasons(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer, finish: str, expected: StopReason
) -> None:
    openai_server.reply("x", finish_reason=finish)
    response = await openai_compat.complete(request())
    assert response.stop_reason is expected
    assert response.truncated is (expected is StopReason.MAX_TOKENS)


async def test_stop_with_tool_calls_counts_as_tool_use(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(None, tool_calls=[tool_call("c", "echo", {})], finish_reason="stop")
    assert (await openai_compat.complete(request(tools=[ECHO]))).stop_reason is StopReason.TOOL_USE


async def test_refusal(openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer) -> None:
    openai_server.reply(None, refusal="I can't help with that.")
    response = await openai_compat.complete(request())
    assert (response.stop_reason, response.stop_detail) == (StopReason.REFUSAL, "I can't help with that.")


@pytest.mark.parametrize("finish", ["eos", "function_call", None])
async def test_unknown_finish_reason_is_a_model_error(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer, finish: str | None
) -> None:
    openai_server.reply("x", finish_reason=finish)
    with pytest.raises(TurnError) as info:
        await openai_compat.complete(request())
    assert info.value.kind == "model"
    assert "finish_reason" in str(info.value)


async def test_no_choices_is_a_model_error(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    body = chat_completion("x")
    body["choices"] = []
    openai_server.reply(body)
    with pytest.raises(TurnError, match="no choices") as info:
        await openai_compat.complete(request())
    assert info.value.kind == "model"


async def test_usage_with_cached_tokens_and_missing_usage(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply(
        "x",
        usage={
            "prompt_tokens": 1000,
            "completion_tokens": 50,
            "total_tokens": 1050,
            "prompt_tokens_details": {"cached_tokens": 600},
        },
    )
    usage = (await openai_compat.complete(request())).usage
    assert usage == TokenUsage(input_tokens=400, output_tokens=50, cache_read_tokens=600)

    body = chat_completion("x")
    del body["usage"]
    openai_server.reply(body)
    assert (await openai_compat.complete(request())).usage == TokenUsage()


async def test_configured_price(openai_server: FakeOpenAIServer) -> None:
    spec = ProviderSpec(
        kind="openai_compat",
        model="m",
        base_url=openai_server.base_url,
        price_per_mtok_in=Decimal("0.15"),
        price_per_mtok_out=Decimal("0.60"),
    )
    provider = create_provider(spec)
    openai_server.reply(
        "x",
        usage={
            "prompt_tokens": 1000,
            "completion_tokens": 500,
            "total_tokens": 1500,
            "prompt_tokens_details": {"cached_tokens": 200},
        },
    )
    # every prompt token (cached or not) at the input price: 1000x0.15 + 500x0.60
    assert (await provider.complete(request())).cost == Decimal("0.00045")

    free = create_provider(
        spec.model_copy(update={"price_per_mtok_in": Decimal(0), "price_per_mtok_out": Decimal(0)})
    )
    openai_server.reply("x")
    assert (await free.complete(request())).cost == Decimal(0)


def test_spec_errors() -> None:
    with pytest.raises(SpecError, match="needs a model"):
        create_provider(ProviderSpec(kind="openai_compat"))
    with pytest.raises(SpecError, match="both"):
        create_provider(ProviderSpec(kind="openai_compat", model="m", price_per_mtok_in=Decimal(1)))


@pytest.mark.parametrize(
    ("status", "kind", "sdk_class"),
    [
        (400, "model", "BadRequestError"),
        (401, "non_retryable", "AuthenticationError"),
        (403, "non_retryable", "PermissionDeniedError"),
        (404, "non_retryable", "NotFoundError"),
        (422, "model", "UnprocessableEntityError"),
        (429, "retryable", "RateLimitError"),
        (500, "retryable", "InternalServerError"),
        (503, "retryable", "InternalServerError"),
    ],
)
async def test_error_statuses(
    openai_compat: OpenAICompatProvider,
    openai_server: FakeOpenAIServer,
    status: int,
    kind: str,
    sdk_class: str,
) -> None:
    openai_server.fail(status, f"simulated {status}")
    with pytest.raises(TurnError) as info:
        await openai_compat.complete(request())
    assert info.value.kind == kind
    assert f"HTTP {status}" in str(info.value) and f"simulated {status}" in str(info.value)
    assert type(info.value.__cause__).__name__ == sdk_class


async def test_api_key_checked_on_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_TEST_OPENAI_KEY", "sk-local")
    async with FakeOpenAIServer(require_api_key="sk-local") as server:
        spec = ProviderSpec(
            kind="openai_compat", model="m", base_url=server.base_url, api_key_env="AIRLOCK_TEST_OPENAI_KEY"
        )
        server.reply("ok")
        assert (await create_provider(spec).complete(request())).text() == "ok"
        monkeypatch.setenv("AIRLOCK_TEST_OPENAI_KEY", "sk-wrong")
        with pytest.raises(TurnError) as info:
            await create_provider(spec.model_copy(update={"max_retries": 0})).complete(request())
        assert info.value.kind == "non_retryable"


async def test_timeout_is_retryable(openai_server: FakeOpenAIServer) -> None:
    provider = create_provider(
        ProviderSpec(
            kind="openai_compat", model="m", base_url=openai_server.base_url, timeout_s=0.3, max_retries=0
        )
    )
    openai_server.enqueue(FakeResponse(200, chat_completion("late"), delay_s=5))
    with pytest.raises(TurnError) as info:
        await provider.complete(request())
    assert info.value.kind == "retryable"
    assert "APITimeoutError" in str(info.value)


async def test_connection_refused_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = create_provider(
        ProviderSpec(kind="openai_compat", model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    )
    with pytest.raises(TurnError) as info:
        await provider.complete(request())
    assert info.value.kind == "retryable"
    assert "APIConnectionError" in str(info.value)


async def test_malformed_body_is_a_model_error(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.enqueue(FakeResponse(200, b"<html>proxy error</html>"))
    with pytest.raises(TurnError) as info:
        await openai_compat.complete(request())
    assert info.value.kind == "model"
