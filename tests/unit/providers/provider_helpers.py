"""Request builders shared by the provider tests."""

from __future__ import annotations

from typing import Any

from airlock.turn import (
    ProviderMessage,
    ProviderRequest,
    Role,
    TextPart,
    ToolResultPart,
    ToolSchema,
    ToolUsePart,
)

CALC = ToolSchema(
    name="calc",
    description="Evaluate an arithmetic expression.",
    input_schema={"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]},
)
ECHO = ToolSchema(name="echo", description="Echo text.", input_schema={"type": "object"})


def user(text: str) -> ProviderMessage:
    return ProviderMessage(role=Role.USER, content=[TextPart(text=text)])


def request(*messages: ProviderMessage, tools: list[ToolSchema] | None = None, **kw: Any) -> ProviderRequest:
    return ProviderRequest(messages=list(messages) or [user("hi")], tools=tools or [], **kw)


def tool_round_trip() -> list[ProviderMessage]:
    """user asks → assistant calls calc → user message with text FIRST, then the result
    (the provider must reorder: the API wants tool_result blocks first)."""
    return [
        user("what is 2+2?"),
        ProviderMessage(
            role=Role.ASSISTANT,
            content=[
                TextPart(text="Computing."),
                ToolUsePart(id="toolu_1", name="calc", input={"expr": "2+2"}),
            ],
        ),
        ProviderMessage(
            role=Role.USER,
            content=[
                TextPart(text="(result below)"),
                ToolResultPart(tool_use_id="toolu_1", content="4"),
            ],
        ),
    ]
