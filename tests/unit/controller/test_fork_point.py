"""A fork's starting point: found by checkpoint number or record, its state rebuilt from the
history's deltas, and a message continuing the conversation only at a step boundary."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from airlock.controller._fork_point import ForkRefused, continued, fork_point
from airlock.controller._journal import session_hash
from airlock.turn import ProviderMessage, Role, SessionState, TextPart, ToolUsePart
from layer0 import TurnInput


@dataclass(frozen=True)
class _Entry:
    seq: int
    delta: str
    manifest: str | None
    record: str | None


def _message(role: Role, text: str) -> ProviderMessage:
    return ProviderMessage(role=role, content=[TextPart(text=text)])


def _history() -> tuple[list[_Entry], list[SessionState]]:
    """Three checkpoints of job j: the context, a response, a step's end (incremental deltas)."""
    state = SessionState(input=TurnInput.new("hi"), started=True, messages=[_message(Role.USER, "hi")])
    states, entries, sent = [], [], 0
    for seq, text in enumerate(["", "thinking", "done"], start=1):
        if text:
            role = Role.ASSISTANT if seq == 2 else Role.USER
            state = state.model_copy(
                update={"messages": [*state.messages, _message(role, text)], "iterations": seq - 1}
            )
        delta = state.checkpoint(messages_from=sent)
        sent = len(state.messages)
        states.append(state)
        record = f"j:{seq * 2}" if seq > 1 else None
        entries.append(_Entry(seq, delta.model_dump_json(), f"sha256:{seq:064x}", record))
    return entries, states


def test_each_checkpoint_rebuilds_the_state_it_was() -> None:
    entries, states = _history()
    for at, want in (("1", states[0]), ("2", states[1]), ("3", states[2]), (None, states[2])):
        point = fork_point(entries, at, "j")
        assert point.state == want
        assert point.manifest == entries[point.seq - 1].manifest


def test_a_record_finds_the_first_checkpoint_at_or_after_it() -> None:
    entries, _ = _history()
    assert fork_point(entries, "j:3", "j").seq == 2
    assert fork_point(entries, "j:4", "j").seq == 2
    assert fork_point(entries, "j:5", "j").seq == 3


@pytest.mark.parametrize(
    ("at", "reason"),
    [("9", "no checkpoint 9"), ("other:2", "neither"), ("j:99", "no checkpoint of job j follows")],
)
def test_a_point_that_is_not_there_is_refused(at: str, reason: str) -> None:
    entries, _ = _history()
    with pytest.raises(ForkRefused, match=reason):
        fork_point(entries, at, "j")
    with pytest.raises(ForkRefused, match="no checkpoint to fork from"):
        fork_point([], None, "j")


def test_a_message_continues_at_a_step_boundary_only() -> None:
    _, states = _history()
    after = continued(states[1], "and now?")
    assert after.messages[-1] == _message(Role.USER, "and now?")
    merged = continued(states[2], "more")
    assert [p.text for p in merged.messages[-1].content if isinstance(p, TextPart)] == ["done", "more"]
    asking = states[1].model_copy(
        update={
            "messages": [
                *states[1].messages,
                ProviderMessage(role=Role.ASSISTANT, content=[ToolUsePart(id="t1", name="bash", input={})]),
            ]
        }
    )
    with pytest.raises(ForkRefused, match="inside a step"):
        continued(asking, "x")


def test_the_workspace_enters_the_state_hash_only_when_kept() -> None:
    _, states = _history()
    plain = session_hash(states[0])
    assert session_hash(states[0], "") == plain
    assert session_hash(states[0], "sha256:" + "1" * 64) != plain
