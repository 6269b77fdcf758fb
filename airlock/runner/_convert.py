"""Lossless conversions between layer0/airlock models and the runner's protobuf messages.

This is the only module that touches the generated types in ``airlock._proto``; nothing
outside ``airlock.runner`` sees a proto type.

Free JSON travels as JSON text (the ``Json`` message), not ``google.protobuf.Value``:
``Value`` holds every number as a double, which would turn ``1`` into ``1.0`` and cut
integers beyond 2**53. JSON text written with ``json.dumps`` and read with ``json.loads``
keeps ints (of any size), floats (``repr`` round-trips exactly), ``null`` and strings. NaN and
infinities are refused, as layer0 refuses them. Decimals travel as their plain text
(``decimal_to_str``), keeping the scale; durations as ``google.protobuf.Duration`` built from
whole milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from decimal import Decimal
from functools import wraps
from typing import Any, ParamSpec, TypeVar, cast

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from pydantic import JsonValue, ValidationError

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.errors import RunnerError, SpecError
from airlock.spec import AgentSpec
from airlock.turn import (
    InferenceFinished,
    InferenceStarted,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnLog,
    TurnPaused,
    TurnStarted,
)
from layer0 import (
    AgentId,
    Base64Source,
    Content,
    ContentBlock,
    CustomBlock,
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    ExitReason,
    Handoff,
    ImageBlock,
    Log,
    LogLevel,
    Scope,
    SessionId,
    Signal,
    SignalPayload,
    TextBlock,
    ToolCallRecord,
    ToolResultBlock,
    ToolUseBlock,
    TriggerType,
    TurnConfig,
    TurnError,
    TurnInput,
    TurnMetadata,
    TurnOutput,
    UrlSource,
    WorkflowId,
    WriteMemory,
    decimal_to_str,
)


class MalformedMessage(RunnerError):
    """Raised when a protobuf message cannot be read as the layer0 value it carries
    (a required field or ``oneof`` is missing, JSON text is invalid, a value is out of range)."""


_TURN_ERROR_KINDS: frozenset[str] = frozenset(
    ("model", "tool", "context_assembly", "retryable", "non_retryable", "other")
)

# ---------------------------------------------------------------------------------------------
# Primitives


_P = ParamSpec("_P")
_R = TypeVar("_R")
_M = TypeVar("_M", bound=Message)


def _decoder(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Map pydantic validation errors of a decoder to MalformedMessage."""

    @wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return func(*args, **kwargs)
        except ValidationError as e:
            raise MalformedMessage(f"invalid value: {e}") from e

    return wrapper


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def json_to_proto(value: Any) -> pb.Json:
    """Free JSON as a ``Json`` message (JSON text; NaN/infinity refused)."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise MalformedMessage(f"value is not JSON: {e}") from e
    return pb.Json(text=text)


def json_text(value: Any) -> str:
    """The JSON text ``json_to_proto`` would carry."""
    return str(json_to_proto(value).text)


def json_from_proto(message: pb.Json, *, present: bool = True) -> JsonValue:
    """The JSON value of a ``Json`` message; absent (or empty text) reads as ``None``."""
    if not present or not message.text:
        return None
    try:
        value: JsonValue = json.loads(message.text, parse_constant=_reject_constant)
    except ValueError as e:
        raise MalformedMessage(f"invalid JSON text: {e}") from e
    return value


def _json_field(message: Any, field: str) -> JsonValue:
    return json_from_proto(getattr(message, field), present=message.HasField(field))


def duration_to_proto(ms: int) -> Duration:
    """Whole milliseconds as a Duration."""
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_from_proto(duration: Duration) -> int:
    """A Duration as whole milliseconds (sub-millisecond parts are dropped)."""
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


def _decimal(text: str, what: str) -> Decimal:
    try:
        value = Decimal(text)
    except ArithmeticError as e:
        raise MalformedMessage(f"{what}: invalid decimal text {text!r}") from e
    if not value.is_finite():
        raise MalformedMessage(f"{what}: a decimal must be finite, got {text!r}")
    return value


def _oneof(message: Any, group: str, what: str) -> str:
    kind = message.WhichOneof(group)
    if kind is None:
        raise MalformedMessage(f"{what}: no variant set")
    return str(kind)


# ---------------------------------------------------------------------------------------------
# Content


def content_to_proto(content: Content) -> pb.Content:
    """layer0 Content → proto."""
    if isinstance(content.root, str):
        return pb.Content(text=content.root)
    return pb.Content(blocks=pb.ContentBlocks(blocks=[block_to_proto(b) for b in content.root]))


@_decoder
def content_from_proto(message: pb.Content) -> Content:
    """proto → layer0 Content."""
    kind = _oneof(message, "kind", "Content")
    if kind == "text":
        return Content(str(message.text))
    return Content([block_from_proto(b) for b in message.blocks.blocks])


def block_to_proto(block: ContentBlock) -> pb.ContentBlock:
    """One layer0 content block → proto."""
    if isinstance(block, TextBlock):
        return pb.ContentBlock(text=pb.TextBlock(text=block.text))
    if isinstance(block, ImageBlock):
        if isinstance(block.source, Base64Source):
            image = pb.ImageBlock(base64_data=block.source.data, media_type=block.media_type)
        else:
            image = pb.ImageBlock(url=block.source.url, media_type=block.media_type)
        return pb.ContentBlock(image=image)
    if isinstance(block, ToolUseBlock):
        return pb.ContentBlock(
            tool_use=pb.ToolUseBlock(id=block.id, name=block.name, input=json_to_proto(block.input))
        )
    if isinstance(block, ToolResultBlock):
        return pb.ContentBlock(
            tool_result=pb.ToolResultBlock(
                tool_use_id=block.tool_use_id, content=block.content, is_error=block.is_error
            )
        )
    return pb.ContentBlock(
        custom=pb.CustomBlock(content_type=block.content_type, data=json_to_proto(block.data))
    )


@_decoder
def block_from_proto(message: pb.ContentBlock) -> ContentBlock:
    """proto → one layer0 content block."""
    kind = _oneof(message, "kind", "ContentBlock")
    if kind == "text":
        return TextBlock(text=message.text.text)
    if kind == "image":
        image = message.image
        source_kind = _oneof(image, "source", "ImageBlock.source")
        source = (
            Base64Source(data=image.base64_data) if source_kind == "base64_data" else UrlSource(url=image.url)
        )
        return ImageBlock(source=source, media_type=image.media_type)
    if kind == "tool_use":
        use = message.tool_use
        return ToolUseBlock(id=use.id, name=use.name, input=_json_field(use, "input"))
    if kind == "tool_result":
        result = message.tool_result
        return ToolResultBlock(
            tool_use_id=result.tool_use_id, content=result.content, is_error=result.is_error
        )
    custom = message.custom
    return CustomBlock(content_type=custom.content_type, data=_json_field(custom, "data"))


# ---------------------------------------------------------------------------------------------
# Externally tagged enums


def _with_variant(message: _M, variant: str) -> _M:
    """Select a unit (``Empty``) or message variant of ``message``'s oneof."""
    getattr(message, variant).SetInParent()
    return message


def trigger_to_proto(trigger: TriggerType) -> pb.TriggerType:
    """layer0 TriggerType → proto."""
    if trigger.kind == "custom":
        return pb.TriggerType(custom=trigger.custom_name or "")
    return _with_variant(pb.TriggerType(), trigger.kind)


@_decoder
def trigger_from_proto(message: pb.TriggerType) -> TriggerType:
    """proto → layer0 TriggerType."""
    kind = _oneof(message, "kind", "TriggerType")
    if kind == "custom":
        return TriggerType.custom(message.custom)
    return TriggerType.model_validate(kind)


def exit_reason_to_proto(reason: ExitReason) -> pb.ExitReason:
    """layer0 ExitReason → proto."""
    if reason.kind == "custom":
        return pb.ExitReason(custom=reason.custom_name or "")
    message = _with_variant(pb.ExitReason(), reason.kind)
    if reason.kind in ("observer_halt", "safety_stop"):
        getattr(message, reason.kind).reason = reason.reason or ""
    return message


@_decoder
def exit_reason_from_proto(message: pb.ExitReason) -> ExitReason:
    """proto → layer0 ExitReason."""
    kind = _oneof(message, "kind", "ExitReason")
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
        return _with_variant(pb.Scope(), "global")
    return pb.Scope(custom=scope.custom_name or "")


@_decoder
def scope_from_proto(message: pb.Scope) -> Scope:
    """proto → layer0 Scope."""
    kind = _oneof(message, "kind", "Scope")
    if kind == "session":
        return Scope.session(message.session)
    if kind == "workflow":
        return Scope.workflow(message.workflow)
    if kind == "agent":
        return Scope.agent(message.agent.workflow, message.agent.agent)
    if kind == "global":
        return Scope.global_()
    return Scope.custom(message.custom)


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


@_decoder
def config_from_proto(message: pb.TurnConfig) -> TurnConfig:
    """proto → layer0 TurnConfig."""
    return TurnConfig(
        max_turns=message.max_turns if message.HasField("max_turns") else None,
        max_cost=_decimal(message.max_cost, "max_cost") if message.HasField("max_cost") else None,
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


@_decoder
def input_from_proto(message: pb.TurnInput) -> TurnInput:
    """proto → layer0 TurnInput.

    Raises:
        MalformedMessage: the message or trigger is missing, or a field is invalid.
    """
    if not message.HasField("message"):
        raise MalformedMessage("TurnInput.message is required")
    if not message.HasField("trigger"):
        raise MalformedMessage("TurnInput.trigger is required")
    content = content_from_proto(message.message)
    trigger = trigger_from_proto(message.trigger)
    session = SessionId(message.session) if message.HasField("session") else None
    config = config_from_proto(message.config) if message.HasField("config") else None
    metadata = _json_field(message, "metadata")
    return TurnInput(message=content, trigger=trigger, session=session, config=config, metadata=metadata)


# ---------------------------------------------------------------------------------------------
# Effects


_LOG_LEVELS: dict[LogLevel, int] = {
    LogLevel.TRACE: pb.LOG_LEVEL_TRACE,
    LogLevel.DEBUG: pb.LOG_LEVEL_DEBUG,
    LogLevel.INFO: pb.LOG_LEVEL_INFO,
    LogLevel.WARN: pb.LOG_LEVEL_WARN,
    LogLevel.ERROR: pb.LOG_LEVEL_ERROR,
}
_LOG_LEVELS_BACK: dict[int, LogLevel] = {v: k for k, v in _LOG_LEVELS.items()}


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
        payload = pb.SignalPayload(
            signal_type=effect.payload.signal_type, data=json_to_proto(effect.payload.data)
        )
        return pb.Effect(signal=pb.Signal(target=str(effect.target), payload=payload))
    if isinstance(effect, Delegate):
        return pb.Effect(delegate=pb.Delegate(agent=str(effect.agent), input=input_to_proto(effect.input)))
    if isinstance(effect, Handoff):
        return pb.Effect(handoff=pb.Handoff(agent=str(effect.agent), state=json_to_proto(effect.state)))
    if isinstance(effect, Log):
        return pb.Effect(
            log=pb.Log(
                level=cast(Any, _LOG_LEVELS[effect.level]),
                message=effect.message,
                data=json_to_proto(effect.data),
            )
        )
    return pb.Effect(custom=pb.CustomEffect(effect_type=effect.effect_type, data=json_to_proto(effect.data)))


@_decoder
def effect_from_proto(message: pb.Effect) -> Effect:
    """proto → one layer0 effect."""
    kind = _oneof(message, "kind", "Effect")
    if kind == "write_memory":
        m = message.write_memory
        return WriteMemory(scope=_scope_field(m), key=m.key, value=_json_field(m, "value"))
    if kind == "delete_memory":
        d = message.delete_memory
        return DeleteMemory(scope=_scope_field(d), key=d.key)
    if kind == "signal":
        s = message.signal
        payload = SignalPayload(signal_type=s.payload.signal_type, data=_json_field(s.payload, "data"))
        return Signal(target=WorkflowId(s.target), payload=payload)
    if kind == "delegate":
        dg = message.delegate
        if not dg.HasField("input"):
            raise MalformedMessage("Delegate.input is required")
        return Delegate(agent=AgentId(dg.agent), input=input_from_proto(dg.input))
    if kind == "handoff":
        h = message.handoff
        return Handoff(agent=AgentId(h.agent), state=_json_field(h, "state"))
    if kind == "log":
        lg = message.log
        level = _LOG_LEVELS_BACK.get(lg.level)
        if level is None:
            raise MalformedMessage(f"Log.level: unknown level {lg.level}")
        return Log(level=level, message=lg.message, data=_json_field(lg, "data"))
    c = message.custom
    return CustomEffect(effect_type=c.effect_type, data=_json_field(c, "data"))


def _scope_field(message: Any) -> Scope:
    if not message.HasField("scope"):
        raise MalformedMessage("scope is required")
    return scope_from_proto(message.scope)


# ---------------------------------------------------------------------------------------------
# TurnOutput


def metadata_to_proto(metadata: TurnMetadata) -> pb.TurnMetadata:
    """layer0 TurnMetadata → proto."""
    return pb.TurnMetadata(
        tokens_in=metadata.tokens_in,
        tokens_out=metadata.tokens_out,
        cost=decimal_to_str(metadata.cost),
        turns_used=metadata.turns_used,
        tools_called=[
            pb.ToolCallRecord(name=r.name, duration=duration_to_proto(r.duration), success=r.success)
            for r in metadata.tools_called
        ],
        duration=duration_to_proto(metadata.duration),
    )


@_decoder
def metadata_from_proto(message: pb.TurnMetadata) -> TurnMetadata:
    """proto → layer0 TurnMetadata."""
    records = [
        ToolCallRecord(name=r.name, duration=duration_from_proto(r.duration), success=r.success)
        for r in message.tools_called
    ]
    return TurnMetadata(
        tokens_in=int(message.tokens_in),
        tokens_out=int(message.tokens_out),
        cost=_decimal(message.cost or "0", "TurnMetadata.cost"),
        turns_used=int(message.turns_used),
        tools_called=records,
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


@_decoder
def output_from_proto(message: pb.TurnOutput) -> TurnOutput:
    """proto → layer0 TurnOutput.

    Raises:
        MalformedMessage: the message, exit reason or metadata is missing, or a field is invalid.
    """
    for field in ("message", "exit_reason", "metadata"):
        if not message.HasField(field):
            raise MalformedMessage(f"TurnOutput.{field} is required")
    return TurnOutput(
        message=content_from_proto(message.message),
        exit_reason=exit_reason_from_proto(message.exit_reason),
        metadata=metadata_from_proto(message.metadata),
        effects=[effect_from_proto(e) for e in message.effects],
    )


# ---------------------------------------------------------------------------------------------
# State snapshot


def state_to_proto(entries: Iterable[tuple[Scope, str, Any]]) -> list[pb.StateEntry]:
    """``(scope, key, value)`` entries → proto StateEntry list."""
    return [
        pb.StateEntry(scope=scope_to_proto(scope), key=key, value=json_to_proto(value))
        for scope, key, value in entries
    ]


@_decoder
def state_from_proto(entries: Iterable[pb.StateEntry]) -> list[tuple[Scope, str, JsonValue]]:
    """proto StateEntry list → ``(scope, key, value)`` entries."""
    return [(_scope_field(e), str(e.key), _json_field(e, "value")) for e in entries]


# ---------------------------------------------------------------------------------------------
# AgentSpec

#: The AgentSpec/ProviderSpec fields this module carries; a test fails when the models grow.
AGENT_SPEC_FIELDS = frozenset(
    ("name", "provider", "system", "tools", "tool_options", "context", "defaults", "hooks", "limits")
)
PROVIDER_SPEC_FIELDS = frozenset(
    (
        "kind",
        "model",
        "base_url",
        "api_key_env",
        "script",
        "max_tokens",
        "temperature",
        "timeout_s",
        "max_retries",
        "price_per_mtok_in",
        "price_per_mtok_out",
    )
)


def spec_to_proto(spec: AgentSpec) -> pb.AgentSpec:
    """AgentSpec → proto (every field set explicitly, defaults included)."""
    p = spec.provider
    provider = pb.ProviderSpec(
        kind=p.kind,
        script=json_to_proto(p.script),
        max_tokens=p.max_tokens,
        timeout_s=p.timeout_s,
        max_retries=p.max_retries,
    )
    for name in ("model", "base_url", "api_key_env", "temperature"):
        if getattr(p, name) is not None:
            setattr(provider, name, getattr(p, name))
    for name in ("price_per_mtok_in", "price_per_mtok_out"):
        price = getattr(p, name)
        if price is not None:
            setattr(provider, name, decimal_to_str(price))
    message = pb.AgentSpec(
        name=spec.name,
        provider=provider,
        system=spec.system,
        tools=list(spec.tools),
        context=pb.ContextSpec(
            strategy=spec.context.strategy,
            max_tokens=spec.context.max_tokens,
            keep_last=spec.context.keep_last,
        ),
        defaults=config_to_proto(spec.defaults),
        tool_options=[
            pb.ToolOptions(tool=tool, options=json_to_proto(options))
            for tool, options in spec.tool_options.items()
        ],
        hooks=[pb.HookSpec(name=h.name, options=json_to_proto(h.options)) for h in spec.hooks],
        limits=pb.LoopLimits(
            circuit_breaker_threshold=spec.limits.circuit_breaker_threshold,
            stuck_threshold=spec.limits.stuck_threshold,
        ),
    )
    return message


def _present(message: Any, names: Iterable[str]) -> dict[str, Any]:
    return {name: getattr(message, name) for name in names if message.HasField(name)}


def spec_from_proto(message: pb.AgentSpec) -> AgentSpec:
    """proto → AgentSpec, validated like any AgentSpec.

    Raises:
        SpecError: the spec is invalid (unknown provider or tool, bad values, missing
            provider); the message is the validation message.
    """
    if not message.HasField("provider"):
        raise SpecError("invalid agent spec: provider is required")
    p = message.provider
    try:
        provider: dict[str, Any] = {"kind": p.kind, "script": _json_field(p, "script")}
        provider.update(
            _present(p, ("model", "base_url", "api_key_env", "max_tokens", "temperature", "timeout_s"))
        )
        provider.update(_present(p, ("max_retries", "price_per_mtok_in", "price_per_mtok_out")))
        data: dict[str, Any] = {
            "name": message.name,
            "provider": provider,
            "system": message.system,
            "tools": list(message.tools),
            "tool_options": {t.tool: _json_field(t, "options") for t in message.tool_options},
            "hooks": [{"name": h.name, "options": _json_field(h, "options") or {}} for h in message.hooks],
        }
        if message.HasField("context"):
            data["context"] = _present(message.context, ("strategy", "max_tokens", "keep_last"))
        if message.HasField("defaults"):
            data["defaults"] = config_from_proto(message.defaults)
        if message.HasField("limits"):
            data["limits"] = _present(message.limits, ("circuit_breaker_threshold", "stuck_threshold"))
    except MalformedMessage as e:
        raise SpecError(f"invalid agent spec: {e}") from e
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as e:
        raise SpecError(f"invalid agent spec: {e}") from e


# ---------------------------------------------------------------------------------------------
# Events


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (on a character boundary)."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", errors="ignore"), True


def event_to_proto(event: TurnEvent, *, payload_limit: int) -> pb.TurnEvent | None:
    """A turn event → proto; tool input/output longer than ``payload_limit`` bytes is cut.

    Returns None for an event type this wire version does not carry.
    """
    if isinstance(event, TurnStarted):
        return pb.TurnEvent(started=pb.TurnStarted())
    if isinstance(event, InferenceStarted):
        started = pb.InferenceStarted(iteration=event.iteration)
        if event.model is not None:
            started.model = event.model
        return pb.TurnEvent(inference_started=started)
    if isinstance(event, InferenceFinished):
        finished = pb.InferenceFinished(
            iteration=event.iteration,
            stop_reason=event.stop_reason,
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
    if isinstance(event, ToolStarted):
        text = json_text(event.input)
        cut, truncated = _cut(text, payload_limit)
        payload = json_to_proto(cut) if truncated else pb.Json(text=text)
        return pb.TurnEvent(
            tool_started=pb.ToolStarted(
                tool_use_id=event.tool_use_id, name=event.name, input=payload, input_truncated=truncated
            )
        )
    if isinstance(event, ToolFinished):
        output, truncated = _cut(event.output, payload_limit)
        return pb.TurnEvent(
            tool_finished=pb.ToolFinished(
                tool_use_id=event.tool_use_id,
                name=event.name,
                duration=duration_to_proto(event.duration_ms),
                success=event.success,
                output=output,
                output_truncated=truncated,
            )
        )
    if isinstance(event, TurnLog):
        return pb.TurnEvent(log=pb.TurnLogEvent(level=event.level, message=event.message))
    if isinstance(event, TurnPaused):
        return pb.TurnEvent(paused=pb.TurnPaused(iteration=event.iteration))
    return None


def output_event(output: TurnOutput) -> pb.TurnEvent:
    """The final ``output`` event."""
    return pb.TurnEvent(output=output_to_proto(output))


def error_event(kind: str, message: str, tool_name: str | None = None) -> pb.TurnEvent:
    """The final ``error`` event."""
    failed = pb.TurnFailed(kind=kind, message=message)
    if tool_name is not None:
        failed.tool_name = tool_name
    return pb.TurnEvent(error=failed)


def turn_error_from_proto(message: pb.TurnFailed) -> TurnError:
    """The TurnError an ``error`` event carries (an unknown kind becomes ``other``)."""
    kind = message.kind if message.kind in _TURN_ERROR_KINDS else "other"
    tool_name = message.tool_name if message.HasField("tool_name") else None
    return TurnError(cast(Any, kind), message.message, tool_name=tool_name)


@_decoder
def event_from_proto(message: pb.TurnEvent) -> TurnEvent | TurnOutput | TurnError:
    """A proto event → a turn event, the final TurnOutput, or the final TurnError."""
    kind = _oneof(message, "kind", "TurnEvent")
    if kind == "output":
        return output_from_proto(message.output)
    if kind == "error":
        return turn_error_from_proto(message.error)
    if kind == "started":
        return TurnStarted()
    if kind == "inference_started":
        s = message.inference_started
        return InferenceStarted(iteration=s.iteration, model=s.model if s.HasField("model") else None)
    if kind == "inference_finished":
        f = message.inference_finished
        return InferenceFinished(
            iteration=f.iteration,
            stop_reason=f.stop_reason,
            tokens_in=f.tokens_in,
            tokens_out=f.tokens_out,
            cost=_decimal(f.cost, "cost") if f.HasField("cost") else None,
            total_tokens_in=f.total_tokens_in,
            total_tokens_out=f.total_tokens_out,
            total_cost=_decimal(f.total_cost or "0", "total_cost"),
            duration_ms=duration_from_proto(f.duration),
        )
    if kind == "tool_started":
        t = message.tool_started
        return ToolStarted(tool_use_id=t.tool_use_id, name=t.name, input=_json_field(t, "input"))
    if kind == "tool_finished":
        t2 = message.tool_finished
        return ToolFinished(
            tool_use_id=t2.tool_use_id,
            name=t2.name,
            duration_ms=duration_from_proto(t2.duration),
            success=t2.success,
            output=t2.output,
        )
    if kind == "log":
        return TurnLog(level=message.log.level, message=message.log.message)
    return TurnPaused(iteration=message.paused.iteration)
