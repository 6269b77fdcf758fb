"""End to end: a job whose model writes slowly (a local Messages API server streaming
server-sent events) is watched through the controller; the watcher receives the text as
deltas before the call's inference_finished, and the job's record holds none of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.jobs import SandboxActivity
from airlock.testing._anthropic_server import FakeAnthropicServer
from airlock.turn import InferenceFinished, TextDelta
from layer0 import TurnInput
from tests.support.controller import running_controller, write_config

pytestmark = pytest.mark.timeout(120)

TEXT = "Let me think about it slowly: two plus two is four."


async def test_a_watcher_gets_the_text_while_the_model_writes_it(tmp_path: Path) -> None:
    async with FakeAnthropicServer() as model:
        model.reply_stream(TEXT, delay_s=0.08, piece_chars=5)
        agent = {
            "provider": {"kind": "anthropic", "base_url": model.base_url, "max_retries": 0},
            "backend": "process",
            "defaults": {"max_turns": 2, "max_duration": "60s"},
        }
        config = write_config(tmp_path, {"writer": agent})
        async with running_controller(config, tmp_path / "data", tmp_path / "sb", "unused") as (
            controller,
            client,
        ):
            assert controller.service is not None
            job = await controller.service.submit("writer", TurnInput.new("2+2?"))
            seen = [e async for e in client.watch(job.id)]
            stored = await controller.service.events.store.events(job.id)
    turn = [e.data.event for e in seen if isinstance(e.data, SandboxActivity)]
    kinds = [type(e).__name__ for e in turn]
    assert "TextDelta" in kinds, kinds
    assert kinds.index("TextDelta") < kinds.index("InferenceFinished")
    assert max(i for i, k in enumerate(kinds) if k == "TextDelta") < kinds.index("InferenceFinished")
    assert "".join(e.text for e in turn if isinstance(e, TextDelta)) == TEXT
    assert any(isinstance(e, InferenceFinished) for e in turn)
    assert any(
        isinstance(e.data, SandboxActivity) and isinstance(e.data.event, InferenceFinished) for e in stored
    )
    assert not any(
        isinstance(e.data, SandboxActivity) and isinstance(e.data.event, TextDelta) for e in stored
    )
