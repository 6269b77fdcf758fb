"""A runner builds the custom turn an AgentSpec names by entry point, and refuses one its
Python does not register before the turn starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.runner import RemoteTurn
from airlock.spec import AgentSpec
from layer0 import ExitReason, TurnError, TurnInput
from tests.support.extensions import install_ext_package


def spec(turn: str) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": "ext",
            "provider": {"kind": "custom", "name": "echo-llm", "options": {"prefix": "heard "}},
            "tools": ["calculator"],
            "middleware": [{"name": "tagger", "options": {"tag": "mw"}}],
            "turn": {"entry_point": turn, "options": {"input": {"expression": "20+22"}}},
        }
    )


async def test_the_runner_runs_a_custom_turn_with_a_custom_provider(
    address: str, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_ext_package(tmp_path, monkeypatch)
    async with RemoteTurn(address, token, spec("one-shot")) as turn:
        output = await turn.execute(TurnInput.new("hello"))
    assert output.exit_reason == ExitReason.complete()
    assert output.message.as_text() == "heard hello | [mw] 42"


async def test_an_unregistered_turn_is_refused_before_it_starts(
    address: str, token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_ext_package(tmp_path, monkeypatch)
    async with RemoteTurn(address, token, spec("nosuch")) as turn:
        with pytest.raises(TurnError) as e:
            await turn.execute(TurnInput.new("hello"))
    assert e.value.kind == "non_retryable"  # INVALID_ARGUMENT: never retried
    assert "agent 'ext': turn 'nosuch': not registered in the sandbox image" in str(e.value)
