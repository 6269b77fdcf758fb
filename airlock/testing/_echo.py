"""EchoTurn: the smallest real ``layer0.Turn``; returns its input message."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from decimal import Decimal

from layer0 import (
    ExitReason,
    Hook,
    HookAction,
    HookContext,
    HookHalt,
    HookPoint,
    Scope,
    TurnInput,
    TurnMetadata,
    TurnOutput,
    WriteMemory,
)

_log = logging.getLogger(__name__)


class EchoTurn:
    """A ``layer0.Turn`` whose "model" repeats the input message.

    Each turn fires its hooks at ``pre_inference``, ``post_inference`` (with the echoed
    message as ``model_output``) and ``exit_check``; it has no tools, so the tool
    points never fire. A ``HookHalt`` ends the turn with ``ExitReason.observer_halt``;
    a hook that raises is logged and ignored (hooks never halt by failing).

    Args:
        scope: when given, the output declares ``WriteMemory(scope, key, message)``
            (the message's wire JSON) — the turn never writes state itself.
        key: the memory key for that effect.
        hooks: observers fired at the points each of them names.
    """

    def __init__(
        self, *, scope: Scope | None = None, key: str = "last_message", hooks: Sequence[Hook] = ()
    ) -> None:
        self._scope = scope
        self._key = key
        self._hooks = list(hooks)

    async def execute(self, input: TurnInput) -> TurnOutput:
        """Echo ``input.message``; metadata says one turn, no tokens, zero cost."""
        start = time.perf_counter()

        def elapsed_ms() -> int:
            return int((time.perf_counter() - start) * 1000)

        def ctx(point: HookPoint, **fields: object) -> HookContext:
            return HookContext.model_validate(
                {
                    "point": point,
                    "tokens_used": 0,
                    "cost": Decimal(0),
                    "turns_completed": 0,
                    "elapsed": elapsed_ms(),
                }
                | fields
            )

        halt = await self._fire(ctx(HookPoint.PRE_INFERENCE))
        if halt is None:
            halt = await self._fire(ctx(HookPoint.POST_INFERENCE, model_output=input.message))
        if halt is None:
            halt = await self._fire(ctx(HookPoint.EXIT_CHECK, turns_completed=1))
        effects = []
        if self._scope is not None and halt is None:
            effects.append(
                WriteMemory(scope=self._scope, key=self._key, value=input.message.model_dump(mode="json"))
            )
        metadata = TurnMetadata.empty().model_copy(update={"turns_used": 1, "duration": elapsed_ms()})
        return TurnOutput(
            message=input.message,
            exit_reason=ExitReason.complete() if halt is None else ExitReason.observer_halt(halt.reason),
            metadata=metadata,
            effects=effects,
        )

    async def _fire(self, context: HookContext) -> HookHalt | None:
        for hook in self._hooks:
            if context.point not in hook.points():
                continue
            try:
                action: HookAction = await hook.on_event(context)
            except Exception as e:
                _log.warning(
                    "hook %s failed at %s (ignored): %s", type(hook).__name__, context.point.value, e
                )
                continue
            if isinstance(action, HookHalt):
                return action
        return None
