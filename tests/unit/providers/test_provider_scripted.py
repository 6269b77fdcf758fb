"""ScriptedProvider (play, fail loudly) and RecordingProvider (record a real SDK session, replay it)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.errors import SpecError
from airlock.providers import (
    AnthropicProvider,
    RecordingProvider,
    Script,
    ScriptedProvider,
    create_provider,
    load_script,
)
from airlock.spec import ProviderSpec
from airlock.testing._anthropic_server import FakeAnthropicServer, text_block, tool_use_block
from airlock.turn import StopReason, TextPart, TokenUsage, ToolUsePart
from layer0 import TurnError

from .provider_helpers import CALC, ECHO, request, tool_round_trip, user

YAML_SCRIPT = """\
version: 1
steps:
  - match: {tools: [echo, calc], messages: 1}
    response:
      content:
        - {type: text, text: "Let me compute."}
        - {type: tool_use, id: t1, name: calc, input: {expr: "2+2"}}
      stop_reason: tool_use
      usage: {input_tokens: 12, output_tokens: 7}
      cost: "0.000047"
      model: claude-haiku-4-5-20251001
  - match: {messages: 3}
    response:
      content: [{type: text, text: "4"}]
      stop_reason: end_turn
"""


def test_format_rejects_unknown_keys_and_bad_values(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="matches"):
        load_script([{"matches": {}, "response": {"content": [], "stop_reason": "end_turn"}}])
    with pytest.raises(SpecError, match="stop_reason"):
        load_script([{"response": {"content": [], "stop_reason": "finished"}}])
    with pytest.raises(SpecError, match="version"):
        load_script({"version": 2, "steps": []})
    with pytest.raises(SpecError, match="cannot read script"):
        load_script(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_script(bad)


async def test_plays_a_yaml_file_in_order(tmp_path: Path) -> None:
    path = tmp_path / "calc.yaml"
    path.write_text(YAML_SCRIPT)
    provider = create_provider(ProviderSpec(kind="scripted", script=str(path)))
    assert isinstance(provider, ScriptedProvider)

    first = await provider.complete(request(user("what is 2+2?"), tools=[CALC, ECHO]))
    assert first.stop_reason is StopReason.TOOL_USE
    assert first.content == [
        TextPart(text="Let me compute."),
        ToolUsePart(id="t1", name="calc", input={"expr": "2+2"}),
    ]
    assert first.usage == TokenUsage(input_tokens=12, output_tokens=7)
    assert first.cost == Decimal("0.000047")
    assert first.model == "claude-haiku-4-5-20251001"

    second = await provider.complete(request(*tool_round_trip(), tools=[CALC]))  # tools not matched in step 2
    assert (second.text(), second.stop_reason, second.cost, second.model) == (
        "4",
        StopReason.END_TURN,
        None,
        "scripted",
    )
    assert provider.exhausted and provider.steps_played == 2


async def test_inline_list_and_mapping() -> None:
    step = {"response": {"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}}
    for script in ([step], {"steps": [step]}, json.dumps([step])):
        provider = create_provider(ProviderSpec(kind="scripted", script=script))
        assert (await provider.complete(request(model="my-model"))).model == "my-model"


async def test_truncated_follows_a_max_tokens_stop_unless_the_step_says() -> None:
    def step(stop: str, **extra: object) -> dict[str, object]:
        return {"response": {"content": [{"type": "text", "text": "cut"}], "stop_reason": stop, **extra}}

    provider = ScriptedProvider([step("max_tokens"), step("end_turn"), step("end_turn", truncated=True)])
    assert [(await provider.complete(request())).truncated for _ in range(3)] == [True, False, True]


async def test_mismatch_fails_loudly() -> None:
    provider = ScriptedProvider(
        [
            {
                "match": {"tools": ["calc"], "messages": 1},
                "response": {"content": [], "stop_reason": "end_turn"},
            }
        ]
    )
    with pytest.raises(TurnError) as info:
        await provider.complete(request(user("a"), user("b"), tools=[ECHO]))
    assert info.value.kind == "non_retryable"
    assert str(info.value) == (
        "non-retryable: scripted provider: step 1 of 1 expects tools=[calc] messages=1, "
        "got a request with tools=[echo] messages=2"
    )
    assert provider.steps_played == 0  # a mismatch does not consume the step


async def test_exhausted_fails_loudly() -> None:
    provider = ScriptedProvider([{"response": {"content": [], "stop_reason": "end_turn"}}])
    await provider.complete(request())
    with pytest.raises(
        TurnError, match=r"script exhausted after 1 step\(s\).*tools=\[calc\] messages=1"
    ) as info:
        await provider.complete(request(tools=[CALC]))
    assert info.value.kind == "non_retryable"


def test_scripted_spec_without_script_or_with_bad_json() -> None:
    with pytest.raises(SpecError, match="needs a script"):
        create_provider(ProviderSpec(kind="scripted"))
    with pytest.raises(SpecError, match="not valid JSON"):
        create_provider(ProviderSpec(kind="scripted", script="[{"))


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
async def test_record_a_real_sdk_session_and_replay_it(tmp_path: Path, suffix: str) -> None:
    async with FakeAnthropicServer() as server:
        server.reply(
            [text_block("Computing."), tool_use_block("toolu_1", "calc", {"expr": "2+2"})],
            stop_reason="tool_use",
            usage={"input_tokens": 40, "output_tokens": 12, "cache_read_input_tokens": 100},
        )
        server.reply("2+2 is 4.", usage={"input_tokens": 60, "output_tokens": 6})
        live = AnthropicProvider(ProviderSpec(kind="anthropic", base_url=server.base_url, max_retries=0))
        recorder = RecordingProvider(live, tmp_path / f"session{suffix}")
        requests = [
            request(user("what is 2+2?"), tools=[CALC, ECHO]),
            request(*tool_round_trip(), tools=[CALC, ECHO]),
        ]
        recorded = [await recorder.complete(r) for r in requests]
        path = recorder.save()
        await live.aclose()

    if suffix == ".json":
        assert json.loads(path.read_text())["steps"][0]["match"] == {"tools": ["calc", "echo"], "messages": 1}
    replay = create_provider(ProviderSpec(kind="scripted", script=str(path)))
    replayed = [await replay.complete(r) for r in requests]
    assert replayed == recorded
    assert recorded[0].cost == Decimal("0.00011")  # 40x1 + 100x0.1 + 12x5 per MTok, kept exact
    # a different conversation shape does not replay
    again = ScriptedProvider(path)
    with pytest.raises(TurnError, match="expects tools=\\[calc, echo\\] messages=1"):
        await again.complete(request(user("x"), user("y"), tools=[CALC, ECHO]))


async def test_recording_passes_errors_through_unrecorded(tmp_path: Path) -> None:
    async with FakeAnthropicServer() as server:
        server.fail(429, "slow down")
        live = AnthropicProvider(ProviderSpec(kind="anthropic", base_url=server.base_url, max_retries=0))
        recorder = RecordingProvider(live)
        with pytest.raises(TurnError):
            await recorder.complete(request())
        await live.aclose()
    assert recorder.script == Script(steps=[])
    with pytest.raises(SpecError, match="needs a path"):
        recorder.save()
