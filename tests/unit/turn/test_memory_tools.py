"""Memory the agent reads back: read_memory / search_memory answered from the turn's read-only
state, scoped like write_memory, and memory.context_keys placed before the input."""

from __future__ import annotations

import json

import pytest

from airlock.build import build_turn
from airlock.errors import SpecError
from airlock.spec import HISTORY_KEY, AgentSpec
from airlock.state import InMemoryStore
from airlock.testing._fake_provider import FakeProvider, text_response, tool_response
from airlock.turn import NeuronTurn, TextPart, tool
from layer0 import Scope, SessionId, TurnInput, WriteMemory, read_only

from .turn_helpers import result_parts


async def store_with(**scoped: dict[str, object]) -> InMemoryStore:
    """A store holding ``session={…}`` (in session s1) and ``global_={…}`` values."""
    store = InMemoryStore()
    for key, value in scoped.get("session", {}).items():
        await store.write(Scope.session("s1"), key, value)
    for key, value in scoped.get("global_", {}).items():
        await store.write(Scope.global_(), key, value)
    return store


async def test_read_memory_answers_from_the_session_scope_by_default_and_never_writes() -> None:
    store = await store_with(session={"colour": {"fav": "blue"}}, global_={"colour": "green"})
    provider = FakeProvider(
        [
            tool_response(
                ("t1", "read_memory", {"key": "colour"}),
                ("t2", "read_memory", {"key": "colour", "scope": "global"}),
            ),
            text_response("blue"),
        ]
    )
    turn = NeuronTurn(provider, state=read_only(store), memory_tools=["read_memory"])
    out = await turn.execute(TurnInput.new("what colour?", session=SessionId("s1")))
    session_value, global_value = result_parts(provider.requests[1].messages)
    assert not session_value.is_error and json.loads(session_value.content) == {"fav": "blue"}
    assert not global_value.is_error and json.loads(global_value.content) == "green"
    # the only effect is the history write: reading declares nothing
    assert [type(e) for e in out.effects] == [WriteMemory]
    assert await store.read(Scope.session("s1"), "colour") == {"fav": "blue"}


async def test_a_missing_key_is_a_clear_answer_listing_the_keys_there() -> None:
    store = await store_with(session={"a": 1, "b": 2, HISTORY_KEY: []})
    provider = FakeProvider([tool_response(("t1", "read_memory", {"key": "nope"})), text_response("ok")])
    turn = NeuronTurn(provider, state=read_only(store), memory_tools=["read_memory"])
    await turn.execute(TurnInput.new("x", session=SessionId("s1")))
    (result,) = result_parts(provider.requests[1].messages)
    assert not result.is_error
    assert result.content == "No memory under key 'nope' in session memory. Keys there: 'a', 'b'."


async def test_the_history_is_not_memory() -> None:
    store = await store_with(
        session={HISTORY_KEY: [{"role": "user", "content": []}], "note": "history mention"}
    )
    provider = FakeProvider(
        [
            tool_response(
                ("t1", "read_memory", {"key": HISTORY_KEY}),
                ("t2", "search_memory", {"query": "history"}),
            ),
            text_response("ok"),
        ]
    )
    turn = NeuronTurn(provider, state=read_only(store), memory_tools=["read_memory", "search_memory"])
    await turn.execute(TurnInput.new("x", session=SessionId("s1")))
    read, search = result_parts(provider.requests[1].messages)
    assert "is this conversation's history" in read.content
    assert [hit["key"] for hit in json.loads(search.content)] == ["note"]


async def test_search_memory_ranks_matches_and_honours_scope_and_limit() -> None:
    store = await store_with(
        global_={"pets": "a cat and a dog", "car": "a red car", "cats": "cat cat cat food", "x": "nothing"}
    )
    provider = FakeProvider(
        [
            tool_response(
                ("t1", "search_memory", {"query": "cat", "limit": 1}),
                ("t2", "search_memory", {"query": "zebra"}),
            ),
            text_response("ok"),
        ]
    )
    turn = NeuronTurn(provider, state=read_only(store), memory_tools=["search_memory"])
    await turn.execute(TurnInput.new("x"))  # no session: the global scope is the default
    top, none = result_parts(provider.requests[1].messages)
    (hit,) = json.loads(top.content)
    assert hit["key"] == "cats" and hit["score"] == 1.0 and "cat" in hit["snippet"]
    assert none.content == "Nothing in global memory matches 'zebra'." and not none.is_error


async def test_inputs_are_validated_against_the_offered_schemas() -> None:
    store = await store_with()
    provider = FakeProvider(
        [
            tool_response(
                ("t1", "read_memory", {"key": ""}),
                ("t2", "search_memory", {"query": "q", "limit": 500}),
                ("t3", "read_memory", {"key": "k", "scope": "session"}),
            ),
            text_response("ok"),
        ]
    )
    turn = NeuronTurn(provider, state=read_only(store), memory_tools=["read_memory", "search_memory"])
    await turn.execute(TurnInput.new("x"))
    offered = {t.name: t.input_schema for t in provider.requests[0].tools}
    assert offered["read_memory"]["required"] == ["key"]
    assert offered["search_memory"]["properties"]["limit"]["maximum"] == 20
    empty_key, big_limit, no_session = result_parts(provider.requests[1].messages)
    assert empty_key.is_error and "invalid input for tool 'read_memory'" in empty_key.content
    assert big_limit.is_error and "limit" in big_limit.content
    assert no_session.is_error and "needs a session" in no_session.content


async def test_memory_tools_have_no_risks_and_their_names_are_reserved() -> None:
    turn = NeuronTurn(FakeProvider(), memory_tools=["read_memory", "search_memory"])
    assert turn.tools.risks("read_memory") == () and turn.memory.risks("search_memory") == ()

    @tool
    async def read_memory(key: str) -> str:
        """A clash."""
        return key

    with pytest.raises(SpecError, match="reserved"):
        NeuronTurn(FakeProvider(), tools=[read_memory])
    with pytest.raises(SpecError, match="unknown memory tool"):
        NeuronTurn(FakeProvider(), memory_tools=["write_memory"])


async def test_context_keys_start_the_context_session_first_then_global() -> None:
    store = await store_with(
        session={"profile": {"name": "Ana"}, HISTORY_KEY: []},
        global_={"profile": {"org": "acme"}, "policy": "be brief"},
    )
    provider = FakeProvider([text_response("hi Ana")])
    turn = NeuronTurn(
        provider, state=read_only(store), memory_keys=["profile", "missing", "policy", HISTORY_KEY]
    )
    await turn.execute(TurnInput.new("hello", session=SessionId("s1")))
    first = provider.requests[0].messages[-1].content
    assert first == [
        TextPart(text='Memory profile (session): {"name": "Ana"}'),
        TextPart(text='Memory profile (global): {"org": "acme"}'),
        TextPart(text='Memory policy (global): "be brief"'),
        TextPart(text="hello"),
    ]


async def test_build_turn_wires_the_spec_memory() -> None:
    store = await store_with(session={"k": 7})
    spec = AgentSpec.model_validate(
        {
            "name": "m",
            "provider": {
                "kind": "scripted",
                "script": [{"response": {"content": [], "stop_reason": "end_turn"}}],
            },
            "tools": ["read_memory", "search_memory", "calculator"],
            "memory": {"context_keys": ["k"]},
        }
    )
    turn = build_turn(spec, state=read_only(store))
    assert turn.memory.names() == ["read_memory", "search_memory"] and turn.memory_keys == ("k",)
    assert sorted(turn.resolve_config(TurnInput.new("x")).offered) == [
        "calculator",
        "read_memory",
        "search_memory",
    ]


def test_an_agent_reads_memory_only_through_its_tools_or_context_keys() -> None:
    def spec(**fields: object) -> AgentSpec:
        provider = {"kind": "scripted", "script": []}
        return AgentSpec.model_validate({"name": "a", "provider": provider, **fields})

    assert not spec(tools=["calculator", "write_memory"]).reads_memory
    assert spec(tools=["search_memory"]).reads_memory
    assert spec(memory={"context_keys": ["profile"]}).reads_memory
