"""Every layer0 model and every enum variant, built in Python, round-trips through JSON."""

from __future__ import annotations

import json
from decimal import Decimal
from enum import StrEnum
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

import layer0
from layer0 import (
    AgentId,
    Base64Source,
    BudgetAction,
    BudgetDecision,
    BudgetWarning,
    CompactionComplete,
    ContainerIsolation,
    Content,
    ContextPressure,
    CostIncurred,
    CredentialInjection,
    CredentialRef,
    CustomBlock,
    CustomEffect,
    CustomIsolation,
    Delegate,
    DeleteMemory,
    EnvironmentSpec,
    EventSource,
    ExitReason,
    GvisorIsolation,
    Handoff,
    HookContext,
    HookContinue,
    HookHalt,
    HookModifyToolInput,
    HookPoint,
    HookSkipTool,
    ImageBlock,
    Log,
    LogLevel,
    MicroVmIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkPolicyIsolation,
    NetworkRule,
    ObservableEvent,
    PreCompactionFlush,
    ProcessIsolation,
    ProviderManaged,
    QueryPayload,
    ResourceLimits,
    Scope,
    ScopeId,
    SearchResult,
    SessionId,
    Signal,
    SignalPayload,
    TextBlock,
    ToolCallRecord,
    ToolResultBlock,
    ToolUseBlock,
    TriggerType,
    TurnConfig,
    TurnInput,
    TurnMetadata,
    TurnOutput,
    UrlSource,
    WasmIsolation,
    WorkflowId,
    WriteMemory,
)

WF, AG = WorkflowId("wf-1"), AgentId("agent-1")
RULE = NetworkRule(destination="*.example.com", port=443, action=NetworkAction.ALLOW)

SCOPES = [
    Scope.session("s"),
    Scope.workflow(WF),
    Scope.agent(WF, AG),
    Scope.global_(),
    Scope.custom("tenant:acme"),
]
TRIGGERS = [
    TriggerType.user(),
    TriggerType.task(),
    TriggerType.signal(),
    TriggerType.schedule(),
    TriggerType.system_event(),
    TriggerType.custom("webhook"),
]
EXITS = [
    ExitReason.complete(),
    ExitReason.max_turns(),
    ExitReason.budget_exhausted(),
    ExitReason.circuit_breaker(),
    ExitReason.timeout(),
    ExitReason.observer_halt("guardrail"),
    ExitReason.error(),
    ExitReason.custom("cancelled"),
    ExitReason.safety_stop("refused"),
]
INJECTIONS = [
    CredentialInjection.env_var("API_KEY"),
    CredentialInjection.file("/run/k"),
    CredentialInjection.sidecar(),
]
DECISIONS = [
    BudgetDecision.continue_(),
    BudgetDecision.downgrade_model("big", "small"),
    BudgetDecision.halt_workflow(),
    BudgetDecision.request_increase(Decimal("5.00")),
]
BLOCKS = [
    TextBlock(text="hi"),
    ImageBlock(source=Base64Source(data="aGk="), media_type="image/png"),
    ImageBlock(source=UrlSource(url="https://example.com/a.png"), media_type="image/png"),
    ToolUseBlock(id="t1", name="bash", input={"cmd": "ls", "args": [1, None]}),
    ToolResultBlock(tool_use_id="t1", content="ok", is_error=False),
    CustomBlock(content_type="audio/x", data={"z": 1, "a": [True]}),
]
FULL_CONFIG = TurnConfig(
    max_turns=5,
    max_cost=Decimal("1.50"),
    max_duration=30000,
    model="m",
    allowed_tools=["bash"],
    system_addendum="be brief",
)
FULL_INPUT = TurnInput(
    message=Content(BLOCKS),
    trigger=TriggerType.custom("webhook"),
    session=SessionId("s"),
    config=FULL_CONFIG,
    metadata={"trace_id": "t", "priority": 1},
)
METADATA = TurnMetadata(
    tokens_in=10,
    tokens_out=20,
    cost=Decimal("0.0123"),
    turns_used=2,
    tools_called=[ToolCallRecord(name="bash", duration=15, success=True)],
    duration=4500,
)
EFFECTS: list[Any] = [
    *(WriteMemory(scope=s, key="k", value={"v": [1, 2]}) for s in SCOPES),
    DeleteMemory(scope=Scope.global_(), key="k"),
    Signal(target=WF, payload=SignalPayload(signal_type="done", data=None)),
    Delegate(agent=AG, input=FULL_INPUT),
    Handoff(agent=AG, state={"ticket": 1}),
    *(Log(level=lv, message="m", data=None) for lv in LogLevel),
    Log(level=LogLevel.INFO, message="m", data={"x": 1}),
    CustomEffect(effect_type="notify", data=[1, "two"]),
]
ISOLATIONS: list[Any] = [
    ProcessIsolation(),
    ContainerIsolation(image="img:1"),
    ContainerIsolation(),
    GvisorIsolation(),
    MicroVmIsolation(),
    WasmIsolation(runtime="wasmtime"),
    WasmIsolation(),
    NetworkPolicyIsolation(rules=[RULE]),
    CustomIsolation(boundary_type="firecracker", config={"vcpu": 1}),
]

# (type name as exported by layer0, value)
CASES: list[tuple[str, Any]] = [
    ("AgentId", AG),
    ("SessionId", SessionId("s")),
    ("WorkflowId", WF),
    ("ScopeId", ScopeId("scope")),
    ("DurationMs", 1500),
    ("Money", Decimal("0.0010")),
    ("Json", {"b": 1, "a": [None, 1.5, "x"]}),
    ("Content", Content("text")),
    ("Content", Content("")),
    ("Content", Content([])),
    ("Content", Content(BLOCKS)),
    *(("ContentBlock", b) for b in BLOCKS),
    ("ImageSource", Base64Source(data="x")),
    ("ImageSource", UrlSource(url="u")),
    *(("TriggerType", t) for t in TRIGGERS),
    ("TurnConfig", TurnConfig()),
    ("TurnConfig", FULL_CONFIG),
    *(("TurnInput", TurnInput.new("hi", trigger=t)) for t in TRIGGERS),
    ("TurnInput", FULL_INPUT),
    *(("ExitReason", e) for e in EXITS),
    ("ToolCallRecord", ToolCallRecord(name="t", duration=0, success=False)),
    ("TurnMetadata", TurnMetadata.empty()),
    ("TurnMetadata", METADATA),
    *(("TurnOutput", TurnOutput.new("x", e)) for e in EXITS),
    (
        "TurnOutput",
        TurnOutput(message=Content(BLOCKS), exit_reason=EXITS[0], metadata=METADATA, effects=EFFECTS),
    ),
    *(("Scope", s) for s in SCOPES),
    *(("LogLevel", lv) for lv in LogLevel),
    ("SignalPayload", SignalPayload(signal_type="s", data={"k": "v"})),
    *(("Effect", e) for e in EFFECTS),
    *(("NetworkAction", a) for a in NetworkAction),
    ("NetworkRule", RULE),
    ("NetworkRule", NetworkRule(destination="10.0.0.0/8", action=NetworkAction.DENY)),
    ("NetworkPolicy", NetworkPolicy(default=NetworkAction.DENY, rules=[RULE])),
    *(("IsolationBoundary", i) for i in ISOLATIONS),
    *(("CredentialInjection", i) for i in INJECTIONS),
    *(("CredentialRef", CredentialRef(name="key", injection=i)) for i in INJECTIONS),
    ("ResourceLimits", ResourceLimits(cpu="500m", memory="2Gi", disk="1Gi", gpu="1")),
    ("EnvironmentSpec", EnvironmentSpec()),
    (
        "EnvironmentSpec",
        EnvironmentSpec(
            isolation=ISOLATIONS,
            credentials=[CredentialRef(name="k", injection=i) for i in INJECTIONS],
            resources=ResourceLimits(memory="1Gi"),
            network=NetworkPolicy(default=NetworkAction.DENY, rules=[RULE]),
        ),
    ),
    *(("HookPoint", p) for p in HookPoint),
    *(("HookContext", HookContext.new(p)) for p in HookPoint),
    (
        "HookContext",
        HookContext(
            point=HookPoint.POST_INFERENCE,
            tool_name="bash",
            tool_input={"cmd": "ls"},
            tool_result="ok",
            model_output=Content(BLOCKS),
            tokens_used=5,
            cost=Decimal("0.25"),
            turns_completed=1,
            elapsed=12,
        ),
    ),
    ("HookAction", HookContinue()),
    ("HookAction", HookHalt(reason="r")),
    ("HookAction", HookSkipTool(reason="r")),
    ("HookAction", HookModifyToolInput(new_input={"cmd": "pwd"})),
    *(("BudgetDecision", d) for d in DECISIONS),
    ("BudgetEvent", CostIncurred(agent=AG, cost=Decimal("0.001"), cumulative=Decimal("1.234"))),
    ("BudgetEvent", BudgetWarning(workflow=WF, spent=Decimal("9"), limit=Decimal("10.00"))),
    *(("BudgetEvent", BudgetAction(workflow=WF, action=d)) for d in DECISIONS),
    (
        "CompactionEvent",
        ContextPressure(agent=AG, fill_percent=0.85, tokens_used=850, tokens_available=150),
    ),
    *(("CompactionEvent", PreCompactionFlush(agent=AG, scope=s)) for s in SCOPES),
    ("CompactionEvent", CompactionComplete(agent=AG, strategy="summarize", tokens_freed=100)),
    *(
        (
            "CompactionEvent",
            ProviderManaged(agent=AG, provider="p", tokens_before=9, tokens_after=1, summary=s),
        )
        for s in (None, Content("sum"), Content(BLOCKS[:1]))
    ),
    *(("EventSource", s) for s in EventSource),
    *(
        ("ObservableEvent", ObservableEvent(source=s, event_type="turn.x", timestamp=5, data=None))
        for s in EventSource
    ),
    (
        "ObservableEvent",
        ObservableEvent(
            source=EventSource.TURN,
            event_type="t",
            timestamp=1,
            data={"a": 1},
            trace_id="tr",
            workflow_id=WF,
            agent_id=AG,
        ),
    ),
    ("SearchResult", SearchResult(key="k", score=0.5, snippet="…x…")),
    ("SearchResult", SearchResult(key="k", score=1.0)),
    ("QueryPayload", QueryPayload(query_type="status", params={"x": 1})),
]


def _dumps(adapter: TypeAdapter[Any], value: Any) -> str:
    return json.dumps(adapter.dump_python(value, mode="json", by_alias=True), separators=(",", ":"))


@pytest.mark.parametrize(("type_name", "value"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_round_trip(type_name: str, value: Any) -> None:
    adapter: TypeAdapter[Any] = TypeAdapter(getattr(layer0, type_name))
    text = _dumps(adapter, value)
    again = adapter.validate_json(text)
    assert again == value
    assert type(again) is type(value)
    assert _dumps(adapter, again) == text
    # The value's wire form is also accepted from Python data (dict/list/str).
    assert adapter.validate_python(json.loads(text)) == value


def test_every_exported_wire_type_is_covered() -> None:
    covered = {name for name, _ in CASES}
    wire_types = {
        name
        for name in layer0.__all__
        if isinstance(getattr(layer0, name), type)
        and issubclass(getattr(layer0, name), BaseModel | StrEnum)
        and not name.startswith(("Operator", "ReadOnly"))
    }
    # Variant classes are covered through their union (Effect, ContentBlock, …).
    variants = {type(v).__name__ for _, v in CASES}
    missing = wire_types - covered - variants
    assert not missing, missing


@pytest.mark.parametrize(
    ("enum_cls", "n"),
    [(TriggerType, 6), (ExitReason, 9), (Scope, 5), (CredentialInjection, 3), (BudgetDecision, 4)],
)
def test_every_externally_tagged_variant_is_covered(enum_cls: type, n: int) -> None:
    kinds = {v.kind for _, v in CASES if isinstance(v, enum_cls)}
    assert kinds == set(enum_cls._variants)  # type: ignore[attr-defined]
    assert len(kinds) == n


def test_custom_variants_round_trip_with_their_payloads() -> None:
    cases: list[tuple[Any, str]] = [
        (TriggerType.custom("webhook"), '{"custom":"webhook"}'),
        (ExitReason.custom("cancelled"), '{"custom":"cancelled"}'),
        (Scope.custom("tenant:acme"), '{"custom":"tenant:acme"}'),
        (
            CustomEffect(effect_type="x", data={"b": 1, "a": 2}),
            '{"type":"custom","effect_type":"x","data":{"a":2,"b":1}}',
        ),
        (CustomBlock(content_type="c", data=None), '{"type":"custom","content_type":"c","data":null}'),
        (
            CustomIsolation(boundary_type="fc", config=[1]),
            '{"type":"custom","boundary_type":"fc","config":[1]}',
        ),
    ]
    for value, wire in cases:
        adapter: TypeAdapter[Any] = TypeAdapter(type(value))
        assert _dumps(adapter, value) == wire
        assert adapter.validate_json(wire) == value
    assert ExitReason.custom("cancelled").custom_name == "cancelled"
    assert TriggerType.custom("webhook") != TriggerType.custom("other")


def test_safety_stop_wire_form() -> None:
    adapter = TypeAdapter(ExitReason)
    assert _dumps(adapter, ExitReason.safety_stop("unsafe")) == '{"safety_stop":{"reason":"unsafe"}}'
    assert adapter.validate_json('{"safety_stop":{"reason":"x"}}').reason == "x"


def test_externally_tagged_enums_accept_only_the_wire_form() -> None:
    with pytest.raises(ValueError):
        Scope.model_validate({"kind": "global"})
    with pytest.raises(ValueError):
        ExitReason.model_validate("observer_halt")  # carries data: not a bare string
    assert Scope.model_validate({"global": None}) == Scope.global_()


def test_operator_aliases_are_the_turn_types() -> None:
    assert layer0.OperatorInput is TurnInput
    assert layer0.OperatorOutput is TurnOutput
    assert layer0.OperatorMetadata is TurnMetadata
    assert layer0.OperatorConfig is TurnConfig
    assert layer0.Operator is layer0.Turn
    assert layer0.OperatorError is layer0.TurnError
