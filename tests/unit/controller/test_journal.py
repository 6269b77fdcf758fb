"""The journal of a turn: records from checkpoints, and what a lying sandbox cannot slip past."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from airlock.controller._journal import JobJournal, JournalViolation
from airlock.controller._weaving import Weaves
from airlock.spec import AgentSpec, ApprovalGate
from airlock.state import InMemoryStore
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import Checkpoint, NeuronTurn, TurnEvent, tool
from airlock.weave import RecordType
from layer0 import TurnInput

INPUT = TurnInput.new("go")


@tool
async def bash(command: str) -> str:
    """Pretend to run a command."""
    return f"ran {command}"


@tool(name="remote.search")
async def remote_search(query: str) -> str:
    """Pretend to be an http MCP server's tool (a sandbox that lies declares no risk)."""
    return f"found {query}"


@tool(name="notes.add")
async def notes_add(query: str) -> str:
    """Pretend to be a stdio MCP server's tool."""
    return "added"


async def checkpoints(called: Any = bash, **turn: Any) -> list[Checkpoint]:
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    args = {"command": "ls"} if called is bash else {"query": "x"}
    provider = FakeProvider(
        [
            tool_response(("c1", called.name, args), text="looking", cost=Decimal("0.01")),
            text_response("done", cost=Decimal("0.02")),
        ]
    )
    await NeuronTurn(provider, tools=[called], events=sink, **turn).start(INPUT).run()
    return [e for e in events if isinstance(e, Checkpoint)]


def journal(**kwargs: Any) -> JobJournal:
    return JobJournal(Weaves(InMemoryStore()), "root", job="root", agent="a", input=INPUT, **kwargs)


async def test_records_follow_the_checkpoints() -> None:
    j = journal()
    for event in await checkpoints():
        assert await j.observe(event)
    records = await j.weaves.thread("root", "root")
    kinds = [(r.type, r.kind) for r in records]
    assert kinds == [
        (RecordType.THOUGHT, "model_response"),
        (RecordType.ACTION, "tool_call"),
        (RecordType.SPEECH, "model_response"),
    ]
    response, call, answer = records
    assert call.depends_on == (response.id,) and answer.depends_on == (call.id,)
    assert response.cost == Decimal("0.01") and answer.cost == Decimal("0.02")
    assert call.content["output"] == "ran ls"  # type: ignore[index, call-overload]
    assert all(r.state_hash_pre != r.state_hash_post for r in records)


def lie(event: Checkpoint, **changes: Any) -> Checkpoint:
    return event.model_copy(update={"state": {**event.state, **changes}})


async def test_a_checkpoint_that_changes_the_input_fails() -> None:
    first, *_ = await checkpoints()
    with pytest.raises(JournalViolation, match="changed the turn's input"):
        await journal().observe(lie(first, input=TurnInput.new("other").model_dump(mode="json")))


async def test_a_checkpoint_that_lowers_the_cost_fails() -> None:
    events = await checkpoints()
    j = journal()
    for event in events[:3]:
        await j.observe(event)
    with pytest.raises(JournalViolation, match="lowered the cost"):
        await j.observe(lie(events[3], cost="0"))


async def test_more_model_calls_than_the_turn_allows_fails() -> None:
    first, *_ = await checkpoints()
    with pytest.raises(JournalViolation, match="reports 99 model calls; the turn allows 6"):
        await journal(max_turns=6).observe(lie(first, iterations=99))


async def test_a_limit_raised_without_a_budget_signal_fails() -> None:
    first, *_ = await checkpoints()
    with pytest.raises(JournalViolation, match="changed max_turns without a budget signal"):
        await journal().observe(lie(first, overrides={"max_turns": 1000}))
    allowed = journal()
    allowed.allow_overrides({"max_turns": 1000})
    assert await allowed.observe(lie(first, overrides={"max_turns": 1000}))


async def test_a_gated_call_that_ran_without_approval_fails() -> None:
    events = await checkpoints()  # the runner here was not gated: it ran bash
    gate = ApprovalGate(tools=["bash"])
    j = journal(gate=gate)
    with pytest.raises(JournalViolation, match="ran bash \\(call c1\\) without the approval"):
        for event in events:
            await j.observe(event)
    approved = journal(gate=gate, approved=["c1"])
    for event in events:
        await approved.observe(event)


async def test_the_gate_is_rechecked_with_the_risks_the_spec_assures_not_those_the_sandbox_declares() -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "a",
            "provider": {"kind": "scripted", "script": []},
            "mcp_servers": [
                {"name": "remote", "transport": "http", "url": "http://10.0.0.1:8000/mcp"},
                {"name": "notes", "transport": "stdio", "command": ["notes"]},
            ],
        }
    )
    assert spec.assured_risks("remote.search") == ("external",)
    assert spec.assured_risks("bash") == ("destructive", "external")
    assert spec.assured_risks("notes.add") == () and spec.assured_risks("remote") == ()
    gate = ApprovalGate(risks=["external"])
    j = journal(gate=gate, risks=spec.assured_risks)
    with pytest.raises(JournalViolation, match=r"ran remote\.search \(call c1\) without the approval"):
        for event in await checkpoints(remote_search):
            await j.observe(event)
    # A stdio server's risks are its own word (inside the sandbox): only a gate naming the tool holds.
    unsure = journal(gate=gate, risks=spec.assured_risks)
    for event in await checkpoints(notes_add):
        assert await unsure.observe(event)
    named = journal(gate=ApprovalGate(tools=["notes.*"]), risks=spec.assured_risks)
    with pytest.raises(JournalViolation, match=r"ran notes\.add"):
        for event in await checkpoints(notes_add):
            await named.observe(event)


async def test_an_unreadable_checkpoint_fails() -> None:
    first, *_ = await checkpoints()
    with pytest.raises(JournalViolation, match="unreadable checkpoint"):
        await journal().observe(first.model_copy(update={"messages_from": 5}))
