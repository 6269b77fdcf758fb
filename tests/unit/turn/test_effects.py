"""Effect tools: offered with schemas when enabled, intercepted into Effects, never run."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from airlock.errors import SpecError
from airlock.spec import EFFECT_TOOLS
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import NeuronTurn, ToolResultPart, tool
from layer0 import (
    AgentId,
    Delegate,
    DeleteMemory,
    Effect,
    Log,
    Scope,
    SessionId,
    Signal,
    SignalPayload,
    TriggerType,
    TurnInput,
    WorkflowId,
    WriteMemory,
)

from .turn_helpers import Recorder, result_parts


@pytest.mark.parametrize(
    ("name", "input", "effect", "backfill"),
    [
        (
            "write_memory",
            {"key": "color", "value": {"fav": "blue"}},
            WriteMemory(scope=Scope.session("s"), key="color", value={"fav": "blue"}),
            "Memory written.",
        ),
        (
            "write_memory",
            {"key": "k", "value": 1, "scope": "global"},
            WriteMemory(scope=Scope.global_(), key="k", value=1),
            "Memory written.",
        ),
        (
            "delete_memory",
            {"key": "color"},
            DeleteMemory(scope=Scope.session("s"), key="color"),
            "Memory deleted.",
        ),
        (
            "delegate",
            {"agent": "researcher", "message": "find X"},
            Delegate(agent=AgentId("researcher"), input=TurnInput.new("find X", trigger=TriggerType.task())),
            "Delegation requested.",
        ),
        (
            "signal",
            {"target": "wf-1", "signal_type": "done", "data": [1]},
            Signal(target=WorkflowId("wf-1"), payload=SignalPayload(signal_type="done", data=[1])),
            "Signal sent.",
        ),
    ],
)
async def test_effect_tool_becomes_an_effect(
    name: str, input: JsonValue, effect: Effect, backfill: str
) -> None:
    provider = FakeProvider([tool_response(("t1", name, input)), text_response("ok")])
    turn = NeuronTurn(provider, effect_tools=list(EFFECT_TOOLS))
    out = await turn.execute(TurnInput.new("x", session=SessionId("s")))
    assert out.effects[0] == effect
    assert isinstance(out.effects[-1], WriteMemory) and out.effects[-1].key == "history"
    assert result_parts(provider.requests[1].messages) == [ToolResultPart(tool_use_id="t1", content=backfill)]
    assert [(r.name, r.success) for r in out.metadata.tools_called] == [(name, True)]


async def test_effect_tools_are_offered_only_when_enabled() -> None:
    provider = FakeProvider([text_response("ok"), text_response("ok")])
    await NeuronTurn(provider).execute(TurnInput.new("x"))
    await NeuronTurn(provider, effect_tools=["write_memory", "signal"]).execute(TurnInput.new("x"))
    assert provider.requests[0].tools == []
    offered = {t.name: t.input_schema for t in provider.requests[1].tools}
    assert sorted(offered) == ["signal", "write_memory"]
    assert offered["write_memory"]["required"] == ["key", "value"]


async def test_disabled_effect_tool_is_unknown() -> None:
    provider = FakeProvider(
        [tool_response(("t1", "write_memory", {"key": "k", "value": 1})), text_response("ok")]
    )
    out = await NeuronTurn(provider).execute(TurnInput.new("x"))
    assert [e for e in out.effects if not isinstance(e, Log)] == []
    assert "unknown tool 'write_memory'" in result_parts(provider.requests[1].messages)[0].content


@pytest.mark.parametrize(
    ("input", "problem"),
    [
        ({"value": 1}, "'key' is a required property"),
        ({"key": "k", "value": 1, "extra": True}, "Additional properties"),
        ({"key": "k", "value": 1, "scope": "session"}, "needs a session"),
    ],
)
async def test_bad_effect_input_is_an_error_result_and_no_effect(input: JsonValue, problem: str) -> None:
    provider = FakeProvider([tool_response(("t1", "write_memory", input)), text_response("ok")])
    out = await NeuronTurn(provider, effect_tools=["write_memory"]).execute(TurnInput.new("x"))
    result = result_parts(provider.requests[1].messages)[0]
    assert result.is_error and problem in result.content
    # no effect, but the refusal is logged
    (logged,) = out.effects
    assert isinstance(logged, Log) and logged.message.startswith("tool write_memory failed:")


async def test_effects_keep_call_order_and_mix_with_regular_tools() -> None:
    @tool
    async def noop() -> str:
        """No-op."""
        return "done"

    provider = FakeProvider(
        [
            tool_response(
                ("t1", "write_memory", {"key": "a", "value": 1}),
                ("t2", "noop", {}),
                ("t3", "write_memory", {"key": "b", "value": 2}),
            ),
            text_response("ok"),
        ]
    )
    out = await NeuronTurn(provider, tools=[noop], effect_tools=["write_memory"]).execute(TurnInput.new("x"))
    assert [e.key for e in out.effects if isinstance(e, WriteMemory)] == ["a", "b"]
    assert [p.content for p in result_parts(provider.requests[1].messages)] == [
        "Memory written.",
        "done",
        "Memory written.",
    ]


def test_unknown_or_clashing_effect_tools_are_refused() -> None:
    with pytest.raises(SpecError, match="unknown effect tool"):
        NeuronTurn(FakeProvider(), effect_tools=["teleport"])

    @tool
    async def signal() -> str:
        """Clash."""
        return ""

    with pytest.raises(SpecError, match="reserved"):
        NeuronTurn(FakeProvider(), tools=[signal])


async def test_effect_tool_calls_are_reported_as_tool_events() -> None:
    rec = Recorder()
    call = tool_response(("t1", "signal", {"target": "w", "signal_type": "x"}))
    provider = FakeProvider([call, text_response("ok")])
    await NeuronTurn(provider, effect_tools=["signal"], events=rec).execute(TurnInput.new("x"))
    finished = [e for e in rec.events if e.type == "tool_finished"]
    assert [(e.name, e.output, e.success) for e in finished] == [("signal", "Signal sent.", True)]  # type: ignore[union-attr]
