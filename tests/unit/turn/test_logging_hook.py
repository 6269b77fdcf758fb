"""LoggingHook: one log record per hook point, carrying the context, never tool input values."""

from __future__ import annotations

import logging

import pytest

from airlock.turn import LoggingHook
from layer0 import Hook, HookContext, HookContinue, HookPoint


async def test_logging_hook_fires_at_every_point(caplog: pytest.LogCaptureFixture) -> None:
    hook = LoggingHook()
    assert isinstance(hook, Hook)
    assert set(hook.points()) == set(HookPoint)
    caplog.set_level(logging.INFO, logger="airlock.turn.hooks")
    for point in HookPoint:
        ctx = HookContext.new(point).model_copy(
            update={"tool_name": "bash", "tool_input": {"secret": "s3cr3t"}}
        )
        assert await hook.on_event(ctx) == HookContinue()
    records = [r for r in caplog.records if r.name == "airlock.turn.hooks"]
    assert [r.getMessage().split(":")[0] for r in records] == [f"hook {p.value}" for p in HookPoint]
    assert all("tool=bash" in r.getMessage() and "s3cr3t" not in r.getMessage() for r in records)
    assert all(isinstance(r.hook_context, HookContext) for r in records)  # type: ignore[attr-defined]
