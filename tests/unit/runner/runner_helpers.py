"""Helpers for the runner tests: scripted agent specs."""

from __future__ import annotations

from typing import Any

from airlock.spec import AgentSpec, ProviderSpec


def text_step(text: str, tokens: tuple[int, int] = (10, 5), cost: str | None = "0.0010") -> dict[str, Any]:
    """A scripted model response that ends the turn with ``text``."""
    response: dict[str, Any] = {
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    }
    if cost is not None:
        response["cost"] = cost
    return {"response": response}


def tool_step(name: str, input: dict[str, Any], use_id: str = "t1", text: str = "") -> dict[str, Any]:
    """A scripted model response asking for one tool call."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": use_id, "name": name, "input": input})
    return {
        "response": {
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 7, "output_tokens": 3},
            "cost": "0.000500",
        }
    }


def scripted_spec(steps: list[dict[str, Any]], tools: list[str] | None = None, **extra: Any) -> AgentSpec:
    """An agent on the scripted provider playing ``steps``."""
    return AgentSpec(
        name="tester",
        provider=ProviderSpec(kind="scripted", script=steps),
        system="You are a test agent.",
        tools=tools or [],
        **extra,
    )
