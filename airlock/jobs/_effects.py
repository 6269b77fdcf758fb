"""What applying a turn's effects did: one outcome per effect, in a report (see
``airlock.controller.EffectExecutor``, which applies them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from layer0 import AgentId, TurnOutput

OutcomeStatus = Literal["ok", "error", "skipped", "unhandled", "limit_reached", "refused"]


class EffectOutcome(BaseModel):
    """What happened to one effect."""

    model_config = ConfigDict(frozen=True)

    #: Position of the effect in its ``TurnOutput.effects``.
    index: int
    #: The effect's ``type`` tag (``write_memory``, ``delegate``, …).
    effect: str
    #: ``ok``; ``error`` (see ``detail``); ``skipped`` (an earlier effect failed and
    #: ``stop_on_error`` is set); ``unhandled`` (custom effect without a handler);
    #: ``limit_reached`` (a follow-up beyond the depth or count limit, not dispatched);
    #: ``refused`` (the gate refused it, see ``detail``; not applied).
    status: OutcomeStatus
    detail: str | None = None
    #: The agent dispatched by a delegate or handoff.
    agent: AgentId | None = None
    #: That agent's output.
    child_output: TurnOutput | None = None
    #: The report of applying the child's own effects.
    follow_up: EffectReport | None = None
    #: A custom handler's result.
    result: JsonValue = None


class EffectReport(BaseModel):
    """The outcomes of applying one ``TurnOutput``'s effects, in order."""

    model_config = ConfigDict(frozen=True)

    #: 0 for the output given to ``apply``; n for a child n dispatches down.
    depth: int
    outcomes: list[EffectOutcome]

    def recorded(self) -> JsonValue:
        """The report as a job records it (children's outputs are on their own jobs)."""
        return self.model_dump(mode="json", exclude={"outcomes": {"__all__": {"child_output"}}})

    def walk(self) -> Iterator[EffectOutcome]:
        """Every outcome, this report's and its follow-ups', depth first."""
        for outcome in self.outcomes:
            yield outcome
            if outcome.follow_up is not None:
                yield from outcome.follow_up.walk()

    @property
    def ok(self) -> bool:
        """True when every effect, follow-ups included, was applied."""
        return all(o.status == "ok" for o in self.walk())

    @property
    def limit_reached(self) -> bool:
        """True when some follow-up was not dispatched because of a limit."""
        return any(o.status == "limit_reached" for o in self.walk())

    @property
    def refused(self) -> list[EffectOutcome]:
        """The outcomes of effects the gate refused, follow-ups included."""
        return [o for o in self.walk() if o.status == "refused"]


EffectOutcome.model_rebuild()
