"""A custom turn (``AgentSpec.turn``) driven like a NeuronTurn's session by an execution.

A custom ``layer0.Turn`` has one method, ``execute(input)``: it runs to its output. Its
execution streams no step events, only the final output (or error); pause takes effect at
its end, Step and resume-from-snapshot are not offered, and a signal is not delivered.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from pydantic import JsonValue

from airlock.errors import RunnerError, SpecError
from layer0 import ExitReason, TurnInput, TurnMetadata, TurnOutput

if TYPE_CHECKING:
    from airlock.turn import ExtensionTurn, PendingCall, SessionState, StepResult, TurnEventSink

__all__ = ["CustomTurnLoop", "CustomTurnRun"]

_log = logging.getLogger(__name__)


class CustomTurnRun:
    """What an execution starts: a session of the custom turn for one input."""

    def __init__(self, turn: ExtensionTurn) -> None:
        self.turn = turn

    def start(self, input: TurnInput, events: TurnEventSink | None = None) -> CustomTurnLoop:
        """A session for ``input`` (``events`` unused: a custom turn streams none)."""
        return CustomTurnLoop(self.turn, input)

    def resume(self, state: str, events: TurnEventSink | None = None) -> CustomTurnLoop:
        """Refused: a custom turn keeps no snapshot to continue from.

        Raises:
            SpecError: always.
        """
        raise SpecError(f"the custom turn {self.turn.spec.name!r} cannot resume from a snapshot")


class CustomTurnLoop:
    """The TurnLoop surface an execution uses, over one ``execute`` call."""

    def __init__(self, turn: ExtensionTurn, input: TurnInput) -> None:
        from airlock.turn import SessionState

        self.turn = turn
        self.input = input
        self._state = SessionState(input=input)
        self._started = time.monotonic()

    @property
    def state(self) -> SessionState:
        """The input only: a custom turn's steps are its own."""
        return self._state

    @property
    def awaiting(self) -> list[PendingCall]:
        """Never any: approvals are the built-in turn's."""
        return []

    def deliver(self, signal_type: str, data: JsonValue = None) -> None:
        """Not delivered (logged): a custom turn has no inbox."""
        _log.warning("signal not delivered to a custom turn", extra={"signal_type": signal_type})

    def request_pause(self) -> None:
        """Nothing: the turn runs to its end."""

    def withdraw_pause(self) -> None:
        """Nothing: no pause is ever pending."""

    async def run(self) -> TurnOutput:
        """The custom turn's output."""
        self._started = time.monotonic()
        return await self.turn.execute(self.input)

    async def step(self) -> StepResult:
        """Refused: a custom turn is not stepped.

        Raises:
            RunnerError: always.
        """
        raise RunnerError("a custom turn cannot be stepped")

    def cancelled_output(self) -> TurnOutput:
        """The output of a cancelled custom turn (``custom("cancelled")``, its duration only)."""
        elapsed = int((time.monotonic() - self._started) * 1000)
        return TurnOutput(
            message="custom turn cancelled",
            exit_reason=ExitReason.custom("cancelled"),
            metadata=TurnMetadata.empty().model_copy(update={"duration": elapsed}),
        )
