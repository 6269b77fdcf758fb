"""A session that survives its process: checkpoints, resuming inside a step, approval
suspension, and signals delivered at step boundaries."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from pydantic import JsonValue

from airlock.spec import ApprovalGate
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    Checkpoint,
    FunctionTool,
    NeuronTurn,
    ProviderResponse,
    SessionState,
    SignalDelivered,
    SlidingWindow,
    SuspendedForApproval,
    TextPart,
    ToolExecution,
    ToolResultPart,
    TurnEvent,
    TurnLoopError,
    TurnSuspended,
    tool,
)
from layer0 import ExitReason, TurnConfig, TurnInput

from .turn_helpers import Recorder

INPUT = TurnInput.new("count things")


class Counted:
    """A tool with a side effect outside the session: it counts its own runs."""

    def __init__(self) -> None:
        self.runs: list[int] = []

        @tool
        async def bump(n: int) -> str:
            """Record n."""
            self.runs.append(n)
            return f"bumped {n}"

        self.tool: FunctionTool = bump


def script() -> list[ProviderResponse]:
    return [
        tool_response(
            ("a", "bump", {"n": 1}), ("b", "bump", {"n": 2}), text="two at once", cost=Decimal("0.01")
        ),
        tool_response(("c", "bump", {"n": 3}), cost=Decimal("0.02")),
        text_response("done: 1, 2, 3", cost=Decimal("0.03")),
    ]


def make(counted: Counted, provider: FakeProvider, **kwargs: Any) -> NeuronTurn:
    return NeuronTurn(provider, tools=[counted.tool], **kwargs)


def mirror(events: list[TurnEvent]) -> list[SessionState]:
    """Every checkpoint of a run rebuilt into a full state, as a controller keeps them."""
    states: list[SessionState] = []
    for event in events:
        if isinstance(event, Checkpoint):
            states.append(SessionState.from_checkpoint(event, states[-1] if states else None))
    return states


def comparable(state: SessionState) -> dict[str, Any]:
    data = state.model_dump(mode="json")
    data["elapsed_ms"] = None
    for record in data["tool_records"]:
        record["duration"] = None
    return data


async def test_checkpoints_rebuild_the_session_state_from_deltas() -> None:
    counted, rec = Counted(), Recorder()
    session = make(counted, FakeProvider(script()), events=rec).start(INPUT)
    output = await session.run()
    assert output is not None and output.exit_reason == ExitReason.complete()
    checkpoints = [e for e in rec.events if isinstance(e, Checkpoint)]
    # assembly, then per step: the response and each tool (the last tool's checkpoint resumes
    # to the step's end); the final response and the end of the turn
    assert len(checkpoints) == 1 + (1 + 2) + (1 + 1) + 1 + 1
    assert checkpoints[0].messages_from == 0
    assert all(c.messages_from > 0 for c in checkpoints[1:]), "later ones carry only new messages"
    assert [c.tool_records_from for c in checkpoints][-1] == 3, "and only new tool records"
    states = mirror(rec.events)
    assert comparable(states[-1]) == comparable(session.state)


async def test_resuming_from_any_checkpoint_repeats_no_completed_model_or_tool_call() -> None:
    reference, rec = Counted(), Recorder()
    expected = await make(reference, FakeProvider(script()), events=rec).start(INPUT).run()
    assert expected is not None
    states = mirror(rec.events)
    assert reference.runs == [1, 2, 3]
    for i, snapshot in enumerate(states):
        counted = Counted()
        remaining = script()[snapshot.iterations :]
        provider = FakeProvider(remaining)
        output = await make(counted, provider).resume(snapshot.model_dump_json()).run()
        assert output is not None, f"checkpoint {i}"
        assert output.message == expected.message
        assert output.metadata.cost == expected.metadata.cost == Decimal("0.06")
        assert output.metadata.turns_used == 3
        assert [r.name for r in output.metadata.tools_called] == ["bump"] * 3
        done = {ex.tool_use_id for ex in snapshot.completed}
        if snapshot.exit_reason is not None:
            assert provider.calls == 0 and counted.runs == []
            continue
        ran_before = {1: "a", 2: "b", 3: "c"}
        already = [n for n, use in ran_before.items() if use in done or _answered(snapshot, use)]
        assert sorted(counted.runs + already) == [1, 2, 3], f"checkpoint {i}: each call ran exactly once"
        assert provider.calls == 3 - snapshot.iterations, f"checkpoint {i}: no model call repeated"


def _answered(state: SessionState, use_id: str) -> bool:
    return any(
        isinstance(p, ToolResultPart) and p.tool_use_id == use_id for m in state.messages for p in m.content
    )


async def test_a_gated_call_suspends_the_session_before_any_tool_of_its_step_runs() -> None:
    counted, rec = Counted(), Recorder()
    turn = make(counted, FakeProvider(script()), events=rec, approval=ApprovalGate(tools=["bu*"]))
    session = turn.start(INPUT)
    assert await session.run() is None
    assert [c.tool_use_id for c in session.awaiting] == ["a", "b"]
    assert counted.runs == []
    suspended = [e for e in rec.events if isinstance(e, TurnSuspended)]
    assert len(suspended) == 1 and suspended[0].calls[1].input == {"n": 2}
    with pytest.raises(TurnLoopError, match="approval of bump, bump"):
        await session.step()
    # the last checkpoint holds the open step to resume from
    state = mirror(rec.events)[-1]
    assert state.open_uses() and state.completed == []


async def test_approved_calls_run_once_and_rejected_ones_answer_the_model_with_the_reason() -> None:
    counted, rec = Counted(), Recorder()
    provider = FakeProvider(script())
    turn = make(counted, provider, events=rec, approval=ApprovalGate(tools=["bump"]))
    assert await turn.start(INPUT).run() is None
    state = mirror(rec.events)[-1]
    rejected = ToolExecution(
        tool_use_id="b", name="bump", input={"n": 2}, output="rejected by alice: not now", is_error=True
    )
    decided = state.model_copy(update={"approved": ["a"], "completed": [rejected]})
    session = turn.resume(decided)
    assert await session.run() is None  # the next step's call waits again
    assert counted.runs == [1]
    results = [p for p in provider.requests[-1].messages[-1].content if isinstance(p, ToolResultPart)]
    assert [(r.tool_use_id, r.is_error) for r in results] == [("a", False), ("b", True)]
    assert results[1].content == "rejected by alice: not now"
    assert [c.tool_use_id for c in session.awaiting] == ["c"]


async def test_a_gate_by_risk_class_uses_what_the_tool_declares() -> None:
    counted = Counted()
    counted.tool.risks = ("destructive",)  # type: ignore[attr-defined]
    turn = make(counted, FakeProvider(script()), approval=ApprovalGate(risks=["destructive"]))
    session = turn.start(INPUT)
    assert await session.run() is None
    assert session.awaiting[0].risks == ["destructive"]
    safe = make(Counted(), FakeProvider(script()), approval=ApprovalGate(risks=["external"]))
    assert (await safe.start(INPUT).run()) is not None


async def test_execute_refuses_to_hide_a_suspension() -> None:
    turn = make(Counted(), FakeProvider(script()), approval=ApprovalGate(tools=["bump"]))
    with pytest.raises(TurnLoopError, match="waits for approval of bump"):
        await turn.execute(INPUT)


def test_an_unknown_risk_class_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown risk class"):
        ApprovalGate(risks=["dangerous"])


async def test_suspended_for_approval_carries_the_calls() -> None:
    event = TurnSuspended(iteration=1, calls=[])
    assert SuspendedForApproval(event).calls == []


# -- signals -----------------------------------------------------------------------------


async def test_feedback_is_read_by_the_model_at_the_next_boundary() -> None:
    counted, rec = Counted(), Recorder()
    provider = FakeProvider(script())
    session = make(counted, provider, events=rec).start(INPUT)
    await session.step()
    session.deliver("feedback", "prefer odd numbers")
    await session.step()
    last_user = provider.requests[1].messages[-1]
    assert isinstance(last_user.content[-1], TextPart)
    assert last_user.content[-1].text == "[signal feedback] prefer odd numbers"
    delivered = [e for e in rec.events if isinstance(e, SignalDelivered)]
    assert [(d.signal_type, d.action) for d in delivered] == [("feedback", "feedback")]
    # the checkpoints still rebuild the state (the changed message was sent again)
    output = await session.run()
    assert output is not None
    assert comparable(mirror(rec.events)[-1]) == comparable(session.state)


async def test_a_budget_signal_changes_the_limits_and_survives_a_resume() -> None:
    provider = FakeProvider(script())
    turn = make(Counted(), provider, defaults=TurnConfig(max_turns=10))
    session = turn.start(INPUT)
    await session.step()
    session.deliver("budget", {"max_turns": 1})
    result = await session.step()
    assert result.exit_reason == ExitReason.max_turns()
    assert session.state.overrides == {"max_turns": 1}
    assert turn.resume(session.state).config.max_turns == 1


async def test_a_budget_signal_switches_the_model_of_later_calls_and_survives_a_resume() -> None:
    provider = FakeProvider(script())
    turn = make(Counted(), provider, defaults=TurnConfig(max_turns=10))
    session = turn.start(INPUT)
    await session.step()
    session.deliver("budget", {"model": "cheaper-model"})
    await session.step()
    assert provider.requests[-1].model == "cheaper-model"
    assert provider.requests[0].model != "cheaper-model"
    assert turn.resume(session.state).config.model == "cheaper-model"


@pytest.mark.parametrize(
    "data",
    [
        {"max_turns": 0},
        {"model": ""},
        {"max_cost": "lots"},
        {"speed": 2},
        "more",
        {"max_turns": True},
        {"max_cost": "NaN"},
    ],
)
async def test_a_malformed_budget_signal_is_ignored_and_says_why(data: JsonValue) -> None:
    rec = Recorder()
    session = make(Counted(), FakeProvider(script()), events=rec).start(INPUT)
    session.deliver("budget", data)
    await session.run()
    delivered = [e for e in rec.events if isinstance(e, SignalDelivered)]
    assert delivered[0].action == "ignored" and delivered[0].detail
    assert session.state.overrides == {}


async def test_a_cancel_signal_ends_the_turn_at_the_boundary() -> None:
    counted = Counted()
    provider = FakeProvider(script())
    session = make(counted, provider).start(INPUT)
    await session.step()
    session.deliver("cancel", "operator said stop")
    output = await session.run()
    assert output is not None and output.exit_reason == ExitReason.custom("cancelled")
    assert provider.calls == 1 and counted.runs == [1, 2]
    assert any("operator said stop" in getattr(e, "message", "") for e in output.effects)


async def test_a_compaction_sends_every_message_again() -> None:
    rec = Recorder()
    provider = FakeProvider(script())
    turn = make(Counted(), provider, events=rec, context=SlidingWindow(keep_last=2), context_limit=1)
    output = await turn.start(INPUT).run()
    assert output is not None
    froms = [e.messages_from for e in rec.events if isinstance(e, Checkpoint)]
    assert froms.count(0) >= 2, "the first checkpoint and one after each compaction are whole"
    assert comparable(mirror(rec.events)[-1]) == comparable(turn.resume(mirror(rec.events)[-1]).state)
    assert len(mirror(rec.events)[-1].messages) < 6
