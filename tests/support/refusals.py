"""A runner's refusal of an agent, asserted the same way by the tool tests."""

from __future__ import annotations

from typing import Any

import pytest

from airlock.runner import RemoteTurn
from airlock.spec import AgentSpec
from airlock.turn import InferenceStarted
from layer0 import TurnError, TurnInput


async def refused_before_any_model_call(runner: tuple[str, str], spec: AgentSpec) -> str:
    """The runner's refusal of ``spec`` (INVALID_ARGUMENT about the agent, before any model
    call): its message."""
    address, token = runner
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    async with RemoteTurn(address, token, spec) as turn:
        with pytest.raises(TurnError) as e:
            await turn.execute(TurnInput.new("go"), events=sink)
    assert e.value.kind == "non_retryable"
    assert "INVALID_ARGUMENT" in e.value.message
    assert not any(isinstance(event, InferenceStarted) for event in events)
    return e.value.message
