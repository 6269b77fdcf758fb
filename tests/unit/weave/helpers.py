"""Builders shared by the weave tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import JsonValue

from airlock.weave import RecordDraft, RecordType

T0 = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def draft(
    job: str,
    *deps: str,
    agent: str | None = None,
    type: RecordType = RecordType.ACTION,
    kind: str = "tool_call",
    content: JsonValue = None,
    seconds: float = 0,
) -> RecordDraft:
    """A draft in ``job`` (its agent named after it unless given) depending on ``deps``."""
    return RecordDraft(
        job=job,
        agent=agent or f"agent-{job}",
        type=type,
        kind=kind,
        depends_on=deps,
        content=content if content is not None else {"job": job, "deps": list(deps)},
        time=T0 + timedelta(seconds=seconds),
    )
