"""A secret the model writes is redacted from its text deltas even when split across two."""

from __future__ import annotations

from decimal import Decimal

from airlock.sandbox._redact import redacting_sink
from airlock.turn import InferenceFinished, TextDelta

SECRET = "sk-live-0123456789"


async def test_a_secret_split_across_deltas_is_redacted_and_no_text_is_lost() -> None:
    got: list[object] = []

    async def sink(event: object) -> None:
        got.append(event)

    redacted = redacting_sink(sink, (SECRET,))
    for piece in ("the key is sk-li", "ve-01234", "56789 and ", "that is all"):
        await redacted(TextDelta(iteration=1, text=piece))
    finished = InferenceFinished(
        iteration=1,
        stop_reason="end_turn",
        tokens_in=1,
        tokens_out=1,
        cost=None,
        total_tokens_in=1,
        total_tokens_out=1,
        total_cost=Decimal(0),
        duration_ms=1,
    )
    await redacted(finished)
    text = "".join(e.text for e in got if isinstance(e, TextDelta))
    assert text == "the key is [REDACTED] and that is all"
    assert not any("sk-li" in e.text for e in got if isinstance(e, TextDelta))  # no piece of it either
    assert got[-1] == finished and all(isinstance(e, TextDelta) for e in got[:-1])
