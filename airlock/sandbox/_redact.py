"""Keeping secret values out of what a sandbox returns: its output and its events.

env_var and file credentials are readable inside the sandbox by design; whatever the agent
prints of them is still kept out of what the backend returns (raw or JSON-escaped).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from airlock.policy import redact
from airlock.turn import TextDelta
from layer0 import TurnOutput

from ._events import SandboxEventSink

__all__ = ["redacted_output", "redacting_sink"]


def _secret_forms(secrets: tuple[str, ...]) -> list[str]:
    """Each secret as is and as it appears inside a JSON string."""
    return [*secrets, *(json.dumps(v)[1:-1] for v in secrets)]


def redacted_output(output: TurnOutput, secrets: tuple[str, ...]) -> TurnOutput:
    """``output`` with every secret value (raw or JSON-escaped) replaced by ``[REDACTED]``.

    env_var and file credentials are readable inside the sandbox by design; whatever the
    agent prints of them is still kept out of what the environment returns."""
    text = output.model_dump_json(by_alias=True)
    cleaned = redact(text, _secret_forms(secrets))
    return output if cleaned == text else TurnOutput.model_validate_json(cleaned)


def redacting_sink(sink: SandboxEventSink, secrets: tuple[str, ...]) -> SandboxEventSink:
    """``sink`` receiving events with every secret value replaced by ``[REDACTED]``.

    A model's text deltas are redacted as one text: the end of each (as long as a secret but
    one character) is held back until the next delta or event, so a secret split across two
    deltas is caught too."""
    forms = _secret_forms(secrets)
    hold = max((len(f) for f in forms), default=1) - 1
    carry: list[TextDelta] = []

    async def redacted(event: Any) -> None:
        if isinstance(event, TextDelta) and hold > 0:
            text = redact((carry.pop().text if carry else "") + event.text, forms)
            if len(text) > hold:
                await sink(event.model_copy(update={"text": text[:-hold]}))
            carry.append(event.model_copy(update={"text": text[-hold:]}))
            return
        if carry:
            await sink(carry.pop())
        if isinstance(event, BaseModel):
            text = event.model_dump_json()
            cleaned = redact(text, forms)
            if cleaned != text:
                event = type(event).model_validate_json(cleaned)
        await sink(event)

    return redacted
