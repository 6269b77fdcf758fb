"""The loop streams a model call's text as coalesced TextDelta events before the call's
InferenceFinished (real SDK, a local server sending server-sent events slowly)."""

from __future__ import annotations

import pytest

from airlock.providers import create_provider
from airlock.spec import ProviderSpec
from airlock.testing._anthropic_server import FakeAnthropicServer
from airlock.turn import NeuronTurn, TextDelta
from airlock.turn._streaming import DeltaCoalescer, StreamSettings
from layer0 import Content, TurnInput

from .turn_helpers import Recorder

TEXT = "The answer, computed slowly and carefully, is four."


async def _run(server: FakeAnthropicServer, rec: Recorder) -> Content:
    provider = create_provider(ProviderSpec(kind="anthropic", base_url=server.base_url, max_retries=0))
    try:
        out = await NeuronTurn(provider, events=rec).execute(TurnInput.new("2+2?"))
    finally:
        await provider.aclose()  # type: ignore[attr-defined]
    return out.message


async def test_deltas_arrive_before_the_inference_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_STREAM_INTERVAL_MS", "0")
    rec = Recorder()
    async with FakeAnthropicServer() as server:
        server.reply_stream(TEXT, delay_s=0.005, piece_chars=5)
        assert await _run(server, rec) == Content.text(TEXT)
    types = rec.types()
    first_delta, finished = types.index("text_delta"), types.index("inference_finished")
    assert types.index("inference_started") < first_delta < finished
    assert types[first_delta:finished] == ["text_delta"] * (finished - first_delta)
    deltas = [e for e in rec.events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and "".join(d.text for d in deltas) == TEXT
    assert {d.iteration for d in deltas} == {1}


async def test_streaming_off_makes_plain_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_STREAM_DELTAS", "0")
    rec = Recorder()
    async with FakeAnthropicServer() as server:
        server.reply(TEXT)
        assert await _run(server, rec) == Content.text(TEXT)
        (body,) = server.message_bodies()
    assert "text_delta" not in rec.types() and "stream" not in body


async def test_the_coalescer_bounds_the_rate_and_keeps_every_character() -> None:
    now = [0.0]
    sent: list[TextDelta] = []

    async def emit(event: object) -> None:
        assert isinstance(event, TextDelta)
        sent.append(event)

    coalescer = DeltaCoalescer(3, emit, StreamSettings(interval_s=0.05, max_chars=10), clock=lambda: now[0])
    for i in range(40):  # a fast model: 40 pieces within 20 ms
        now[0] = i * 0.0005
        await coalescer.add("ab")
    await coalescer.flush()
    # the first piece at once, then one event per 10 characters (the size bound), the rest at the end
    assert len(sent) <= 1 + 80 // 10 + 1
    assert "".join(d.text for d in sent) == "ab" * 40
    assert all(len(d.text) <= 10 for d in sent) and {d.iteration for d in sent} == {3}
    sent.clear()
    now[0] = 1.0
    await coalescer.add("x")  # after the interval: at once
    assert [d.text for d in sent] == ["x"]
    now[0] = 1.01
    await coalescer.add("y")  # within it: held
    assert [d.text for d in sent] == ["x"]
    await coalescer.flush()
    assert [d.text for d in sent] == ["x", "y"]
