"""Over the runner's gRPC stream, a slowly generating model's text arrives as text deltas
before the call's inference_finished (real SDK, a local server streaming server-sent events)."""

from __future__ import annotations

from airlock.runner import RemoteTurn
from airlock.spec import AgentSpec, ProviderSpec
from airlock.testing._anthropic_server import FakeAnthropicServer
from airlock.turn import InferenceFinished, TextDelta, TurnEvent
from layer0 import TurnInput

TEXT = "Four, after some thought: two plus two makes four."


async def test_deltas_cross_the_runner_before_the_inference_finished(address: str, token: str) -> None:
    events: list[TurnEvent] = []

    async def sink(event: TurnEvent) -> None:
        events.append(event)

    async with FakeAnthropicServer() as model:
        model.reply_stream(TEXT, delay_s=0.06, piece_chars=6)  # slower than the coalescing interval
        spec = AgentSpec(
            name="a", provider=ProviderSpec(kind="anthropic", base_url=model.base_url, max_retries=0)
        )
        async with RemoteTurn(address, token, spec) as turn:
            output = await turn.execute(TurnInput.new("2+2?"), events=sink)
    assert output.message.as_text() == TEXT
    deltas = [i for i, e in enumerate(events) if isinstance(e, TextDelta)]
    finished = next(i for i, e in enumerate(events) if isinstance(e, InferenceFinished))
    assert len(deltas) > 1 and max(deltas) < finished
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == TEXT
