"""Turn-level stepping: step, pause (in every state), JSON snapshot, resume elsewhere, cancel."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest

from airlock.state import InMemoryStore
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import (
    NeuronTurn,
    ProviderResponse,
    SessionState,
    StepResult,
    StopReason,
    ToolResultPart,
    TurnEvent,
    TurnLoop,
    TurnLoopError,
    tool,
)
from layer0 import Content, ExitReason, Scope, SessionId, TurnConfig, TurnInput, TurnOutput, WriteMemory

from .turn_helpers import Recorder, add, result_parts


def script() -> list[ProviderResponse]:
    return [
        tool_response(("t1", "add", {"a": 1, "b": 2}), text="adding", cost=Decimal("0.001")),
        tool_response(("t2", "write_memory", {"key": "sum", "value": 3}), cost=Decimal("0.002")),
        text_response("searching", stop=StopReason.PAUSE_TURN, cost=Decimal("0.003")),
        tool_response(("t3", "add", {"a": 3, "b": 4}), cost=Decimal("0.004")),
        text_response("the answer is 7", cost=Decimal("0.005")),
    ]


def make_turn(provider: FakeProvider, **kwargs: object) -> NeuronTurn:
    return NeuronTurn(provider, tools=[add], effect_tools=["write_memory"], **kwargs)  # type: ignore[arg-type]


INPUT = TurnInput.new("add things", session=SessionId("s1"), metadata={"trace": "x"})


def comparable(out: TurnOutput) -> dict[str, object]:
    """The output's JSON without wall-clock durations."""
    data = out.model_dump(mode="json")
    data["metadata"]["duration"] = None
    for record in data["metadata"]["tools_called"]:
        record["duration"] = None
    return data


async def test_step_runs_one_model_call_and_its_tools() -> None:
    provider = FakeProvider(script())
    session = make_turn(provider).start(INPUT)
    first = await session.step()
    assert isinstance(first, StepResult)
    assert (first.iteration, first.text, first.stop_reason, first.is_complete) == (
        1,
        "adding",
        StopReason.TOOL_USE,
        False,
    )
    assert [(x.name, x.output, x.is_error) for x in first.tool_executions] == [("add", "3", False)]
    assert provider.calls == 1
    second = await session.step()
    assert second.tool_executions[0].effect and second.tool_executions[0].output == "Memory written."
    third = await session.step()
    assert third.stop_reason is StopReason.PAUSE_TURN and third.tool_executions == []
    await session.step()
    last = await session.step()
    assert last.is_complete and last.exit_reason == ExitReason.complete()
    assert last.output is not None and last.output.message == Content.text("the answer is 7")
    assert provider.calls == 5
    again = await session.step()  # after the end: the same result, no model call
    assert again.is_complete and again.output == last.output and provider.calls == 5


async def test_execute_equals_stepping_to_the_end() -> None:
    stepped = make_turn(FakeProvider(script())).start(INPUT)
    while not (await stepped.step()).is_complete:
        pass
    executed = await make_turn(FakeProvider(script())).execute(INPUT)
    assert stepped.output is not None
    assert comparable(stepped.output) == comparable(executed)


async def test_pause_before_the_first_step() -> None:
    rec = Recorder()
    provider = FakeProvider(script())
    session = make_turn(provider).start(INPUT, events=rec)
    session.request_pause()
    assert await session.run() is None
    assert provider.calls == 0
    assert rec.types() == ["paused"]
    assert session.state.iterations == 0 and not session.state.started
    out = await session.run()  # continue
    assert out is not None and out.exit_reason == ExitReason.complete()


async def test_pause_during_run_stops_at_the_next_boundary_and_run_continues() -> None:
    session_box: list[TurnLoop] = []

    async def pause_after_second_call(event: TurnEvent) -> None:
        if event.type == "inference_finished" and event.iteration == 2:
            session_box[0].request_pause()

    provider = FakeProvider(script())
    session = make_turn(provider).start(INPUT, events=pause_after_second_call)
    session_box.append(session)
    assert await session.run() is None
    assert provider.calls == 2 and session.state.iterations == 2
    assert not session.is_complete
    out = await session.run()
    assert out is not None and provider.calls == 5


async def test_a_withdrawn_pause_is_not_honoured() -> None:
    rec = Recorder()
    session = make_turn(FakeProvider(script())).start(INPUT, events=rec)
    session.request_pause()
    session.withdraw_pause()
    assert not session.pause_requested
    out = await session.run()
    assert out is not None and out.exit_reason == ExitReason.complete()
    assert "paused" not in rec.types()


async def test_pause_after_the_end_is_harmless() -> None:
    session = make_turn(FakeProvider(script())).start(INPUT)
    out = await session.run()
    session.request_pause()
    assert await session.run() == out


async def test_step_while_stepping_is_refused() -> None:
    gate = asyncio.Event()

    async def slow(request: object) -> ProviderResponse:
        await gate.wait()
        return text_response("ok")

    session = make_turn(FakeProvider([slow])).start(TurnInput.new("x"))
    running = asyncio.create_task(session.step())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    with pytest.raises(TurnLoopError):
        await session.step()
    gate.set()
    assert (await running).is_complete


@pytest.mark.parametrize("pause_after", [0, 1, 2, 3, 4])
async def test_resume_from_json_in_a_fresh_turn_gives_the_same_output(pause_after: int) -> None:
    store = InMemoryStore()
    await store.write(Scope.session("s1"), "history", [])
    uninterrupted = await make_turn(FakeProvider(script()), state=store).execute(INPUT)

    first = make_turn(FakeProvider(script()), state=store).start(INPUT)
    for _ in range(pause_after):
        await first.step()
    wire = first.state.model_dump_json()
    json.loads(wire)  # plain JSON

    # "another process": a new turn whose provider continues the recorded conversation
    resumed_turn = make_turn(FakeProvider(script()[pause_after:]), state=store)
    resumed = resumed_turn.resume(wire)
    out = await resumed.run()
    assert out is not None
    assert comparable(out) == comparable(uninterrupted)
    assert out.metadata.cost == Decimal("0.015")


async def test_state_snapshot_is_json_with_decimal_cost_string() -> None:
    session = make_turn(FakeProvider(script())).start(INPUT)
    await session.step()
    await session.step()
    data = json.loads(session.state.model_dump_json())
    assert data["cost"] == "0.003"
    assert data["iterations"] == 2
    assert data["tokens_in"] == 20
    assert [r["name"] for r in data["tool_records"]] == ["add", "write_memory"]
    assert data["effects"][0]["type"] == "write_memory"
    assert data["input"]["metadata"] == {"trace": "x"}
    assert data["elapsed_ms"] >= 0
    assert len(data["messages"]) == 5
    assert SessionState.model_validate(data) == session.state


async def test_state_during_a_step_is_the_last_boundary() -> None:
    gate = asyncio.Event()
    inside = asyncio.Event()
    seen: list[SessionState] = []
    box: list[TurnLoop] = []

    @tool
    async def wait() -> str:
        """Wait."""
        seen.append(box[0].state)
        inside.set()
        await gate.wait()
        return "ok"

    provider = FakeProvider([tool_response(("t1", "wait", {})), text_response("done")])
    session = NeuronTurn(provider, tools=[wait]).start(TurnInput.new("x"))
    box.append(session)
    task = asyncio.create_task(session.step())
    await inside.wait()
    assert seen[0].iterations == 0 and seen[0].messages == []
    gate.set()
    await task
    assert session.state.iterations == 1


async def test_resume_rejects_garbage() -> None:
    with pytest.raises(TurnLoopError):
        make_turn(FakeProvider()).resume('{"version": 2}')


async def test_resuming_a_finished_state_returns_its_output() -> None:
    session = make_turn(FakeProvider(script())).start(INPUT)
    out = await session.run()
    again = make_turn(FakeProvider()).resume(session.state)
    assert again.is_complete and again.output == out
    assert await again.run() == out


async def test_cancelled_output_has_partial_metadata_and_no_history() -> None:
    gate = asyncio.Event()

    @tool
    async def hang() -> str:
        """Hang."""
        gate.set()
        await asyncio.Event().wait()
        return "never"

    provider = FakeProvider([tool_response(("t1", "hang", {}), cost=Decimal("0.25"))])
    session = NeuronTurn(provider, tools=[hang]).start(TurnInput.new("x", session=SessionId("s")))
    task = asyncio.create_task(session.run())
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    out = session.cancelled_output()
    assert result_parts(session.state.messages) == [
        ToolResultPart(tool_use_id="t1", content="not run: the turn was cancelled", is_error=True)
    ]
    assert out.exit_reason == ExitReason.custom("cancelled")
    assert out.metadata.turns_used == 1 and out.metadata.cost == Decimal("0.25")
    assert not any(isinstance(e, WriteMemory) for e in out.effects)


async def test_cancelled_output_before_anything_ran() -> None:
    out = make_turn(FakeProvider()).start(TurnInput.new("x")).cancelled_output()
    assert out.exit_reason == ExitReason.custom("cancelled")
    assert out.metadata.turns_used == 0 and out.metadata.cost == Decimal(0)


async def test_limits_carry_across_resume() -> None:
    config = TurnConfig(max_turns=3)
    calls = [tool_response((f"t{i}", "add", {"a": i, "b": 0})) for i in range(6)]
    first = make_turn(FakeProvider(calls)).start(TurnInput.new("x", config=config))
    await first.step()
    await first.step()
    resumed = make_turn(FakeProvider(calls[2:])).resume(first.state.model_dump_json())
    out = await resumed.run()
    assert out is not None and out.exit_reason == ExitReason.max_turns() and out.metadata.turns_used == 3


async def test_resume_keeps_history_write_semantics() -> None:
    session = make_turn(FakeProvider(script())).start(INPUT)
    await session.step()
    out = await make_turn(FakeProvider(script()[1:])).resume(session.state).run()
    assert out is not None
    history = next(e for e in out.effects if isinstance(e, WriteMemory) and e.key == "history")
    # user, 2x (assistant tool call, results), paused assistant, its continuation, results, final
    assert isinstance(history.value, list) and len(history.value) == 9
    assert history.value[0] == {"role": "user", "content": [{"type": "text", "text": "add things"}]}
