"""The ``layer0.Orchestrator`` conformance suite: every orchestrator runs these tests unchanged.

A module that runs it imports them (``from tests.support.orchestrator_suite import *``) and
defines the fixture ``orch``: an orchestrator on which two agents exist, :data:`ECHO` (whose
turn answers :data:`ANSWER` to anything) and :data:`BROKEN` (whose turn fails with a
TurnError), and no agent named :data:`MISSING`. LocalOrchestrator runs it in
tests/unit/testing; RemoteOrchestrator, over a controller the test starts (process backend,
scripted provider), in tests/unit/controller.

What every orchestrator must do: ``dispatch`` returns the turn's output or raises
``OrchError`` of the right kind; ``dispatch_many`` keeps input order and keeps failures in
their places; ``signal`` is accepted and ``query`` answers ``signal_count`` (by type with
``params={"signal_type": …}``), ``signals`` (oldest first, with their type and data) and
``status`` (a JSON object naming the workflow and counting its signals, by type too); an
unknown workflow is ``workflow_not_found``, an unknown query type ``other``.
"""

from __future__ import annotations

from typing import Any

import pytest

from layer0 import (
    AgentId,
    OrchError,
    Orchestrator,
    QueryPayload,
    SignalPayload,
    TurnInput,
    TurnOutput,
    WorkflowId,
)

ECHO = AgentId("echo")
BROKEN = AgentId("broken")
MISSING = AgentId("nobody-by-this-name")
#: What ECHO's turn answers.
ANSWER = "pong"

__all__ = [
    "test_a_dispatch_returns_the_turns_output",
    "test_a_failed_turn_is_a_turn_error",
    "test_a_signal_is_counted_and_listed_in_order",
    "test_an_empty_batch_is_an_empty_list",
    "test_an_unknown_agent_is_agent_not_found",
    "test_an_unknown_query_type_is_other",
    "test_an_unknown_workflow_is_workflow_not_found",
    "test_dispatch_many_keeps_order_and_failures_in_place",
    "test_is_an_orchestrator",
    "test_status_names_the_workflow_and_counts_its_signals",
]


def _query(query_type: str, params: Any = None) -> QueryPayload:
    return QueryPayload(query_type=query_type, params=params)


def _text(output: TurnOutput | OrchError) -> str | None:
    assert isinstance(output, TurnOutput), output
    return output.message.as_text()


async def test_is_an_orchestrator(orch: Orchestrator) -> None:
    assert isinstance(orch, Orchestrator)


async def test_a_dispatch_returns_the_turns_output(orch: Orchestrator) -> None:
    output = await orch.dispatch(ECHO, TurnInput.new("ping"))
    assert _text(output) == ANSWER


async def test_an_unknown_agent_is_agent_not_found(orch: Orchestrator) -> None:
    with pytest.raises(OrchError) as caught:
        await orch.dispatch(MISSING, TurnInput.new("anyone?"))
    assert caught.value.kind == "agent_not_found"
    assert str(MISSING) in str(caught.value)


async def test_a_failed_turn_is_a_turn_error(orch: Orchestrator) -> None:
    with pytest.raises(OrchError) as caught:
        await orch.dispatch(BROKEN, TurnInput.new("fail"))
    assert caught.value.kind == "turn_error", repr(caught.value)


async def test_dispatch_many_keeps_order_and_failures_in_place(orch: Orchestrator) -> None:
    tasks = [
        (ECHO, TurnInput.new("one")),
        (MISSING, TurnInput.new("two")),
        (BROKEN, TurnInput.new("three")),
        (ECHO, TurnInput.new("four")),
    ]
    results = await orch.dispatch_many(tasks)
    assert len(results) == 4
    assert _text(results[0]) == ANSWER and _text(results[3]) == ANSWER
    assert isinstance(results[1], OrchError) and results[1].kind == "agent_not_found"
    assert isinstance(results[2], OrchError) and results[2].kind == "turn_error"


async def test_an_empty_batch_is_an_empty_list(orch: Orchestrator) -> None:
    assert await orch.dispatch_many([]) == []


async def test_a_signal_is_counted_and_listed_in_order(orch: Orchestrator) -> None:
    target = WorkflowId("conformance-signals")
    await orch.signal(target, SignalPayload(signal_type="feedback", data={"n": 1}))
    await orch.signal(target, SignalPayload(signal_type="note", data="plain text"))
    await orch.signal(target, SignalPayload(signal_type="feedback", data={"n": 2}))
    assert await orch.query(target, _query("signal_count")) == 3
    assert await orch.query(target, _query("signal_count", {"signal_type": "feedback"})) == 2
    assert await orch.query(target, _query("signal_count", {"signal_type": "never"})) == 0
    signals = await orch.query(target, _query("signals"))
    assert [(s["signal_type"], s["data"]) for s in signals] == [
        ("feedback", {"n": 1}),
        ("note", "plain text"),
        ("feedback", {"n": 2}),
    ]


async def test_status_names_the_workflow_and_counts_its_signals(orch: Orchestrator) -> None:
    target = WorkflowId("conformance-status")
    await orch.signal(target, SignalPayload(signal_type="go", data=None))
    await orch.signal(target, SignalPayload(signal_type="stop", data=None))
    await orch.signal(target, SignalPayload(signal_type="go", data=None))
    status = await orch.query(target, _query("status"))
    assert status["workflow"] == str(target)
    assert status["signal_count"] == 3
    assert status["signals_by_type"] == {"go": 2, "stop": 1}


async def test_an_unknown_workflow_is_workflow_not_found(orch: Orchestrator) -> None:
    with pytest.raises(OrchError) as caught:
        await orch.query(WorkflowId("conformance-never-used"), _query("status"))
    assert caught.value.kind == "workflow_not_found"


async def test_an_unknown_query_type_is_other(orch: Orchestrator) -> None:
    target = WorkflowId("conformance-query-type")
    await orch.signal(target, SignalPayload(signal_type="go", data=None))
    with pytest.raises(OrchError) as caught:
        await orch.query(target, _query("no-such-query"))
    assert caught.value.kind == "other"
    assert "no-such-query" in str(caught.value)
