"""layer0 TurnInput, TurnOutput, their parts, effects and state entries ↔ proto."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import JsonValue

from airlock._proto.runner.v1 import runner_pb2 as pb
from layer0 import (
    AgentId,
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    Handoff,
    Log,
    Scope,
    SessionId,
    Signal,
    SignalPayload,
    ToolCallRecord,
    TurnConfig,
    TurnInput,
    TurnMetadata,
    TurnOutput,
    WorkflowId,
    WriteMemory,
    decimal_to_str,
)

from ._content import content_from_proto, content_to_proto
from ._enums import LOG_LEVEL
from ._primitives import (
    decimal_from_text,
    decoder,
    duration_from_proto,
    duration_to_proto,
    json_field,
    json_to_proto,
    oneof,
    required,
)
from ._problems import located
from ._tagged import (
    exit_reason_from_proto,
    exit_reason_to_proto,
    scope_from_proto,
    scope_to_proto,
    trigger_from_proto,
    trigger_to_proto,
)

# ---------------------------------------------------------------------------------------------
# TurnInput


def config_to_proto(config: TurnConfig) -> pb.TurnConfig:
    """layer0 TurnConfig → proto (unset fields stay unset)."""
    message = pb.TurnConfig()
    if config.max_turns is not None:
        message.max_turns = config.max_turns
    if config.max_cost is not None:
        message.max_cost = decimal_to_str(config.max_cost)
    if config.max_duration is not None:
        message.max_duration.CopyFrom(duration_to_proto(config.max_duration))
    if config.model is not None:
        message.model = config.model
    if config.allowed_tools is not None:
        message.allowed_tools.SetInParent()
        message.allowed_tools.values.extend(config.allowed_tools)
    if config.system_addendum is not None:
        message.system_addendum = config.system_addendum
    return message


@decoder
def config_from_proto(message: pb.TurnConfig) -> TurnConfig:
    """proto → layer0 TurnConfig."""
    return TurnConfig(
        max_turns=message.max_turns if message.HasField("max_turns") else None,
        max_cost=decimal_from_text(message.max_cost, "max_cost") if message.HasField("max_cost") else None,
        max_duration=(
            duration_from_proto(message.max_duration) if message.HasField("max_duration") else None
        ),
        model=message.model if message.HasField("model") else None,
        allowed_tools=list(message.allowed_tools.values) if message.HasField("allowed_tools") else None,
        system_addendum=message.system_addendum if message.HasField("system_addendum") else None,
    )


def input_to_proto(value: TurnInput) -> pb.TurnInput:
    """layer0 TurnInput → proto."""
    message = pb.TurnInput(
        message=content_to_proto(value.message),
        trigger=trigger_to_proto(value.trigger),
        metadata=json_to_proto(value.metadata),
    )
    if value.session is not None:
        message.session = str(value.session)
    if value.config is not None:
        message.config.CopyFrom(config_to_proto(value.config))
    return message


@decoder
def input_from_proto(message: pb.TurnInput) -> TurnInput:
    """proto → layer0 TurnInput.

    Raises:
        MalformedMessage: the message or trigger is missing, or a field is invalid.
    """
    with located("message"):
        content = content_from_proto(required(message, "message"))
    with located("trigger"):
        trigger = trigger_from_proto(required(message, "trigger"))
    session = SessionId(message.session) if message.HasField("session") else None
    config = None
    if message.HasField("config"):
        with located("config"):
            config = config_from_proto(message.config)
    metadata = json_field(message, "metadata")
    return TurnInput(message=content, trigger=trigger, session=session, config=config, metadata=metadata)


# ---------------------------------------------------------------------------------------------
# Effects


def signal_payload_to_proto(payload: SignalPayload) -> pb.SignalPayload:
    """layer0 SignalPayload → proto."""
    return pb.SignalPayload(signal_type=payload.signal_type, data=json_to_proto(payload.data))


@decoder
def signal_payload_from_proto(message: pb.SignalPayload) -> SignalPayload:
    """proto → layer0 SignalPayload."""
    return SignalPayload(signal_type=message.signal_type, data=json_field(message, "data"))


def effect_to_proto(effect: Effect) -> pb.Effect:
    """One layer0 effect → proto."""
    if isinstance(effect, WriteMemory):
        return pb.Effect(
            write_memory=pb.WriteMemory(
                scope=scope_to_proto(effect.scope), key=effect.key, value=json_to_proto(effect.value)
            )
        )
    if isinstance(effect, DeleteMemory):
        return pb.Effect(delete_memory=pb.DeleteMemory(scope=scope_to_proto(effect.scope), key=effect.key))
    if isinstance(effect, Signal):
        payload = signal_payload_to_proto(effect.payload)
        return pb.Effect(signal=pb.Signal(target=str(effect.target), payload=payload))
    if isinstance(effect, Delegate):
        return pb.Effect(delegate=pb.Delegate(agent=str(effect.agent), input=input_to_proto(effect.input)))
    if isinstance(effect, Handoff):
        return pb.Effect(handoff=pb.Handoff(agent=str(effect.agent), state=json_to_proto(effect.state)))
    if isinstance(effect, Log):
        return pb.Effect(
            log=pb.Log(
                level=LOG_LEVEL.to_proto(effect.level),
                message=effect.message,
                data=json_to_proto(effect.data),
            )
        )
    return pb.Effect(custom=pb.CustomEffect(effect_type=effect.effect_type, data=json_to_proto(effect.data)))


@decoder
def effect_from_proto(message: pb.Effect) -> Effect:
    """proto → one layer0 effect."""
    kind = oneof(message, "kind")
    with located(kind):
        if kind == "write_memory":
            m = message.write_memory
            return WriteMemory(scope=_scope_field(m), key=m.key, value=json_field(m, "value"))
        if kind == "delete_memory":
            d = message.delete_memory
            return DeleteMemory(scope=_scope_field(d), key=d.key)
        if kind == "signal":
            s = message.signal
            with located("payload"):
                payload = signal_payload_from_proto(s.payload)
            return Signal(target=WorkflowId(s.target), payload=payload)
        if kind == "delegate":
            dg = message.delegate
            with located("input"):
                delegated = input_from_proto(required(dg, "input"))
            return Delegate(agent=AgentId(dg.agent), input=delegated)
        if kind == "handoff":
            h = message.handoff
            return Handoff(agent=AgentId(h.agent), state=json_field(h, "state"))
        if kind == "log":
            lg = message.log
            level = LOG_LEVEL.from_proto(lg.level, "level")
            return Log(level=level, message=lg.message, data=json_field(lg, "data"))
        c = message.custom
        return CustomEffect(effect_type=c.effect_type, data=json_field(c, "data"))


def _scope_field(message: Any) -> Scope:
    with located("scope"):
        return scope_from_proto(required(message, "scope"))


# ---------------------------------------------------------------------------------------------
# TurnOutput


def tool_call_to_proto(record: ToolCallRecord) -> pb.ToolCallRecord:
    """layer0 ToolCallRecord → proto."""
    return pb.ToolCallRecord(
        name=record.name, duration=duration_to_proto(record.duration), success=record.success
    )


def tool_call_from_proto(message: pb.ToolCallRecord) -> ToolCallRecord:
    """proto → layer0 ToolCallRecord."""
    return ToolCallRecord(
        name=message.name, duration=duration_from_proto(message.duration), success=message.success
    )


def metadata_to_proto(metadata: TurnMetadata) -> pb.TurnMetadata:
    """layer0 TurnMetadata → proto."""
    return pb.TurnMetadata(
        tokens_in=metadata.tokens_in,
        tokens_out=metadata.tokens_out,
        cost=decimal_to_str(metadata.cost),
        turns_used=metadata.turns_used,
        tools_called=[tool_call_to_proto(r) for r in metadata.tools_called],
        duration=duration_to_proto(metadata.duration),
    )


@decoder
def metadata_from_proto(message: pb.TurnMetadata) -> TurnMetadata:
    """proto → layer0 TurnMetadata (empty ``cost`` text reads as 0)."""
    return TurnMetadata(
        tokens_in=int(message.tokens_in),
        tokens_out=int(message.tokens_out),
        cost=decimal_from_text(message.cost or "0", "cost"),
        turns_used=int(message.turns_used),
        tools_called=[tool_call_from_proto(r) for r in message.tools_called],
        duration=duration_from_proto(message.duration),
    )


def output_to_proto(output: TurnOutput) -> pb.TurnOutput:
    """layer0 TurnOutput → proto."""
    return pb.TurnOutput(
        message=content_to_proto(output.message),
        exit_reason=exit_reason_to_proto(output.exit_reason),
        metadata=metadata_to_proto(output.metadata),
        effects=[effect_to_proto(e) for e in output.effects],
    )


@decoder
def output_from_proto(message: pb.TurnOutput) -> TurnOutput:
    """proto → layer0 TurnOutput.

    Raises:
        MalformedMessage: the message, exit reason or metadata is missing, or a field is invalid.
    """
    with located("message"):
        content = content_from_proto(required(message, "message"))
    with located("exit_reason"):
        exit_reason = exit_reason_from_proto(required(message, "exit_reason"))
    with located("metadata"):
        metadata = metadata_from_proto(required(message, "metadata"))
    effects = []
    for i, effect in enumerate(message.effects):
        with located(f"effects[{i}]"):
            effects.append(effect_from_proto(effect))
    return TurnOutput(message=content, exit_reason=exit_reason, metadata=metadata, effects=effects)


# ---------------------------------------------------------------------------------------------
# State snapshot


def state_to_proto(entries: Iterable[tuple[Scope, str, Any]]) -> list[pb.StateEntry]:
    """``(scope, key, value)`` entries → proto StateEntry list."""
    return [
        pb.StateEntry(scope=scope_to_proto(scope), key=key, value=json_to_proto(value))
        for scope, key, value in entries
    ]


def state_from_proto(entries: Iterable[pb.StateEntry]) -> list[tuple[Scope, str, JsonValue]]:
    """proto StateEntry list → ``(scope, key, value)`` entries (paths of problems: ``[i].…``)."""
    out: list[tuple[Scope, str, JsonValue]] = []
    for i, entry in enumerate(entries):
        with located(f"[{i}]"):
            out.append((_scope_field(entry), str(entry.key), json_field(entry, "value")))
    return out
