"""Every golden vector of the Rust layer0 crate survives layer0 → protobuf bytes → layer0.

The vectors (tests/golden/vectors.jsonl, see tests/golden/SOURCE.md) are read as layer0
values, converted by airlock.wire, serialized, parsed, converted back and written as layer0
JSON again: the result must be the vector's exact bytes. Types that never cross the runner's
wire are listed, so a vector type that is neither carried nor listed fails the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from pydantic import TypeAdapter

import layer0
from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from layer0 import Handoff, Signal, SignalPayload, TurnInput

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
LINES = [line for line in (GOLDEN / "vectors.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]

ToProto = Callable[[Any], Message]
FromProto = Callable[[Any], Any]

#: How each layer0 type crosses the wire: to a message, and back from it. Ids and enums
#: travel inside the message that carries them.
MIRRORS: dict[str, tuple[ToProto, FromProto]] = {
    "AgentId": (
        lambda v: wire.effect_to_proto(Handoff(agent=v, state=None)),
        lambda m: wire.effect_from_proto(m).agent,
    ),
    "SessionId": (
        lambda v: wire.input_to_proto(TurnInput.new("", session=v)),
        lambda m: wire.input_from_proto(m).session,
    ),
    "WorkflowId": (
        lambda v: wire.effect_to_proto(Signal(target=v, payload=SignalPayload(signal_type="s", data=None))),
        lambda m: wire.effect_from_proto(m).target,
    ),
    "DurationMs": (wire.duration_to_proto, wire.duration_from_proto),
    "ImageSource": (lambda v: wire.image_to_proto(v, "image/png"), wire.image_source_from_proto),
    "ContentBlock": (wire.block_to_proto, wire.block_from_proto),
    "Content": (wire.content_to_proto, wire.content_from_proto),
    "TriggerType": (wire.trigger_to_proto, wire.trigger_from_proto),
    "TurnConfig": (wire.config_to_proto, wire.config_from_proto),
    "TurnInput": (wire.input_to_proto, wire.input_from_proto),
    "ExitReason": (wire.exit_reason_to_proto, wire.exit_reason_from_proto),
    "ToolCallRecord": (wire.tool_call_to_proto, wire.tool_call_from_proto),
    "TurnMetadata": (wire.metadata_to_proto, wire.metadata_from_proto),
    "TurnOutput": (wire.output_to_proto, wire.output_from_proto),
    "Scope": (wire.scope_to_proto, wire.scope_from_proto),
    "LogLevel": (
        lambda v: pb.Log(level=wire.LOG_LEVEL.to_proto(v)),
        lambda m: wire.LOG_LEVEL.from_proto(m.level),
    ),
    "SignalPayload": (wire.signal_payload_to_proto, wire.signal_payload_from_proto),
    "Effect": (wire.effect_to_proto, wire.effect_from_proto),
}

#: layer0 types the runner's wire does not carry (environment, hooks, budgets, events, search).
NOT_ON_THE_WIRE = frozenset(
    (
        "ScopeId",
        "NetworkAction",
        "NetworkRule",
        "NetworkPolicy",
        "IsolationBoundary",
        "CredentialInjection",
        "CredentialRef",
        "ResourceLimits",
        "EnvironmentSpec",
        "HookPoint",
        "HookContext",
        "HookAction",
        "BudgetDecision",
        "BudgetEvent",
        "CompactionEvent",
        "EventSource",
        "ObservableEvent",
        "SearchResult",
        "QueryPayload",
    )
)


def _record(line: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(line)
    return record


def _raw_json(line: str) -> str:
    """The exact bytes after ``"json":`` up to the line's closing brace."""
    start = line.index('"json":') + len('"json":')
    return line[start : line.rstrip().rindex("}")]


CARRIED = [line for line in LINES if _record(line)["type_name"] in MIRRORS]


def test_every_vector_type_is_carried_or_listed_as_not_on_the_wire() -> None:
    names = {_record(line)["type_name"] for line in LINES}
    assert not set(MIRRORS) & NOT_ON_THE_WIRE
    assert names == set(MIRRORS) | NOT_ON_THE_WIRE
    assert len(CARRIED) == 118  # of the 204 vectors


@pytest.mark.parametrize(
    "line", CARRIED, ids=[f"{_record(x)['type_name']}:{_record(x)['case']}" for x in CARRIED]
)
def test_vector_survives_the_wire_byte_for_byte(line: str) -> None:
    record = _record(line)
    adapter: TypeAdapter[Any] = TypeAdapter(getattr(layer0, record["type_name"]))
    value = adapter.validate_python(record["json"])
    to_proto, from_proto = MIRRORS[record["type_name"]]
    message = to_proto(value)
    parsed = type(message).FromString(message.SerializeToString())
    back = from_proto(parsed)
    assert back == value
    text = json.dumps(
        adapter.dump_python(back, mode="json", by_alias=True), separators=(",", ":"), ensure_ascii=False
    )
    assert text == _raw_json(line)
