"""EchoTurn: the echoed message, its declared effect, and the hooks it fires."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from airlock.testing import EchoTurn
from airlock.turn import LoggingHook
from layer0 import (
    Content,
    HookAction,
    HookContext,
    HookError,
    HookHalt,
    HookPoint,
    Scope,
    TextBlock,
    Turn,
    TurnInput,
    WriteMemory,
)


async def test_echo_returns_input_with_metadata() -> None:
    turn = EchoTurn()
    assert isinstance(turn, Turn)
    out = await turn.execute(TurnInput.new("hello"))
    assert out.message == Content("hello")
    assert out.exit_reason.kind == "complete"
    assert out.metadata.turns_used == 1
    assert out.metadata.tokens_in == 0 and out.metadata.duration >= 0
    assert out.effects == []


async def test_echo_declares_write_memory_with_a_scope() -> None:
    scope = Scope.agent("wf", "echo")
    blocks = Content([TextBlock(text="a"), TextBlock(text="b")])
    out = await EchoTurn(scope=scope, key="k").execute(TurnInput.new(blocks))
    assert out.message == blocks
    assert out.effects == [
        WriteMemory(
            scope=scope, key="k", value=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
        )
    ]


async def test_echo_fires_hooks_in_order(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="airlock.turn.hooks")
    await EchoTurn(hooks=[LoggingHook()]).execute(TurnInput.new("x"))
    points = [r.hook_context.point for r in caplog.records if r.name == "airlock.turn.hooks"]  # type: ignore[attr-defined]
    assert points == [HookPoint.PRE_INFERENCE, HookPoint.POST_INFERENCE, HookPoint.EXIT_CHECK]
    post = [r.hook_context for r in caplog.records if r.name == "airlock.turn.hooks"][1]  # type: ignore[attr-defined]
    assert post.model_output == Content("x")


class Halter:
    def __init__(self, at: HookPoint) -> None:
        self.at = at

    def points(self) -> Sequence[HookPoint]:
        return [self.at]

    async def on_event(self, ctx: HookContext) -> HookAction:
        return HookHalt(reason=f"stop at {ctx.point.value}")


class Broken:
    def points(self) -> Sequence[HookPoint]:
        return list(HookPoint)

    async def on_event(self, ctx: HookContext) -> HookAction:
        raise HookError.failed("telemetry down")


async def test_halt_ends_turn_with_observer_halt_and_no_effects() -> None:
    out = await EchoTurn(scope=Scope.global_(), hooks=[Halter(HookPoint.POST_INFERENCE)]).execute(
        TurnInput.new("x")
    )
    assert out.exit_reason.kind == "observer_halt"
    assert out.exit_reason.reason == "stop at post_inference"
    assert out.effects == []


async def test_failing_hook_does_not_halt(caplog: pytest.LogCaptureFixture) -> None:
    out = await EchoTurn(hooks=[Broken()]).execute(TurnInput.new("x"))
    assert out.exit_reason.kind == "complete"
    assert sum("telemetry down" in r.getMessage() for r in caplog.records) == 3
