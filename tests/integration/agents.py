"""Scripted agents for the sandbox tests: deterministic, offline (the scripted provider)."""

from __future__ import annotations

from typing import Any

from airlock.spec import AgentSpec, ProviderSpec


def bash_agent(*commands: str, name: str = "sandbox-probe", final: str = "done", **spec: Any) -> AgentSpec:
    """An agent that runs each bash command (one model step each), then answers ``final``."""
    steps: list[dict[str, Any]] = [
        {
            "response": {
                "content": [
                    {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"command": cmd}},
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 10 + i, "output_tokens": 5},
                "cost": "0.0001",
            }
        }
        for i, cmd in enumerate(commands)
    ]
    steps.append(
        {
            "response": {
                "content": [{"type": "text", "text": final}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 20, "output_tokens": 3},
                "cost": "0.0002",
            }
        }
    )
    return AgentSpec(name=name, provider=ProviderSpec(kind="scripted", script=steps), tools=["bash"], **spec)
