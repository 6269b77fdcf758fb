"""Job events to and from the controller's ``JobEvent`` message: one typed message per kind.

A sandbox's turn events travel as the runner's own messages (converted by
:mod:`airlock.wire`); proxy events, effect outcomes, child jobs, signals, log lines, approvals
and resumes have messages of their own in ``controller.proto``. Every conversion is lossless
for the values the models allow.

A turn's lifecycle events (budget, compaction: ``airlock.turn.LifecycleEvent``) travel as the
``lifecycle`` variant of ``SandboxEvent``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, assert_never, get_args

from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import ValidationError

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import WorkspaceBlob, WorkspaceSnapshot, WorkspaceStopped
from airlock.proxy import CredentialProxyEvent, EgressEvent
from airlock.sandbox import SandboxEvent
from layer0 import AgentId, TurnError, TurnOutput

from ._convert_effects import EFFECT_STATUS
from ._effects import EffectOutcome
from ._model import (
    ApprovalChanged,
    ChildJobChanged,
    EffectApplied,
    JobEvent,
    JobEventData,
    JobResumed,
    JobState,
    LogLine,
    ResumeCause,
    SandboxActivity,
    SignalRecorded,
    StateChanged,
    TreeBudgetChanged,
    TreeBudgetUse,
    WorkspaceChanged,
)
from .convert import (
    JOB_ORIGIN,
    decision_from_proto,
    decision_to_proto,
    job_error_from_proto,
    job_error_to_proto,
    outcome_from_proto,
    outcome_to_proto,
    state_from_proto,
    state_to_proto,
    timestamp_from_proto,
    timestamp_to_proto,
    tree_use_from_proto,
    tree_use_to_proto,
)

#: Turn events cross this wire whole: the controller already holds what the runner sent.
_NO_PAYLOAD_LIMIT = 1 << 62
#: The ``source`` of the log event a lifecycle event travels as, when ``SandboxEvent`` has no
#: ``lifecycle`` variant (see the module docstring).
_SANDBOX_VARIANTS = frozenset(cpb.SandboxEvent.DESCRIPTOR.fields_by_name)

_EFFECT_STATUS = EFFECT_STATUS
_EGRESS_PHASE: wire.WireEnum[Literal["decision", "closed"]] = wire.WireEnum(
    cpb.EgressPhase, "EGRESS_PHASE_", ("decision", "closed"), "egress phase"
)
_CHILD_PHASE: wire.WireEnum[Literal["started", "finished"]] = wire.WireEnum(
    cpb.ChildPhase, "CHILD_PHASE_", ("started", "finished"), "child phase"
)
_APPROVAL_PHASE: wire.WireEnum[Literal["requested", "decided", "resolved"]] = wire.WireEnum(
    cpb.ApprovalPhase, "APPROVAL_PHASE_", ("requested", "decided", "resolved"), "approval phase"
)
_RESUME_CAUSE: wire.WireEnum[ResumeCause] = wire.WireEnum(
    cpb.ResumeCause, "RESUME_CAUSE_", get_args(ResumeCause), "resume cause"
)
_WORKSPACE_PHASE: wire.WireEnum[Literal["saved", "restored", "stopped"]] = wire.WireEnum(
    cpb.WorkspacePhase, "WORKSPACE_PHASE_", ("saved", "restored", "stopped"), "workspace phase"
)


def event_to_proto(event: JobEvent) -> cpb.JobEvent:
    """A job event on the wire.

    Raises:
        MalformedMessage: a value outside the wire's closed sets (e.g. a turn event's stop
            reason).
    """
    message = cpb.JobEvent(job_id=event.job_id, seq=event.seq, time=timestamp_to_proto(event.time))
    data = event.data
    match data:
        case StateChanged():
            message.state.CopyFrom(_state_to_proto(data))
        case SandboxActivity():
            message.sandbox.CopyFrom(sandbox_event_to_proto(data.event))
        case EffectApplied():
            message.effect.CopyFrom(_effect_to_proto(data))
        case ChildJobChanged():
            message.child.CopyFrom(_child_to_proto(data))
        case SignalRecorded():
            message.signal.CopyFrom(_signal_to_proto(data))
        case LogLine():
            message.log.CopyFrom(_log_to_proto(data))
        case ApprovalChanged():
            message.approval.CopyFrom(_approval_to_proto(data))
        case JobResumed():
            message.resume.CopyFrom(_resume_to_proto(data))
        case WorkspaceChanged():
            message.workspace.CopyFrom(_workspace_to_proto(data))
        case TreeBudgetChanged():
            message.tree_budget.CopyFrom(_tree_budget_to_proto(data))
        case _:
            assert_never(data)
    return message


def event_from_proto(message: cpb.JobEvent) -> JobEvent:
    """A job event from the wire.

    Raises:
        MalformedMessage: no event set, or one that does not decode.
    """
    kind = message.WhichOneof("event")
    data: JobEventData
    try:
        with wire.located(kind or "event"):
            if kind == "state":
                data = _state_from_proto(message.state)
            elif kind == "sandbox":
                data = SandboxActivity(event=sandbox_event_from_proto(message.sandbox))
            elif kind == "effect":
                data = _effect_from_proto(message.effect)
            elif kind == "child":
                data = _child_from_proto(message.child)
            elif kind == "signal":
                data = _signal_from_proto(message.signal)
            elif kind == "log":
                data = _log_from_proto(message.log)
            elif kind == "approval":
                data = _approval_from_proto(message.approval)
            elif kind == "resume":
                data = _resume_from_proto(message.resume)
            elif kind == "workspace":
                data = _workspace_from_proto(message.workspace)
            elif kind == "tree_budget":
                data = _tree_budget_from_proto(message.tree_budget)
            else:
                raise wire.MalformedMessage("no event set")
    except ValidationError as e:
        raise wire.MalformedMessage(problems=wire.validation_problems(e)) from e
    return JobEvent(
        job_id=message.job_id, seq=message.seq, time=timestamp_from_proto(message.time), data=data
    )


# -- state ---------------------------------------------------------------------------------------


def _state_to_proto(data: StateChanged) -> cpb.JobStateChanged:
    message = cpb.JobStateChanged(state=state_to_proto(data.state))
    if data.previous is not None:
        message.previous = state_to_proto(data.previous)
    if data.detail is not None:
        message.detail = data.detail
    if data.error is not None:
        message.error.CopyFrom(job_error_to_proto(data.error))
    return message


def _state_from_proto(message: cpb.JobStateChanged) -> StateChanged:
    return StateChanged(
        state=_job_state(message.state, "state"),
        previous=_job_state(message.previous, "previous") if message.previous else None,
        detail=message.detail if message.HasField("detail") else None,
        error=job_error_from_proto(message.error, "error") if message.HasField("error") else None,
    )


def _job_state(value: int, path: str) -> JobState:
    try:
        return state_from_proto(value)
    except ValueError as e:
        raise wire.MalformedMessage(str(e), path=path) from None


# -- sandbox ---------------------------------------------------------------------------------------


def sandbox_event_to_proto(event: SandboxEvent) -> cpb.SandboxEvent:
    """A sandbox event (turn or proxy) as the controller's ``SandboxEvent`` message."""
    if isinstance(event, EgressEvent):
        return cpb.SandboxEvent(egress=_egress_to_proto(event))
    if isinstance(event, CredentialProxyEvent):
        return cpb.SandboxEvent(credential_proxy=_credential_to_proto(event))
    if isinstance(event, WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped):
        raise wire.MalformedMessage(
            f"{event.type} is never a job event (the controller keeps workspace snapshots itself)"
        )
    turn = wire.event_to_proto(event, payload_limit=_NO_PAYLOAD_LIMIT)
    if turn is None:  # pragma: no cover - every turn event of the union has a message
        raise wire.MalformedMessage(f"turn event {event.type!r} has no message on this wire")
    variant = turn.WhichOneof("kind")
    if variant not in _SANDBOX_VARIANTS:
        raise wire.MalformedMessage(
            f"turn event {event.type!r} has no SandboxEvent variant in controller.proto"
        )
    message = cpb.SandboxEvent()
    getattr(message, str(variant)).CopyFrom(getattr(turn, str(variant)))
    return message


def sandbox_event_from_proto(message: cpb.SandboxEvent) -> SandboxEvent:
    """A sandbox event from its message.

    Raises:
        MalformedMessage: no variant set, or one that does not decode.
    """
    variant = message.WhichOneof("event")
    if variant is None:
        raise wire.MalformedMessage("no sandbox event set")
    if variant == "egress":
        return _egress_from_proto(message.egress)
    if variant == "credential_proxy":
        return _credential_from_proto(message.credential_proxy)
    turn = pb.TurnEvent()
    getattr(turn, variant).CopyFrom(getattr(message, variant))
    event = wire.event_from_proto(turn)
    if isinstance(
        event, TurnOutput | TurnError | WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped
    ):  # pragma: no cover - not variants of this oneof
        raise wire.MalformedMessage(f"{variant} is not a sandbox event")
    return event


def _proxy_time_to_proto(text: str) -> Timestamp | None:
    """A proxy's ISO 8601 time as a Timestamp (None: it does not read as one)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return timestamp_to_proto(when if when.tzinfo is not None else when.replace(tzinfo=UTC))


def _proxy_time_from_proto(message: cpb.EgressEvent | cpb.CredentialProxyEvent) -> str:
    """A Timestamp as the proxy writes times (ISO 8601, UTC, milliseconds, ``Z``); absent: ``""``."""
    if not message.HasField("time"):
        return ""
    when = timestamp_from_proto(message.time)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _egress_to_proto(event: EgressEvent) -> cpb.EgressEvent:
    message = cpb.EgressEvent(
        time=_proxy_time_to_proto(event.time),
        client=event.client,
        phase=_EGRESS_PHASE.to_proto(event.phase),
        method=event.method,
        host=event.host,
        port=event.port,
        allowed=event.allowed,
        rule=event.rule,
        reason=event.reason,
    )
    for name in ("ip", "sni", "bytes_up", "bytes_down"):
        value = getattr(event, name)
        if value is not None:
            setattr(message, name, value)
    if event.duration_ms is not None:
        message.duration.CopyFrom(wire.duration_to_proto(event.duration_ms))
    return message


def _egress_from_proto(message: cpb.EgressEvent) -> EgressEvent:
    phase = _EGRESS_PHASE.from_proto(message.phase, "egress.phase")
    return EgressEvent(
        time=_proxy_time_from_proto(message),
        client=message.client,
        phase=phase,
        method=message.method,
        host=message.host,
        port=message.port,
        ip=message.ip if message.HasField("ip") else None,
        sni=message.sni if message.HasField("sni") else None,
        allowed=message.allowed,
        rule=message.rule,
        reason=message.reason,
        bytes_up=message.bytes_up if message.HasField("bytes_up") else None,
        bytes_down=message.bytes_down if message.HasField("bytes_down") else None,
        duration_ms=wire.duration_from_proto(message.duration) if message.HasField("duration") else None,
    )


def _credential_to_proto(event: CredentialProxyEvent) -> cpb.CredentialProxyEvent:
    return cpb.CredentialProxyEvent(
        time=_proxy_time_to_proto(event.time),
        client=event.client,
        credential=event.credential,
        method=event.method,
        path=event.path,
        upstream=event.upstream,
        status=event.status,
        reason=event.reason,
        bytes_up=event.bytes_up,
        bytes_down=event.bytes_down,
        duration=wire.duration_to_proto(event.duration_ms),
        redacted=event.redacted,
    )


def _credential_from_proto(message: cpb.CredentialProxyEvent) -> CredentialProxyEvent:
    return CredentialProxyEvent(
        time=_proxy_time_from_proto(message),
        client=message.client,
        credential=message.credential,
        method=message.method,
        path=message.path,
        upstream=message.upstream,
        status=message.status,
        reason=message.reason,
        bytes_up=message.bytes_up,
        bytes_down=message.bytes_down,
        duration_ms=wire.duration_from_proto(message.duration),
        redacted=message.redacted,
    )


# -- approvals and resumes --------------------------------------------------------------------------


def _approval_to_proto(data: ApprovalChanged) -> cpb.ApprovalChanged:
    message = cpb.ApprovalChanged(
        phase=_APPROVAL_PHASE.to_proto(data.phase),
        calls=[wire.pending_call_to_proto(c) for c in data.calls],
        outcome=outcome_to_proto(data.outcome),
    )
    if data.decision is not None:
        message.decision.CopyFrom(decision_to_proto(data.decision))
    return message


def _approval_from_proto(message: cpb.ApprovalChanged) -> ApprovalChanged:
    return ApprovalChanged(
        phase=_APPROVAL_PHASE.from_proto(message.phase, "phase"),
        calls=[wire.pending_call_from_proto(c) for c in message.calls],
        decision=decision_from_proto(message.decision) if message.HasField("decision") else None,
        outcome=outcome_from_proto(message.outcome),
    )


def _resume_to_proto(data: JobResumed) -> cpb.JobResumed:
    return cpb.JobResumed(
        resume=data.resume,
        cause=_RESUME_CAUSE.to_proto(data.cause),
        reason=data.reason,
        iteration=data.iteration,
        lost_calls=data.lost_calls,
    )


def _resume_from_proto(message: cpb.JobResumed) -> JobResumed:
    return JobResumed(
        resume=message.resume,
        cause=_RESUME_CAUSE.from_proto(message.cause, "cause"),
        reason=message.reason,
        iteration=message.iteration,
        lost_calls=list(message.lost_calls),
    )


def _workspace_to_proto(data: WorkspaceChanged) -> cpb.WorkspaceChanged:
    return cpb.WorkspaceChanged(
        phase=_WORKSPACE_PHASE.to_proto(data.phase),
        manifest=data.manifest,
        files=data.files,
        bytes=data.bytes,
        max_bytes=data.max_bytes,
        reason=data.reason,
    )


def _workspace_from_proto(message: cpb.WorkspaceChanged) -> WorkspaceChanged:
    return WorkspaceChanged(
        phase=_WORKSPACE_PHASE.from_proto(message.phase, "phase"),
        manifest=message.manifest,
        files=message.files,
        bytes=message.bytes,
        max_bytes=message.max_bytes,
        reason=message.reason if message.HasField("reason") else None,
    )


def _tree_budget_to_proto(data: TreeBudgetChanged) -> cpb.TreeBudgetChanged:
    message = tree_use_to_proto(TreeBudgetUse.model_validate(data.model_dump(exclude={"kind", "reason"})))
    message.reason = data.reason
    return message


def _tree_budget_from_proto(message: cpb.TreeBudgetChanged) -> TreeBudgetChanged:
    use = tree_use_from_proto(message)
    return TreeBudgetChanged.model_validate({**use.model_dump(), "reason": message.reason})


# -- effects, children, signals, logs ------------------------------------------------------------------


def _effect_to_proto(data: EffectApplied) -> cpb.EffectApplied:
    outcome = data.outcome
    message = cpb.EffectApplied(
        index=outcome.index,
        effect=outcome.effect,
        status=_EFFECT_STATUS.to_proto(outcome.status),
        result=wire.json_to_proto(outcome.result),
        depth=data.depth,
        source=data.source,
    )
    if outcome.detail is not None:
        message.detail = outcome.detail
    if outcome.agent is not None:
        message.agent = str(outcome.agent)
    if data.job is not None:
        message.job = data.job
    return message


def _effect_from_proto(message: cpb.EffectApplied) -> EffectApplied:
    status = _EFFECT_STATUS.from_proto(message.status, "status")
    outcome = EffectOutcome(
        index=message.index,
        effect=message.effect,
        status=status,
        detail=message.detail if message.HasField("detail") else None,
        agent=AgentId(message.agent) if message.HasField("agent") else None,
        result=wire.json_from_proto(message.result, present=message.HasField("result")),
    )
    return EffectApplied(
        outcome=outcome,
        depth=message.depth,
        source=message.source,
        job=message.job if message.HasField("job") else None,
    )


def _child_to_proto(data: ChildJobChanged) -> cpb.ChildJobChanged:
    message = cpb.ChildJobChanged(
        phase=_CHILD_PHASE.to_proto(data.phase),
        job=data.job,
        agent=data.agent,
        origin=JOB_ORIGIN.to_proto(data.origin),
    )
    if data.state is not None:
        message.state = state_to_proto(data.state)
    return message


def _child_from_proto(message: cpb.ChildJobChanged) -> ChildJobChanged:
    phase = _CHILD_PHASE.from_proto(message.phase, "phase")
    origin = JOB_ORIGIN.from_proto(message.origin, "origin")
    return ChildJobChanged(
        phase=phase,
        job=message.job,
        agent=message.agent,
        origin=origin,
        state=_job_state(message.state, "state") if message.state else None,
    )


def _signal_to_proto(data: SignalRecorded) -> cpb.SignalRecorded:
    message = cpb.SignalRecorded(
        target=data.target,
        signal_type=data.signal_type,
        data=wire.json_to_proto(data.data),
        count=data.count,
    )
    if data.from_job is not None:
        message.from_job = data.from_job
    return message


def _signal_from_proto(message: cpb.SignalRecorded) -> SignalRecorded:
    return SignalRecorded(
        target=message.target,
        signal_type=message.signal_type,
        data=wire.json_from_proto(message.data, present=message.HasField("data")),
        count=message.count,
        from_job=message.from_job if message.HasField("from_job") else None,
    )


def _log_to_proto(data: LogLine) -> cpb.LogLine:
    message = cpb.LogLine(
        level=wire.LOG_LEVEL.to_proto(data.level.value),
        message=data.message,
        source=data.source,
        data=wire.json_to_proto(data.data),
    )
    if data.job is not None:
        message.job = data.job
    return message


def _log_from_proto(message: cpb.LogLine) -> LogLine:
    return LogLine(
        level=wire.LOG_LEVEL.from_proto(message.level, "level"),
        message=message.message,
        source=message.source,
        data=wire.json_from_proto(message.data, present=message.HasField("data")),
        job=message.job if message.HasField("job") else None,
    )
