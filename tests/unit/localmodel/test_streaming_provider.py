"""The openai_compat provider streams from the local model server (its server-sent events,
usage in the last chunk) and gets the same tool call as a plain call."""

from __future__ import annotations

from airlock.providers import create_provider
from airlock.spec import ProviderSpec
from airlock.turn import ProviderMessage, ProviderRequest, Role, StopReason, TextPart, ToolSchema

from .test_server_http import Served, served

__all__ = ["served"]

ADD = ToolSchema(
    name="add",
    description="Add two numbers.",
    input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
)


async def test_a_streamed_call_returns_the_tool_call_and_usage(served: Served) -> None:
    provider = create_provider(
        ProviderSpec(kind="openai_compat", model="m", base_url=f"{served.base}/v1", max_retries=0)
    )
    pieces: list[str] = []

    async def on_text(text: str) -> None:
        pieces.append(text)

    request = ProviderRequest(
        messages=[ProviderMessage(role=Role.USER, content=[TextPart(text="1+2?")])], tools=[ADD]
    )
    try:
        response = await provider.complete_stream(request, on_text)  # type: ignore[attr-defined]
    finally:
        await provider.aclose()  # type: ignore[attr-defined]
    assert response.stop_reason is StopReason.TOOL_USE
    (call,) = response.tool_uses()
    assert (call.name, call.input) == ("add", {"a": 1, "b": 2})
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
