"""Tool names the APIs refuse (an MCP server's ``server.tool``) cross the wire as stand-ins
and come back as airlock names them; the fake servers refuse what the real APIs refuse."""

from __future__ import annotations

from airlock.providers import AnthropicProvider, OpenAICompatProvider
from airlock.providers._tool_names import wire_tool_name
from airlock.testing._anthropic_server import FakeAnthropicServer, tool_use_block
from airlock.testing._openai_server import FakeOpenAIServer, tool_call
from airlock.turn import ProviderMessage, Role, StopReason, ToolResultPart, ToolSchema, ToolUsePart

from .provider_helpers import request, user

NOTES = ToolSchema(name="notes.search", description="Search notes.", input_schema={"type": "object"})
PLAIN = ToolSchema(name="calc", description="Calculate.", input_schema={"type": "object"})


def test_a_name_the_apis_accept_is_unchanged_and_others_get_a_stable_stand_in() -> None:
    assert wire_tool_name("calc") == "calc"
    stand_in = wire_tool_name("notes.search")
    assert stand_in.startswith("notes_search_") and len(stand_in) == len("notes_search_") + 8
    assert wire_tool_name("notes.search") == stand_in != wire_tool_name("notes_search")
    long = wire_tool_name("s." + "x" * 200)
    assert len(long) <= 64 and long == wire_tool_name("s." + "x" * 200)


async def test_anthropic_sends_stand_ins_and_names_the_calls_back(
    anthropic: AnthropicProvider, anthropic_server: FakeAnthropicServer
) -> None:
    wire = wire_tool_name("notes.search")
    anthropic_server.reply([tool_use_block("t1", wire, {"q": "x"})], stop_reason="tool_use")
    first = await anthropic.complete(request(user("find x"), tools=[NOTES, PLAIN]))
    assert first.stop_reason is StopReason.TOOL_USE
    assert first.tool_uses() == [ToolUsePart(id="t1", name="notes.search", input={"q": "x"})]
    anthropic_server.reply("found")
    history = [
        user("find x"),
        ProviderMessage(role=Role.ASSISTANT, content=list(first.content)),
        ProviderMessage(role=Role.USER, content=[ToolResultPart(tool_use_id="t1", content="x: 1")]),
    ]
    assert (await anthropic.complete(request(*history, tools=[NOTES, PLAIN]))).text() == "found"
    bodies = anthropic_server.message_bodies()
    assert [t["name"] for t in bodies[0]["tools"]] == [wire, "calc"]
    assert bodies[1]["messages"][1]["content"][0]["name"] == wire


async def test_openai_compat_sends_stand_ins_and_names_the_calls_back(
    openai_compat: OpenAICompatProvider, openai_server: FakeOpenAIServer
) -> None:
    wire = wire_tool_name("notes.search")
    openai_server.reply("", tool_calls=[tool_call("c1", wire, {"q": "x"})], finish_reason="tool_calls")
    first = await openai_compat.complete(request(user("find x"), tools=[NOTES]))
    assert first.tool_uses() == [ToolUsePart(id="c1", name="notes.search", input={"q": "x"})]
    [body] = openai_server.chat_bodies()
    assert body["tools"][0]["function"]["name"] == wire


def test_the_fake_servers_refuse_a_dotted_tool_name_as_the_apis_do() -> None:
    from airlock.testing._anthropic_server import validate_messages_request
    from airlock.testing._openai_server import validate_chat_request

    messages = [{"role": "user", "content": "hi"}]
    anthropic = {"model": "m", "max_tokens": 1, "messages": messages, "tools": [{"name": "a.b"}]}
    assert "tools.0.custom.name" in (validate_messages_request(anthropic) or "")
    chat = {"model": "m", "messages": messages, "tools": [{"type": "function", "function": {"name": "a.b"}}]}
    assert "tools[0].function.name" in (validate_chat_request(chat) or "")
