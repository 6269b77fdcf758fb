"""Shared helpers of the turn tests: small tools, an event recorder, hooks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airlock.turn import TurnEvent, tool
from layer0 import HookAction, HookContext, HookContinue, HookPoint


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


@tool
def echo(text: str) -> str:
    """Echo the text back (a sync function, run in a thread)."""
    return text


class Recorder:
    """An TurnEventSink keeping every event."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]


class ScriptedHook:
    """A hook answering from a per-point list of actions (then Continue), recording contexts."""

    def __init__(self, actions: dict[HookPoint, Sequence[HookAction | Exception]]) -> None:
        self._actions = {p: list(a) for p, a in actions.items()}
        self.seen: list[HookContext] = []

    def points(self) -> Sequence[HookPoint]:
        return list(self._actions)

    async def on_event(self, ctx: HookContext) -> HookAction:
        self.seen.append(ctx)
        queue = self._actions[ctx.point]
        if not queue:
            return HookContinue()
        action = queue.pop(0)
        if isinstance(action, Exception):
            raise action
        return action


def result_parts(messages: Sequence[Any]) -> list[Any]:
    """All tool_result parts of a message list, in order."""
    return [p for m in messages for p in m.content if p.type == "tool_result"]
