"""layer0's externally tagged enums (TriggerType, ExitReason, Scope) ↔ proto oneofs."""

from __future__ import annotations

from airlock._proto.runner.v1 import runner_pb2 as pb
from layer0 import ExitReason, Scope, TriggerType

from ._primitives import decoder, oneof, with_variant


def trigger_to_proto(trigger: TriggerType) -> pb.TriggerType:
    """layer0 TriggerType → proto."""
    if trigger.kind == "custom":
        return pb.TriggerType(custom=trigger.custom_name or "")
    return with_variant(pb.TriggerType(), trigger.kind)


@decoder
def trigger_from_proto(message: pb.TriggerType) -> TriggerType:
    """proto → layer0 TriggerType."""
    kind = oneof(message, "kind")
    if kind == "custom":
        return TriggerType.custom(message.custom)
    return TriggerType.model_validate(kind)


def exit_reason_to_proto(reason: ExitReason) -> pb.ExitReason:
    """layer0 ExitReason → proto."""
    if reason.kind == "custom":
        return pb.ExitReason(custom=reason.custom_name or "")
    message = with_variant(pb.ExitReason(), reason.kind)
    if reason.kind in ("observer_halt", "safety_stop"):
        getattr(message, reason.kind).reason = reason.reason or ""
    return message


@decoder
def exit_reason_from_proto(message: pb.ExitReason) -> ExitReason:
    """proto → layer0 ExitReason."""
    kind = oneof(message, "kind")
    if kind == "custom":
        return ExitReason.custom(message.custom)
    if kind == "observer_halt":
        return ExitReason.observer_halt(message.observer_halt.reason)
    if kind == "safety_stop":
        return ExitReason.safety_stop(message.safety_stop.reason)
    return ExitReason.model_validate(kind)


def scope_to_proto(scope: Scope) -> pb.Scope:
    """layer0 Scope → proto."""
    if scope.kind == "session":
        return pb.Scope(session=str(scope.session_id))
    if scope.kind == "workflow":
        return pb.Scope(workflow=str(scope.workflow_id))
    if scope.kind == "agent":
        return pb.Scope(agent=pb.AgentScope(workflow=str(scope.workflow_id), agent=str(scope.agent_id)))
    if scope.kind == "global":
        return with_variant(pb.Scope(), "global")
    return pb.Scope(custom=scope.custom_name or "")


@decoder
def scope_from_proto(message: pb.Scope) -> Scope:
    """proto → layer0 Scope."""
    kind = oneof(message, "kind")
    if kind == "session":
        return Scope.session(message.session)
    if kind == "workflow":
        return Scope.workflow(message.workflow)
    if kind == "agent":
        return Scope.agent(message.agent.workflow, message.agent.agent)
    if kind == "global":
        return Scope.global_()
    return Scope.custom(message.custom)
