"""Turn events and the final ``output`` / ``error`` events of an Execute stream ↔ proto."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from pydantic import TypeAdapter

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.turn import (
    Checkpoint,
    ContextCompacted,
    InferenceFinished,
    InferenceStarted,
    LifecycleEvent,
    LifecyclePayload,
    PendingCall,
    SignalDelivered,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnLog,
    TurnPaused,
    TurnStarted,
    TurnSuspended,
)
from layer0 import TurnError, TurnOutput, decimal_to_str

from ._enums import CONTEXT_STRATEGY, LOG_LEVEL, SIGNAL_ACTION, STOP_REASON, TURN_ERROR_KIND
from ._primitives import (
    decimal_from_text,
    decoder,
    duration_from_proto,
    duration_to_proto,
    json_field,
    json_text,
    json_to_proto,
    oneof,
)
from ._problems import MalformedMessage, located
from ._turn import output_from_proto, output_to_proto
from ._workspace import (
    WorkspaceEvent,
    blob_from_proto,
    snapshot_from_proto,
    stopped_from_proto,
    workspace_event_to_proto,
)

#: A lifecycle event's layer0 payload (its JSON on the wire, tagged by ``type``).
_LIFECYCLE: TypeAdapter[Any] = TypeAdapter(LifecyclePayload)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (on a character boundary)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True


def event_to_proto(event: TurnEvent | WorkspaceEvent, *, payload_limit: int) -> pb.TurnEvent | None:
    """A turn event → proto; tool input/output longer than ``payload_limit`` bytes is cut.

    Returns None for an event type this wire version does not carry.

    Raises:
        MalformedMessage: a value outside its closed set (a stop reason, a log level, ...).
    """
    if isinstance(event, WorkspaceEvent):
        return workspace_event_to_proto(event)
    convert = _TO_PROTO.get(type(event))
    if convert is None:  # a subclass of an event type (an exact type is found at once)
        convert = next((c for kind, c in _TO_PROTO.items() if isinstance(event, kind)), None)
    return convert(event, payload_limit) if convert is not None else None


def _tool_started(event: ToolStarted, payload_limit: int) -> pb.TurnEvent:
    text = json_text(event.input)
    cut, truncated = _cut(text, payload_limit)
    payload = json_to_proto(cut) if truncated else pb.Json(text=text)
    return pb.TurnEvent(
        tool_started=pb.ToolStarted(
            tool_use_id=event.tool_use_id, name=event.name, input=payload, input_truncated=truncated
        )
    )


def _tool_finished(event: ToolFinished, payload_limit: int) -> pb.TurnEvent:
    output, truncated = _cut(event.output, payload_limit)
    finished = pb.ToolFinished(
        tool_use_id=event.tool_use_id,
        name=event.name,
        duration=duration_to_proto(event.duration_ms),
        success=event.success,
        output=output,
        output_truncated=truncated,
    )
    if event.exit_code is not None:
        finished.exit_code = event.exit_code
    return pb.TurnEvent(tool_finished=finished)


def _inference_started(event: InferenceStarted) -> pb.TurnEvent:
    started = pb.InferenceStarted(iteration=event.iteration)
    if event.model is not None:
        started.model = event.model
    return pb.TurnEvent(inference_started=started)


def _inference_finished(event: InferenceFinished) -> pb.TurnEvent:
    finished = pb.InferenceFinished(
        iteration=event.iteration,
        stop_reason=STOP_REASON.to_proto(event.stop_reason),
        tokens_in=event.tokens_in,
        tokens_out=event.tokens_out,
        total_tokens_in=event.total_tokens_in,
        total_tokens_out=event.total_tokens_out,
        total_cost=decimal_to_str(event.total_cost),
        duration=duration_to_proto(event.duration_ms),
    )
    if event.cost is not None:
        finished.cost = decimal_to_str(event.cost)
    return pb.TurnEvent(inference_finished=finished)


def _checkpoint(event: Checkpoint) -> pb.TurnEvent:
    checkpoint = pb.Checkpoint(
        messages_from=event.messages_from,
        tool_records_from=event.tool_records_from,
        state=json_to_proto(event.state),
    )
    return pb.TurnEvent(checkpoint=checkpoint)


def _compacted(event: ContextCompacted) -> pb.TurnEvent:
    compacted = pb.ContextCompacted(
        strategy=CONTEXT_STRATEGY.to_proto(event.strategy),
        messages_before=event.messages_before,
        messages_after=event.messages_after,
    )
    for name in ("cone_size", "cone_total", "compression_ratio"):
        if getattr(event, name) is not None:
            setattr(compacted, name, getattr(event, name))
    return pb.TurnEvent(compacted=compacted)


def _signal(event: SignalDelivered) -> pb.TurnEvent:
    action = SIGNAL_ACTION.to_proto(event.action)
    return pb.TurnEvent(
        signal=pb.SignalDelivered(signal_type=event.signal_type, action=action, detail=event.detail)
    )


#: Each event type's converter (called with the event and the payload limit).
_TO_PROTO: dict[type[Any], Callable[[Any, int], pb.TurnEvent]] = {
    Checkpoint: lambda e, _: _checkpoint(e),
    InferenceStarted: lambda e, _: _inference_started(e),
    InferenceFinished: lambda e, _: _inference_finished(e),
    ToolStarted: _tool_started,
    ToolFinished: _tool_finished,
    TurnStarted: lambda e, _: pb.TurnEvent(started=pb.TurnStarted(resumed=e.resumed)),
    TurnLog: lambda e, _: pb.TurnEvent(
        log=pb.TurnLogEvent(level=LOG_LEVEL.to_proto(e.level), message=e.message)
    ),
    TurnPaused: lambda e, _: pb.TurnEvent(paused=pb.TurnPaused(iteration=e.iteration)),
    TurnSuspended: lambda e, _: suspended_event(e),
    ContextCompacted: lambda e, _: _compacted(e),
    SignalDelivered: lambda e, _: _signal(e),
    LifecycleEvent: lambda e, _: pb.TurnEvent(lifecycle=lifecycle_to_proto(e)),
    TextDelta: lambda e, _: pb.TurnEvent(
        text_delta=pb.TextDelta(iteration=e.iteration, text=e.text, dropped_chars=e.dropped_chars)
    ),
}


def lifecycle_to_proto(event: LifecycleEvent) -> pb.LifecycleEvent:
    """A lifecycle event: its layer0 payload as JSON (as layer0 writes it) and its agent."""
    return pb.LifecycleEvent(event=json_to_proto(event.event.model_dump(mode="json")), agent=event.agent)


@decoder
def lifecycle_from_proto(message: pb.LifecycleEvent) -> LifecycleEvent:
    """A lifecycle event from the wire.

    Raises:
        MalformedMessage: ``event`` is not JSON, or not one of the layer0 lifecycle events.
    """
    payload = _LIFECYCLE.validate_python(json_field(message, "event"))
    return LifecycleEvent(event=payload, agent=message.agent)


def pending_call_to_proto(call: PendingCall) -> pb.PendingCall:
    """A call waiting for approval (its input whole: a person decides on it)."""
    return pb.PendingCall(
        tool_use_id=call.tool_use_id, name=call.name, input=json_to_proto(call.input), risks=call.risks
    )


def pending_call_from_proto(message: pb.PendingCall) -> PendingCall:
    """A call waiting for approval, from the wire.

    Raises:
        MalformedMessage: its input is not JSON (located at ``input``).
    """
    return PendingCall(
        tool_use_id=message.tool_use_id,
        name=message.name,
        input=json_field(message, "input"),
        risks=list(message.risks),
    )


def suspended_event(event: TurnSuspended) -> pb.TurnEvent:
    """The final ``suspended`` event (calls' inputs carried whole: a person decides on them)."""
    calls = [pending_call_to_proto(c) for c in event.calls]
    return pb.TurnEvent(suspended=pb.TurnSuspended(iteration=event.iteration, calls=calls))


def output_event(output: TurnOutput) -> pb.TurnEvent:
    """The final ``output`` event."""
    return pb.TurnEvent(output=output_to_proto(output))


def error_event(kind: str, message: str, tool_name: str | None = None) -> pb.TurnEvent:
    """The final ``error`` event (``kind``: a layer0 TurnError kind; anything else is ``other``)."""
    try:
        number = TURN_ERROR_KIND.to_proto(kind)
    except MalformedMessage:
        number = TURN_ERROR_KIND.to_proto("other")
    failed = pb.TurnFailed(kind=number, message=message)
    if tool_name is not None:
        failed.tool_name = tool_name
    return pb.TurnEvent(error=failed)


def turn_error_from_proto(message: pb.TurnFailed) -> TurnError:
    """The TurnError an ``error`` event carries (an unspecified or unknown kind is ``other``)."""
    try:
        kind = TURN_ERROR_KIND.from_proto(message.kind)
    except MalformedMessage:
        kind = "other"
    tool_name = message.tool_name if message.HasField("tool_name") else None
    return TurnError(cast(Any, kind), message.message, tool_name=tool_name)


@decoder
def event_from_proto(message: pb.TurnEvent) -> TurnEvent | WorkspaceEvent | TurnOutput | TurnError:
    """A proto event → a turn event, a workspace event, the final TurnOutput, or the final
    TurnError."""
    kind = oneof(message, "kind")
    with located(kind):
        return _FROM_PROTO[kind](getattr(message, kind))


def _checkpoint_from_proto(message: pb.Checkpoint) -> Checkpoint:
    state = json_field(message, "state")
    if not isinstance(state, dict):
        raise MalformedMessage("a checkpoint's state is a JSON object", path="state")
    return Checkpoint(
        messages_from=message.messages_from, tool_records_from=message.tool_records_from, state=state
    )


def _compacted_from_proto(c: pb.ContextCompacted) -> ContextCompacted:
    return ContextCompacted(
        strategy=CONTEXT_STRATEGY.from_proto(c.strategy, "strategy"),
        messages_before=c.messages_before,
        messages_after=c.messages_after,
        cone_size=c.cone_size if c.HasField("cone_size") else None,
        cone_total=c.cone_total if c.HasField("cone_total") else None,
        compression_ratio=c.compression_ratio if c.HasField("compression_ratio") else None,
    )


def _signal_from_proto(g: pb.SignalDelivered) -> SignalDelivered:
    action = SIGNAL_ACTION.from_proto(g.action, "action")
    return SignalDelivered(signal_type=g.signal_type, action=cast(Any, action), detail=g.detail)


def _inference_finished_from_proto(f: pb.InferenceFinished) -> InferenceFinished:
    return InferenceFinished(
        iteration=f.iteration,
        stop_reason=STOP_REASON.from_proto(f.stop_reason, "stop_reason").value,
        tokens_in=f.tokens_in,
        tokens_out=f.tokens_out,
        cost=decimal_from_text(f.cost, "cost") if f.HasField("cost") else None,
        total_tokens_in=f.total_tokens_in,
        total_tokens_out=f.total_tokens_out,
        total_cost=decimal_from_text(f.total_cost or "0", "total_cost"),
        duration_ms=duration_from_proto(f.duration),
    )


def _tool_finished_from_proto(t: pb.ToolFinished) -> ToolFinished:
    return ToolFinished(
        tool_use_id=t.tool_use_id,
        name=t.name,
        duration_ms=duration_from_proto(t.duration),
        success=t.success,
        output=t.output,
        exit_code=t.exit_code if t.HasField("exit_code") else None,
    )


def _log_from_proto(message: pb.TurnLogEvent) -> TurnLog:
    return TurnLog(level=LOG_LEVEL.from_proto(message.level, "level").value, message=message.message)


#: Each variant's reader, by its name in the ``kind`` oneof.
_FROM_PROTO: dict[str, Callable[[Any], TurnEvent | WorkspaceEvent | TurnOutput | TurnError]] = {
    "output": output_from_proto,
    "error": turn_error_from_proto,
    "started": lambda s: TurnStarted(resumed=s.resumed),
    "checkpoint": _checkpoint_from_proto,
    "suspended": lambda s: TurnSuspended(
        iteration=s.iteration, calls=[pending_call_from_proto(c) for c in s.calls]
    ),
    "compacted": _compacted_from_proto,
    "lifecycle": lifecycle_from_proto,
    "signal": _signal_from_proto,
    "inference_started": lambda s: InferenceStarted(
        iteration=s.iteration, model=s.model if s.HasField("model") else None
    ),
    "inference_finished": _inference_finished_from_proto,
    "tool_started": lambda t: ToolStarted(
        tool_use_id=t.tool_use_id, name=t.name, input=json_field(t, "input")
    ),
    "tool_finished": _tool_finished_from_proto,
    "log": _log_from_proto,
    "paused": lambda p: TurnPaused(iteration=p.iteration),
    "text_delta": lambda d: TextDelta(iteration=d.iteration, text=d.text, dropped_chars=d.dropped_chars),
    "workspace_blob": blob_from_proto,
    "workspace": snapshot_from_proto,
    "workspace_stopped": stopped_from_proto,
}
