"""The command provider: each turn runs the user's message as one bash call and answers with
its output — through a real turn (the bash tool really runs), deterministic, free."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path

import pytest
from pydantic import ValidationError

from airlock.build import build_turn
from airlock.providers import CommandProvider
from airlock.spec import AgentSpec
from airlock.turn import StopReason, ToolUsePart
from layer0 import ExitReason, TurnError, TurnInput

from .provider_helpers import CALC, request, user


def command_agent(**extra: object) -> AgentSpec:
    return AgentSpec.model_validate(
        {"name": "probe", "provider": {"kind": "command"}, "tools": ["bash"], **extra}
    )


def test_a_turn_runs_the_message_and_answers_its_output(tmp_path: Path) -> None:
    turn = build_turn(command_agent(), workspace=tmp_path)
    out = asyncio.run(turn.execute(TurnInput.new("echo one; echo two > f.txt; cat f.txt; pwd")))
    assert out.exit_reason == ExitReason.complete()
    text = out.message.as_text()
    assert "one" in text and "two" in text and str(tmp_path) in text
    assert (tmp_path / "f.txt").read_text() == "two\n"
    assert [t.name for t in out.metadata.tools_called] == ["bash"]
    assert out.metadata.cost == Decimal(0)


def test_a_failing_command_is_still_answered_with_what_it_printed(tmp_path: Path) -> None:
    turn = build_turn(command_agent(), workspace=tmp_path)
    out = asyncio.run(turn.execute(TurnInput.new("echo to-stderr >&2; exit 3")))
    assert "to-stderr" in out.message.as_text() and "3" in out.message.as_text()


def test_the_first_request_calls_bash_and_the_second_ends_the_turn() -> None:
    provider = CommandProvider()
    bash = CALC.model_copy(update={"name": "bash"})
    first = asyncio.run(provider.complete(request(user("ls -l"), tools=[bash])))
    (call,) = first.content
    assert isinstance(call, ToolUsePart) and call.name == "bash" and call.input == {"command": "ls -l"}
    assert first.stop_reason == StopReason.TOOL_USE and first.cost == Decimal(0)
    assert first.truncated is False


def test_it_refuses_without_bash_or_without_a_command() -> None:
    with pytest.raises(ValidationError, match="add bash to tools"):
        AgentSpec.model_validate({"name": "x", "provider": {"kind": "command"}, "tools": ["calculator"]})
    provider = CommandProvider()
    with pytest.raises(TurnError, match="no bash tool"):
        asyncio.run(provider.complete(request(user("ls"), tools=[CALC])))
    bash = CALC.model_copy(update={"name": "bash"})
    with pytest.raises(TurnError, match="no command"):
        asyncio.run(provider.complete(request(user("   "), tools=[bash])))
