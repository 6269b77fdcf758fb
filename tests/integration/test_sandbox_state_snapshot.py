"""A sandboxed turn reads the same state as in-process: its StateReader travels as the snapshot.

The defect this guards: ``DockerEnvironment.run(turn, input, spec)`` ignored the turn's
StateReader, so a turn that saw its 4 history messages in-process saw none in a sandbox, and
its ``WriteMemory(history)`` effect then replaced the stored conversation with a shorter one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airlock.build import build_turn
from airlock.sandbox.docker import DockerEnvironment
from airlock.spec import HISTORY_KEY, AgentSpec
from airlock.state import InMemoryStore
from airlock.testing import scripted_agent, text_step
from layer0 import EnvError, EnvironmentSpec, Scope, SessionId, TurnInput, WriteMemory

pytestmark = pytest.mark.docker

SESSION = SessionId("s-history")


def said(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


HISTORY = [
    said("user", "My name is Ada."),
    said("assistant", "Nice to meet you, Ada."),
    said("user", "I like green tea."),
    said("assistant", "Noted: green tea."),
]


def recall_agent() -> AgentSpec:
    """Answers only a request carrying the 4 history messages plus the new one (5 in all)."""
    step = text_step("You are Ada, and you like green tea.", usage=(50, 9), match={"messages": 5})
    return scripted_agent([step], name="recall")


async def store_with_history() -> InMemoryStore:
    store = InMemoryStore()
    await store.write(Scope.session(SESSION), HISTORY_KEY, HISTORY)
    return store


def history_written(effects: list[Any]) -> list[dict[str, Any]]:
    writes = [e for e in effects if isinstance(e, WriteMemory) and e.key == HISTORY_KEY]
    assert len(writes) == 1, effects
    assert writes[0].scope == Scope.session(SESSION)
    value = writes[0].value
    assert isinstance(value, list)
    return value


async def test_a_sandboxed_turn_sees_its_history_and_the_stored_history_only_grows(
    env: DockerEnvironment, tmp_path: Path
) -> None:
    question = TurnInput.new("Who am I, and what do I drink?", session=SESSION)
    turn = build_turn(recall_agent(), state=await store_with_history(), workspace=tmp_path)

    in_process = await turn.execute(question)
    sandboxed = await env.run(turn, question, EnvironmentSpec())

    for output in (in_process, sandboxed):
        assert output.exit_reason.kind == "complete", output.message.joined_text()
        assert output.message.joined_text() == "You are Ada, and you like green tea."
        grown = history_written(output.effects)
        assert grown[: len(HISTORY)] == HISTORY  # the stored conversation is kept, in order
        assert [m["role"] for m in grown[len(HISTORY) :]] == ["user", "assistant"]
    assert history_written(sandboxed.effects) == history_written(in_process.effects)


async def test_without_a_reader_the_sandbox_gets_no_history(env: DockerEnvironment, tmp_path: Path) -> None:
    turn = build_turn(recall_agent(), workspace=tmp_path)
    # The only step wants 5 messages; without the history the request has 1: the turn fails.
    with pytest.raises(EnvError) as info:
        await env.run(turn, TurnInput.new("Who am I?", session=SESSION), EnvironmentSpec())
    assert info.value.kind == "turn_error" and "messages=1" in str(info.value)
