"""layer0/airlock ↔ proto conversions (airlock.wire) are lossless: property tests over arbitrary
values; malformed messages are refused with located problems."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.spec import (
    AgentSpec,
    ApprovalGate,
    ArtifactSpec,
    ContextSpec,
    HookSpec,
    LoopLimits,
    McpServerSpec,
    ProviderSpec,
    ServerCompaction,
)
from airlock.turn import (
    ToolFinished,
    ToolStarted,
    TurnLog,
)
from layer0 import (
    Base64Source,
    Content,
    CustomBlock,
    CustomEffect,
    Delegate,
    DeleteMemory,
    ExitReason,
    Handoff,
    ImageBlock,
    Log,
    LogLevel,
    Scope,
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
    WriteMemory,
)
from tests.support.events import TURN_EVENTS

text = st.text(max_size=20)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**80), 2**80)  # beyond int64 and 2**53: must survive exactly
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=12,
)


@st.composite
def decimals(draw: st.DrawFn) -> Decimal:
    """rust_decimal-range Decimals with an explicit scale (``1.50`` keeps its zero)."""
    mantissa = draw(st.integers(-(2**96 - 1), 2**96 - 1))
    scale = draw(st.integers(0, 28))
    digits = tuple(int(d) for d in str(abs(mantissa)))
    return Decimal((int(mantissa < 0), digits, -scale))  # exact: no context rounding


scopes = st.one_of(
    text.map(Scope.session),
    text.map(Scope.workflow),
    st.builds(Scope.agent, text, text),
    st.just(Scope.global_()),
    text.map(Scope.custom),
)
triggers = st.one_of(
    st.sampled_from(
        [
            TriggerType.user(),
            TriggerType.task(),
            TriggerType.signal(),
            TriggerType.schedule(),
            TriggerType.system_event(),
        ]
    ),
    text.map(TriggerType.custom),
)
exit_reasons = st.one_of(
    st.sampled_from(
        [
            ExitReason.complete(),
            ExitReason.max_turns(),
            ExitReason.budget_exhausted(),
            ExitReason.circuit_breaker(),
            ExitReason.timeout(),
            ExitReason.error(),
        ]
    ),
    text.map(ExitReason.observer_halt),
    text.map(ExitReason.safety_stop),
    text.map(ExitReason.custom),
)
blocks = st.one_of(
    st.builds(TextBlock, text=text),
    st.builds(
        ImageBlock,
        source=st.one_of(st.builds(Base64Source, data=text), st.builds(UrlSource, url=text)),
        media_type=text,
    ),
    st.builds(ToolUseBlock, id=text, name=text, input=json_values),
    st.builds(ToolResultBlock, tool_use_id=text, content=text, is_error=st.booleans()),
    st.builds(CustomBlock, content_type=text, data=json_values),
)
contents = st.one_of(text.map(Content), st.lists(blocks, max_size=4).map(Content))
configs = st.builds(
    TurnConfig,
    max_turns=st.none() | u32,
    max_cost=st.none() | decimals(),
    max_duration=st.none() | u64,
    model=st.none() | text,
    allowed_tools=st.none() | st.lists(text, max_size=3),
    system_addendum=st.none() | text,
)
inputs = st.builds(
    TurnInput,
    message=contents,
    trigger=triggers,
    session=st.none() | text,
    config=st.none() | configs,
    metadata=json_values,
)
effects = st.one_of(
    st.builds(WriteMemory, scope=scopes, key=text, value=json_values),
    st.builds(DeleteMemory, scope=scopes, key=text),
    st.builds(Signal, target=text, payload=st.builds(SignalPayload, signal_type=text, data=json_values)),
    st.builds(Delegate, agent=text, input=inputs),
    st.builds(Handoff, agent=text, state=json_values),
    st.builds(Log, level=st.sampled_from(list(LogLevel)), message=text, data=json_values),
    st.builds(CustomEffect, effect_type=text, data=json_values),
)
metadatas = st.builds(
    TurnMetadata,
    tokens_in=u64,
    tokens_out=u64,
    cost=decimals(),
    turns_used=u32,
    tools_called=st.lists(
        st.builds(ToolCallRecord, name=text, duration=u64, success=st.booleans()), max_size=3
    ),
    duration=u64,
)
outputs = st.builds(
    TurnOutput,
    message=contents,
    exit_reason=exit_reasons,
    metadata=metadatas,
    effects=st.lists(effects, max_size=4),
)

_settings = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same(a: Any, b: Any) -> None:
    """Equal as values AND as wire JSON (catches 1 vs 1.0 and lost Decimal scale)."""
    assert a == b
    assert a.model_dump_json() == b.model_dump_json()


@_settings
@given(inputs)
def test_turn_input_round_trips(value: TurnInput) -> None:
    data = wire.input_to_proto(value).SerializeToString()
    _same(wire.input_from_proto(pb.TurnInput.FromString(data)), value)


@_settings
@given(outputs)
def test_turn_output_round_trips(value: TurnOutput) -> None:
    data = wire.output_to_proto(value).SerializeToString()
    _same(wire.output_from_proto(pb.TurnOutput.FromString(data)), value)


@_settings
@given(st.lists(st.tuples(scopes, text, json_values), max_size=5))
def test_state_entries_round_trip(entries: list[tuple[Scope, str, Any]]) -> None:
    messages = [pb.StateEntry.FromString(m.SerializeToString()) for m in wire.state_to_proto(entries)]
    back = wire.state_from_proto(messages)
    assert back == entries
    assert [repr(v) for *_, v in back] == [repr(v) for *_, v in entries]  # int stays int


def test_ints_and_floats_keep_their_type() -> None:
    value = {"i": 1, "f": 1.0, "big": 2**70, "neg0": -0.0, "n": None, "s": "ünï €"}
    back = wire.json_from_proto(pb.Json.FromString(wire.json_to_proto(value).SerializeToString()))
    assert back == value
    assert isinstance(back, dict)
    assert type(back["i"]) is int and type(back["f"]) is float and back["big"] == 2**70
    assert repr(back["neg0"]) == "-0.0"


def test_decimal_scale_survives() -> None:
    out = TurnOutput.new("x").model_copy(
        update={"metadata": TurnMetadata.empty().model_copy(update={"cost": Decimal("0.012300")})}
    )
    back = wire.output_from_proto(wire.output_to_proto(out))
    assert str(back.metadata.cost) == "0.012300"


def test_nan_is_refused() -> None:
    with pytest.raises(wire.MalformedMessage):
        wire.json_to_proto(float("nan"))
    with pytest.raises(wire.MalformedMessage):
        wire.json_from_proto(pb.Json(text="NaN"))


def test_missing_required_fields_are_malformed() -> None:
    with pytest.raises(wire.MalformedMessage) as e:
        wire.input_from_proto(pb.TurnInput(trigger=wire.trigger_to_proto(TriggerType.user())))
    assert str(e.value) == "message: required"
    with pytest.raises(wire.MalformedMessage) as e:
        wire.input_from_proto(pb.TurnInput(message=pb.Content(), trigger=pb.TriggerType()))
    assert str(e.value) == "message: no variant of 'kind' set"
    with pytest.raises(wire.MalformedMessage, match="invalid JSON"):
        wire.json_from_proto(pb.Json(text="{"))


def test_problems_are_located_deep_in_the_message() -> None:
    bad_block = pb.ContentBlock(tool_use=pb.ToolUseBlock(id="t", name="n", input=pb.Json(text="{oops")))
    message = pb.TurnInput(
        message=pb.Content(
            blocks=pb.ContentBlocks(blocks=[pb.ContentBlock(text=pb.TextBlock(text="ok")), bad_block])
        ),
        trigger=wire.trigger_to_proto(TriggerType.user()),
    )
    with pytest.raises(wire.MalformedMessage) as e:
        wire.input_from_proto(message)
    assert str(e.value).startswith("message.blocks[1].tool_use.input: invalid JSON text: ")
    output = wire.output_to_proto(TurnOutput.new("x"))
    output.effects.add().log.SetInParent()  # level unspecified
    output.effects.add().delegate.agent = "b"  # input missing
    with pytest.raises(wire.MalformedMessage) as e:
        wire.output_from_proto(output)
    assert str(e.value).startswith("effects[0].log.level: required (got LOG_LEVEL_UNSPECIFIED); valid: ")
    output.effects[0].log.level = pb.LOG_LEVEL_INFO
    with pytest.raises(wire.MalformedMessage) as e:
        wire.output_from_proto(output)
    assert str(e.value) == "effects[1].delegate.input: required"


# --- AgentSpec -------------------------------------------------------------------------------


def test_agent_spec_fields_are_all_carried() -> None:
    """Fails when AgentSpec/ProviderSpec grow a field the converter does not carry yet."""
    assert set(AgentSpec.model_fields) == wire.AGENT_SPEC_FIELDS
    assert set(ProviderSpec.model_fields) == wire.PROVIDER_SPEC_FIELDS


agent_specs = st.builds(
    AgentSpec,
    name=st.text(min_size=1, max_size=10),
    provider=st.builds(
        ProviderSpec,
        kind=st.sampled_from(["anthropic", "openai_compat", "scripted"]),
        model=st.none() | text,
        base_url=st.none() | text,
        api_key_env=st.none() | text,
        script=st.none()
        | text
        | st.lists(json_values, max_size=3)
        | st.dictionaries(text, json_values, max_size=3),
        max_tokens=st.integers(1, 2**32 - 1),
        temperature=st.none() | st.floats(0, 2),
        timeout_s=st.integers(1, 10**9).map(lambda ms: ms / 1000),  # a Duration
        max_retries=st.integers(0, 10),
        price_per_mtok_in=st.none() | decimals().map(Decimal.copy_abs),
        price_per_mtok_out=st.none() | decimals().map(Decimal.copy_abs),
        tool_choice_first=st.sampled_from(["auto", "required"]),
        tool_choice_after_failure=st.sampled_from(["auto", "required"]),
        parallel_tool_calls=st.none() | st.booleans(),
    ),
    system=text,
    tools=st.lists(st.sampled_from(["bash", "read_file", "calculator", "write_memory"]), unique=True),
    tool_options=st.dictionaries(text, st.dictionaries(text, json_values, max_size=3), max_size=3),
    context=st.builds(
        ContextSpec,
        strategy=st.sampled_from(["none", "sliding_window", "summarization", "composite"]),
        max_tokens=st.integers(1, 10**7),
        keep_last=st.integers(1, 1000),
    ),
    defaults=configs,
    hooks=st.lists(
        st.builds(
            HookSpec,
            name=st.sampled_from(["budget", "logging"]),
            options=st.dictionaries(text, json_values, max_size=3),
        ),
        max_size=2,
    ),
    approval=st.none()
    | st.builds(
        ApprovalGate,
        tools=st.lists(text, max_size=2),
        risks=st.lists(st.sampled_from(["destructive", "external"]), unique=True),
    ),
    limits=st.builds(
        LoopLimits, circuit_breaker_threshold=st.integers(1, 50), stuck_threshold=st.integers(2, 50)
    ),
)


@_settings
@given(agent_specs)
def test_agent_spec_round_trips(spec: AgentSpec) -> None:
    data = wire.spec_to_proto(spec).SerializeToString()
    back = wire.spec_from_proto(pb.AgentSpec.FromString(data))
    assert back == spec
    assert back.model_dump_json() == spec.model_dump_json()


def test_agent_spec_defaults_apply_when_absent() -> None:
    spec = wire.spec_from_proto(
        pb.AgentSpec(name="a", provider=pb.ProviderSpec(kind=pb.PROVIDER_KIND_SCRIPTED))
    )
    assert spec == AgentSpec(name="a", provider=ProviderSpec(kind="scripted"))
    with_context = pb.AgentSpec(
        name="a",
        provider=pb.ProviderSpec(kind=pb.PROVIDER_KIND_SCRIPTED),
        context=pb.ContextSpec(keep_last=3),
    )
    assert wire.spec_from_proto(with_context).context == ContextSpec(strategy="none", keep_last=3)


def _problems(message: pb.AgentSpec) -> list[str]:
    with pytest.raises(wire.MalformedMessage) as e:
        wire.spec_from_proto(message)
    return str(e.value).splitlines()


def test_invalid_agent_spec_names_each_problem_on_its_own_line() -> None:
    scripted = pb.ProviderSpec(kind=pb.PROVIDER_KIND_SCRIPTED)
    valid = (
        "valid: PROVIDER_KIND_ANTHROPIC, PROVIDER_KIND_OPENAI_COMPAT, "
        "PROVIDER_KIND_SCRIPTED, PROVIDER_KIND_COMMAND, PROVIDER_KIND_CUSTOM"
    )
    assert _problems(pb.AgentSpec(name="a", provider=pb.ProviderSpec(kind=99))) == [
        f"provider.kind: unknown provider kind 99; {valid}"
    ]
    assert _problems(pb.AgentSpec(name="a", provider=pb.ProviderSpec())) == [
        f"provider.kind: required (got PROVIDER_KIND_UNSPECIFIED); {valid}"
    ]
    assert _problems(pb.AgentSpec(name="a")) == ["provider: required"]
    [tools] = _problems(pb.AgentSpec(name="a", provider=scripted, tools=["rm_rf"]))
    assert tools.startswith("tools: unknown tool(s) rm_rf; valid tools: bash, calculator, ")
    several = pb.AgentSpec(
        name="",
        provider=pb.ProviderSpec(kind=pb.PROVIDER_KIND_SCRIPTED, price_per_mtok_in="lots"),
        context=pb.ContextSpec(strategy=pb.CONTEXT_STRATEGY_UNSPECIFIED),
        limits=pb.LoopLimits(stuck_threshold=1),
    )
    # Enum problems are reported first (the spec cannot be built without them) ...
    assert _problems(several) == [
        "context.strategy: required (got CONTEXT_STRATEGY_UNSPECIFIED); valid: CONTEXT_STRATEGY_NONE, "
        "CONTEXT_STRATEGY_SLIDING_WINDOW, CONTEXT_STRATEGY_SUMMARIZATION, CONTEXT_STRATEGY_COMPOSITE, "
        "CONTEXT_STRATEGY_CAUSAL_CONE, CONTEXT_STRATEGY_CUSTOM"
    ]
    several.context.strategy = pb.CONTEXT_STRATEGY_COMPOSITE
    # ... then every validation problem at once, without pydantic's URLs or class names.
    lines = _problems(several)
    assert lines == [
        "name: String should have at least 1 character",
        "provider.price_per_mtok_in: Input should be a valid decimal",
        "limits.stuck_threshold: Input should be greater than 1",
    ]
    twice = pb.AgentSpec(name="a", provider=scripted)
    twice.tool_options.add(tool="bash", options=wire.json_to_proto({}))
    twice.tool_options.add(tool="bash", options=pb.Json(text="{"))
    assert [line.split(":")[0] for line in _problems(twice)] == [
        "tool_options[1].tool",
        "tool_options[1].options",
    ]


def test_zero_counts_and_durations_mean_the_default() -> None:
    zeros = pb.AgentSpec(
        name="a",
        provider=pb.ProviderSpec(
            kind=pb.PROVIDER_KIND_SCRIPTED,
            max_tokens=0,
            timeout=Duration(),
            compaction=pb.ServerCompaction(trigger_tokens=0),
        ),
        context=pb.ContextSpec(max_tokens=0, keep_last=0),
        limits=pb.LoopLimits(circuit_breaker_threshold=0, stuck_threshold=0),
        artifacts=pb.ArtifactSpec(max_files=0, max_file_bytes=0, max_total_bytes=0),
    )
    spec = wire.spec_from_proto(zeros)
    assert spec.provider == ProviderSpec(kind="scripted", compaction=ServerCompaction())
    assert (spec.context, spec.limits, spec.artifacts) == (ContextSpec(), LoopLimits(), ArtifactSpec())


def test_timeouts_are_durations_and_closed_sets_enums_on_the_wire() -> None:
    spec = AgentSpec(
        name="a",
        provider=ProviderSpec(
            kind="scripted", timeout_s=2.5, tool_choice_first="required", tool_choice_after_failure="auto"
        ),
        tools=["bash"],
        mcp_servers=[
            McpServerSpec(name="local", transport="stdio", command=["srv"], startup_timeout_s=0.25),
            McpServerSpec(name="web", transport="http", url="http://127.0.0.1:1/mcp", call_timeout_s=90),
        ],
    )
    message = wire.spec_to_proto(spec)
    assert (message.provider.timeout.seconds, message.provider.timeout.nanos) == (2, 500_000_000)
    assert message.provider.tool_choice_first == pb.TOOL_CHOICE_REQUIRED
    assert message.provider.tool_choice_after_failure == pb.TOOL_CHOICE_AUTO
    assert [m.transport for m in message.mcp_servers] == [pb.MCP_TRANSPORT_STDIO, pb.MCP_TRANSPORT_HTTP]
    assert message.mcp_servers[0].startup_timeout.nanos == 250_000_000
    assert message.mcp_servers[1].call_timeout.seconds == 90
    assert wire.spec_from_proto(pb.AgentSpec.FromString(message.SerializeToString())) == spec


def test_unknown_enum_numbers_and_negative_durations_name_their_field() -> None:
    message = pb.AgentSpec(
        name="a",
        provider=pb.ProviderSpec(
            kind=pb.PROVIDER_KIND_SCRIPTED, tool_choice_after_failure=7, timeout=Duration(seconds=-1)
        ),
        mcp_servers=[pb.McpServer(name="m", command=["srv"]), pb.McpServer(name="n", transport=9)],
        hooks=[pb.HookSpec(kind=pb.HOOK_KIND_BUDGET), pb.HookSpec()],
        approval=pb.ApprovalGate(risks=[pb.RISK_CLASS_EXTERNAL, 5]),
    )
    valid = "valid: MCP_TRANSPORT_STDIO, MCP_TRANSPORT_HTTP"
    assert _problems(message) == [
        "hooks[1].kind: required (got HOOK_KIND_UNSPECIFIED); "
        "valid: HOOK_KIND_BUDGET, HOOK_KIND_LOGGING, HOOK_KIND_CUSTOM",
        f"mcp_servers[0].transport: required (got MCP_TRANSPORT_UNSPECIFIED); {valid}",
        f"mcp_servers[1].transport: unknown MCP transport 9; {valid}",
        "provider.timeout: must not be negative (unset or zero: the default)",
        "provider.tool_choice_after_failure: unknown tool choice 7; valid: TOOL_CHOICE_AUTO, "
        "TOOL_CHOICE_REQUIRED",
        "approval.risks[1]: unknown risk class 5; valid: RISK_CLASS_DESTRUCTIVE, RISK_CLASS_EXTERNAL",
    ]


def test_a_value_at_a_reserved_number_is_refused_not_ignored() -> None:
    # An older client writes max_tokens as int64 at 6 and timeout_s as a double at 8 (both now
    # reserved): the request is refused instead of silently getting the defaults.
    provider = pb.ProviderSpec(kind=pb.PROVIDER_KIND_SCRIPTED, script=wire.json_to_proto([]))
    old = provider.SerializeToString() + bytes([6 << 3, 100]) + bytes([8 << 3 | 1]) + b"\0" * 8
    older = pb.AgentSpec(name="a", provider=pb.ProviderSpec.FromString(old))
    older.mcp_servers.add(name="m").MergeFromString(bytes([2 << 3 | 2, 5]) + b"stdio")
    lines = _problems(older)
    assert [line.split(": ")[0] for line in lines] == [
        "provider",
        "provider",
        "mcp_servers[0]",
        "mcp_servers[0].transport",  # its transport at 9 is not set
    ]
    assert lines[0].startswith("provider: field 6 is no longer read") and "field 8" in lines[1]
    assert "field 2 is no longer read" in lines[2]
    assert (
        wire.reserved_problems(
            wire.spec_to_proto(AgentSpec(name="a", provider=ProviderSpec(kind="scripted")))
        )
        == []
    )


# --- Events ----------------------------------------------------------------------------------


def test_events_round_trip() -> None:
    for event in TURN_EVENTS:
        message = wire.event_to_proto(event, payload_limit=1000)
        assert message is not None
        assert wire.event_from_proto(pb.TurnEvent.FromString(message.SerializeToString())) == event


def test_event_payloads_are_cut_to_the_limit() -> None:
    started = wire.event_to_proto(
        ToolStarted(tool_use_id="t", name="n", input={"x": "é" * 100}), payload_limit=10
    )
    assert started is not None and started.tool_started.input_truncated
    assert wire.event_from_proto(started) == ToolStarted(tool_use_id="t", name="n", input='{"x":"éé')
    finished = wire.event_to_proto(
        ToolFinished(tool_use_id="t", name="n", duration_ms=1, success=True, output="é" * 100),
        payload_limit=11,
    )
    assert finished is not None and finished.tool_finished.output_truncated
    assert finished.tool_finished.output == "é" * 5


def test_final_events() -> None:
    out = TurnOutput.new("done")
    assert wire.event_from_proto(wire.output_event(out)) == out
    err = wire.event_from_proto(wire.error_event("tool", "boom", "bash"))
    assert isinstance(err, TurnError)
    assert (err.kind, err.message, err.tool_name) == ("tool", "boom", "bash")
    unknown = wire.event_from_proto(wire.error_event("weird", "x"))
    assert isinstance(unknown, TurnError) and unknown.kind == "other"
    newer = wire.event_from_proto(pb.TurnEvent(error=pb.TurnFailed(kind=99, message="from a newer runner")))
    assert isinstance(newer, TurnError) and newer.kind == "other"


def test_events_with_a_value_outside_a_closed_set_are_malformed() -> None:
    finished = pb.TurnEvent(inference_finished=pb.InferenceFinished(iteration=1))
    with pytest.raises(wire.MalformedMessage, match=r"^inference_finished.stop_reason: required"):
        wire.event_from_proto(finished)
    with pytest.raises(wire.MalformedMessage, match=r"^log.level: unknown log level 42"):
        wire.event_from_proto(pb.TurnEvent(log=pb.TurnLogEvent(level=42)))
    with pytest.raises(wire.MalformedMessage, match="unknown log level 'loud'"):
        wire.event_to_proto(TurnLog(level="loud", message="x"), payload_limit=10)
    compacted = pb.TurnEvent(compacted=pb.ContextCompacted(strategy=42))
    with pytest.raises(wire.MalformedMessage, match=r"^compacted.strategy: unknown context strategy 42"):
        wire.event_from_proto(compacted)
    signal = pb.TurnEvent(signal=pb.SignalDelivered(signal_type="x", action=9))
    with pytest.raises(wire.MalformedMessage, match=r"^signal.action: unknown signal action 9"):
        wire.event_from_proto(signal)
