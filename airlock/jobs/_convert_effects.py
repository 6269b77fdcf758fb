"""An effect report (what became of a turn output's effects) to and from its typed message.

A job records its report as JSON without the children's outputs (they are on the children's
jobs); :func:`report_to_proto` reads that JSON as an :class:`EffectReport` and
:func:`report_from_proto` gives the same JSON back.
"""

from __future__ import annotations

from typing import get_args

from pydantic import JsonValue, ValidationError

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from layer0 import AgentId

from ._effects import EffectOutcome, EffectReport, OutcomeStatus

__all__ = ["EFFECT_STATUS", "report_from_proto", "report_to_proto"]

#: An effect's outcome status ↔ ``EFFECT_STATUS_*``.
EFFECT_STATUS: wire.WireEnum[OutcomeStatus] = wire.WireEnum(
    cpb.EffectStatus, "EFFECT_STATUS_", get_args(OutcomeStatus), "effect status"
)


def report_to_proto(recorded: JsonValue) -> cpb.EffectReport:
    """A job's recorded report (:meth:`EffectReport.recorded`) as its message.

    Raises:
        MalformedMessage: the record is not an effect report (located under ``effects``).
    """
    try:
        report = EffectReport.model_validate(recorded)
    except ValidationError as e:
        raise wire.MalformedMessage(problems=wire.validation_problems(e)).under("effects") from e
    return _to_proto(report)


def _to_proto(report: EffectReport) -> cpb.EffectReport:
    message = cpb.EffectReport(depth=report.depth)
    for outcome in report.outcomes:
        item = message.outcomes.add(
            index=outcome.index,
            effect=outcome.effect,
            status=EFFECT_STATUS.to_proto(outcome.status),
            result=wire.json_to_proto(outcome.result),
        )
        if outcome.detail is not None:
            item.detail = outcome.detail
        if outcome.agent is not None:
            item.agent = str(outcome.agent)
        if outcome.follow_up is not None:
            item.follow_up.CopyFrom(_to_proto(outcome.follow_up))
    return message


def report_from_proto(message: cpb.EffectReport, path: str = "effects") -> JsonValue:
    """A report's message as the job records it (:meth:`EffectReport.recorded`).

    Raises:
        MalformedMessage: an unknown status, invalid result JSON, a value out of range.
    """
    with wire.located(path):
        return _from_proto(message).recorded()


def _from_proto(message: cpb.EffectReport) -> EffectReport:
    outcomes = []
    for i, item in enumerate(message.outcomes):
        with wire.located(f"outcomes[{i}]"):
            outcomes.append(
                EffectOutcome(
                    index=item.index,
                    effect=item.effect,
                    status=EFFECT_STATUS.from_proto(item.status, "status"),
                    detail=item.detail if item.HasField("detail") else None,
                    agent=AgentId(item.agent) if item.HasField("agent") else None,
                    follow_up=_follow_up(item),
                    result=wire.json_from_proto(item.result, present=item.HasField("result")),
                )
            )
    return EffectReport(depth=message.depth, outcomes=outcomes)


def _follow_up(item: cpb.EffectOutcome) -> EffectReport | None:
    if not item.HasField("follow_up"):
        return None
    with wire.located("follow_up"):
        return _from_proto(item.follow_up)
