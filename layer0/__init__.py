"""layer0: the protocol contract of airlock.

Four protocols and two interfaces, and the messages they exchange:

| Protocol | Type | What it does |
|---|---|---|
| ① Turn | ``Turn`` | what one agent does per cycle |
| ② Orchestration | ``Orchestrator`` | how agents compose |
| ③ State | ``StateStore`` / ``StateReader`` | how data persists across turns |
| ④ Environment | ``Environment`` | isolation, credentials, resources |
| ⑤ Hooks | ``Hook``, ``HookPoint``, ``HookAction`` | observation and intervention |
| ⑥ Lifecycle | ``BudgetEvent``, ``CompactionEvent``, ``ObservableEvent`` | cross-layer events |

Every message type is a frozen pydantic model (or a tagged union of them) whose JSON
is byte-compatible with the Rust ``layer0`` crate; ``layer0/README.md`` states the
conventions. This package depends on pydantic and the standard library only.

The environment, hook, lifecycle and orchestration types load at first use (:func:`__getattr__`):
a sandbox's runner serves its health check with the turn's types alone.
"""

import typing as _typing  # as private names: this package exports exactly __all__

from ._content import (
    Base64Source,
    Content,
    ContentBlock,
    CustomBlock,
    ImageBlock,
    ImageSource,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)
from ._effect import (
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    Handoff,
    Log,
    LogLevel,
    Scope,
    Signal,
    SignalPayload,
    WriteMemory,
)
from ._error import (
    EnvError,
    HookError,
    Layer0Error,
    OperatorError,
    OrchError,
    StateError,
    TurnError,
)
from ._id import AgentId, ScopeId, SessionId, WorkflowId
from ._input import TriggerType, TurnConfig, TurnInput
from ._state import ReadOnlyState, SearchResult, StateReader, StateStore, read_only
from ._turn import (
    ExitReason,
    Operator,
    OperatorConfig,
    OperatorInput,
    OperatorMetadata,
    OperatorOutput,
    ToolCallRecord,
    Turn,
    TurnMetadata,
    TurnOutput,
)
from ._wire import JSON_MAX_DEPTH, U32_MAX, DurationMs, Json, Money, decimal_to_str, json_depth

if _typing.TYPE_CHECKING:
    from ._environment import (
        ContainerIsolation,
        CredentialInjection,
        CredentialRef,
        CustomIsolation,
        Environment,
        EnvironmentSpec,
        GvisorIsolation,
        IsolationBoundary,
        MicroVmIsolation,
        NetworkAction,
        NetworkPolicy,
        NetworkPolicyIsolation,
        NetworkRule,
        ProcessIsolation,
        ResourceLimits,
        WasmIsolation,
    )
    from ._hook import (
        Hook,
        HookAction,
        HookContext,
        HookContinue,
        HookHalt,
        HookModifyToolInput,
        HookPoint,
        HookSkipTool,
    )
    from ._lifecycle import (
        BudgetAction,
        BudgetDecision,
        BudgetEvent,
        BudgetWarning,
        CompactionComplete,
        CompactionEvent,
        ContextPressure,
        CostIncurred,
        EventSource,
        ObservableEvent,
        PreCompactionFlush,
        ProviderManaged,
    )
    from ._orchestrator import Orchestrator, QueryPayload

TurnOutput.model_rebuild()

__all__ = [
    "JSON_MAX_DEPTH",
    "U32_MAX",
    "AgentId",
    "Base64Source",
    "BudgetAction",
    "BudgetDecision",
    "BudgetEvent",
    "BudgetWarning",
    "CompactionComplete",
    "CompactionEvent",
    "ContainerIsolation",
    "Content",
    "ContentBlock",
    "ContextPressure",
    "CostIncurred",
    "CredentialInjection",
    "CredentialRef",
    "CustomBlock",
    "CustomEffect",
    "CustomIsolation",
    "Delegate",
    "DeleteMemory",
    "DurationMs",
    "Effect",
    "EnvError",
    "Environment",
    "EnvironmentSpec",
    "EventSource",
    "ExitReason",
    "GvisorIsolation",
    "Handoff",
    "Hook",
    "HookAction",
    "HookContext",
    "HookContinue",
    "HookError",
    "HookHalt",
    "HookModifyToolInput",
    "HookPoint",
    "HookSkipTool",
    "ImageBlock",
    "ImageSource",
    "IsolationBoundary",
    "Json",
    "Layer0Error",
    "Log",
    "LogLevel",
    "MicroVmIsolation",
    "Money",
    "NetworkAction",
    "NetworkPolicy",
    "NetworkPolicyIsolation",
    "NetworkRule",
    "ObservableEvent",
    "Operator",
    "OperatorConfig",
    "OperatorError",
    "OperatorInput",
    "OperatorMetadata",
    "OperatorOutput",
    "OrchError",
    "Orchestrator",
    "PreCompactionFlush",
    "ProcessIsolation",
    "ProviderManaged",
    "QueryPayload",
    "ReadOnlyState",
    "ResourceLimits",
    "Scope",
    "ScopeId",
    "SearchResult",
    "SessionId",
    "Signal",
    "SignalPayload",
    "StateError",
    "StateReader",
    "StateStore",
    "TextBlock",
    "ToolCallRecord",
    "ToolResultBlock",
    "ToolUseBlock",
    "TriggerType",
    "Turn",
    "TurnConfig",
    "TurnError",
    "TurnInput",
    "TurnMetadata",
    "TurnOutput",
    "UrlSource",
    "WasmIsolation",
    "WorkflowId",
    "WriteMemory",
    "decimal_to_str",
    "json_depth",
    "read_only",
]

#: The public names defined by the modules loaded at first use.
_LAZY = frozenset(__all__) - globals().keys()

if not _typing.TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any

    def __getattr__(name: str) -> object:
        """Load the environment, hook, lifecycle and orchestration types at first use."""
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from . import _environment, _hook, _lifecycle, _orchestrator

        for module in (_environment, _hook, _lifecycle, _orchestrator):
            for public in _LAZY & vars(module).keys():
                globals()[public] = getattr(module, public)
        return globals()[name]

    def __dir__() -> list[str]:
        return sorted(globals().keys() | _LAZY)
