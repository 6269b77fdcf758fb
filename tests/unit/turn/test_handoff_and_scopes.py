"""A handoff ends the turn that declares it; memory tools name workflow, agent and custom scopes."""

from __future__ import annotations

import json

import pytest
from pydantic import JsonValue

from airlock.state import InMemoryStore
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import NeuronTurn
from layer0 import (
    AgentId,
    ExitReason,
    Handoff,
    Log,
    Scope,
    SessionId,
    TurnInput,
    WriteMemory,
    read_only,
)

from .turn_helpers import result_parts

IN_WF = {"workflow": "wf-7"}


async def test_a_handoff_ends_the_turn_and_the_model_is_not_called_again() -> None:
    provider = FakeProvider(
        [
            tool_response(
                ("t1", "handoff", {"agent": "billing", "state": {"ticket": 7}}),
                ("t2", "write_memory", {"key": "seen", "value": True}),
            ),
            text_response("and one more thing"),
        ]
    )
    turn = NeuronTurn(provider, effect_tools=["handoff", "write_memory"])
    out = await turn.execute(TurnInput.new("help", session=SessionId("s")))
    assert len(provider.requests) == 1
    assert out.exit_reason == ExitReason.custom("handoff")
    assert out.effects[0] == Handoff(agent=AgentId("billing"), state={"ticket": 7})
    assert out.effects[1] == WriteMemory(scope=Scope.session("s"), key="seen", value=True)
    assert not [e for e in out.effects if isinstance(e, Log)]  # a handoff is no warning
    assert [(r.name, r.success) for r in out.metadata.tools_called] == [
        ("handoff", True),
        ("write_memory", True),
    ]


async def test_a_second_handoff_in_one_step_is_an_error_result() -> None:
    provider = FakeProvider(
        [
            tool_response(("t1", "handoff", {"agent": "billing"}), ("t2", "handoff", {"agent": "sales"})),
            text_response("never asked"),
        ]
    )
    turn = NeuronTurn(provider, effect_tools=["handoff"])
    loop = turn.start(TurnInput.new("help"))
    out = await loop.run()
    assert out is not None and out.exit_reason == ExitReason.custom("handoff")
    assert len(provider.requests) == 1
    handoffs = [e for e in out.effects if isinstance(e, Handoff)]
    assert handoffs == [Handoff(agent=AgentId("billing"), state=None)]
    first, second = result_parts(loop.state.messages)
    assert not first.is_error and first.content == "Handoff initiated."
    assert second.is_error and "already handed the conversation over" in str(second.content)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("workflow", Scope.workflow("wf-7")),
        ("agent", Scope.agent("wf-7", "triage")),
        ("custom:team-notes", Scope.custom("team-notes")),
        ("global", Scope.global_()),
    ],
)
async def test_write_memory_names_workflow_agent_and_custom_scopes(scope: str, expected: Scope) -> None:
    call = tool_response(("t1", "write_memory", {"key": "k", "value": 1, "scope": scope}))
    provider = FakeProvider([call, text_response("ok")])
    turn = NeuronTurn(provider, effect_tools=["write_memory"], name="triage")
    out = await turn.execute(TurnInput.new("x", metadata=IN_WF))
    assert out.effects[0] == WriteMemory(scope=expected, key="k", value=1)


@pytest.mark.parametrize(
    ("scope", "problem"),
    [("workflow", "needs a workflow"), ("agent", "needs a workflow"), ("tenant", "does not match")],
)
async def test_a_scope_the_turn_cannot_name_is_an_error_result(scope: str, problem: str) -> None:
    call = tool_response(("t1", "write_memory", {"key": "k", "value": 1, "scope": scope}))
    provider = FakeProvider([call, text_response("ok")])
    out = await NeuronTurn(provider, effect_tools=["write_memory"]).execute(TurnInput.new("x"))
    assert not [e for e in out.effects if isinstance(e, WriteMemory)]
    (result,) = result_parts(provider.requests[1].messages)
    assert result.is_error and problem in str(result.content)


async def test_read_memory_reads_the_workflow_and_agent_scopes() -> None:
    store = InMemoryStore()
    await store.write(Scope.workflow("wf-7"), "plan", {"step": 2})
    await store.write(Scope.agent("wf-7", "triage"), "mine", "private")
    await store.write(Scope.custom("team-notes"), "note", "hi")
    calls: list[tuple[str, str, JsonValue]] = [
        ("t1", "read_memory", {"key": "plan", "scope": "workflow"}),
        ("t2", "read_memory", {"key": "mine", "scope": "agent"}),
        ("t3", "read_memory", {"key": "note", "scope": "custom:team-notes"}),
    ]
    provider = FakeProvider([tool_response(*calls), text_response("ok")])
    turn = NeuronTurn(provider, state=read_only(store), memory_tools=["read_memory"], name="triage")
    await turn.execute(TurnInput.new("x", metadata=IN_WF))
    contents = [p.content for p in result_parts(provider.requests[1].messages)]
    assert contents == [json.dumps({"step": 2}), json.dumps("private"), json.dumps("hi")]
