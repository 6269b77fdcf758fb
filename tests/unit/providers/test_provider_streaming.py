"""Streaming model calls through the real SDKs' streaming APIs against local servers that
send server-sent events slowly: the text arrives in pieces before the call returns, and the
response is the one a plain call gives."""

from __future__ import annotations

from airlock.providers import AnthropicProvider, OpenAICompatProvider
from airlock.testing._anthropic_server import FakeAnthropicServer, text_block, tool_use_block
from airlock.testing._openai_server import FakeOpenAIServer, tool_call
from airlock.turn import StopReason, StreamingProvider, TextPart, ToolUsePart

from .provider_helpers import CALC, request


async def test_anthropic_streams_text_then_returns_the_whole_message(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    assert isinstance(anthropic, StreamingProvider)
    anthropic_server.reply_stream(
        [text_block("Let me compute that."), tool_use_block("toolu_1", "calc", {"expr": "2+2"})],
        stop_reason="tool_use",
        usage={"input_tokens": 12, "output_tokens": 30},
        delay_s=0.01,
    )
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    response = await anthropic.complete_stream(request(tools=[CALC]), on_text)
    assert len(pieces) > 1 and "".join(pieces) == "Let me compute that."
    assert response.content == [
        TextPart(text="Let me compute that."),
        ToolUsePart(id="toolu_1", name="calc", input={"expr": "2+2"}),
    ]
    assert response.stop_reason is StopReason.TOOL_USE
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 30)
    assert response.cost is not None and response.truncated is False
    (body,) = anthropic_server.message_bodies()
    assert body["stream"] is True


async def test_openai_streams_text_then_returns_the_whole_completion(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    assert isinstance(openai_compat, StreamingProvider)
    openai_server.reply_stream(
        "Computing it now.",
        tool_calls=[tool_call("call_1", "calc", {"expr": "2+2"})],
        finish_reason="tool_calls",
        usage={"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
        delay_s=0.01,
    )
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    response = await openai_compat.complete_stream(request(tools=[CALC]), on_text)
    assert len(pieces) > 1 and "".join(pieces) == "Computing it now."
    assert response.content == [
        TextPart(text="Computing it now."),
        ToolUsePart(id="call_1", name="calc", input={"expr": "2+2"}),
    ]
    assert response.stop_reason is StopReason.TOOL_USE
    assert (response.usage.input_tokens, response.usage.output_tokens) == (20, 9)
    (body,) = openai_server.chat_bodies()
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_a_max_tokens_stop_streams_and_is_truncated(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    openai_server.reply_stream("cut sho", finish_reason="length")

    async def on_text(text: str) -> None:
        pass

    response = await openai_compat.complete_stream(request(), on_text)
    assert response.text() == "cut sho" and response.truncated is True
