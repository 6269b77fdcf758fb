"""NeuronTurn: the ReAct loop (call model, run tools, repeat) implementing ``layer0.Turn``.

The loop, its tool registry, hooks and context strategies load at first use (:func:`__getattr__`):
a runner imports the event and message types to serve health, and builds its first turn later.
"""

import typing as _typing  # as private names: this package exports exactly __all__

from ._config import DEFAULT_MAX_TURNS, ResolvedConfig, ToolSchema, TurnLoopError
from ._events import (
    AnyTurnEvent,
    Checkpoint,
    ContextCompacted,
    InferenceFinished,
    InferenceStarted,
    LifecycleEvent,
    LifecyclePayload,
    PendingCall,
    SignalDelivered,
    SuspendedForApproval,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnEventSink,
    TurnLog,
    TurnPaused,
    TurnStarted,
    TurnSuspended,
    joined_delta_text,
)
from ._types import (
    COMPACTION_CONTENT_TYPE,
    CompactionPart,
    ContentPart,
    ImagePart,
    ProviderCompaction,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    TokenUsage,
    ToolResultPart,
    ToolUsePart,
    block_to_part,
    part_to_block,
)

if _typing.TYPE_CHECKING:
    from ._context import (
        CONE_KEY,
        CONE_SCOPE,
        CausalCone,
        Compaction,
        Composite,
        ContextStrategy,
        NoCompaction,
        SlidingWindow,
        Summarization,
        estimate_tokens,
    )
    from ._effect_tools import EFFECT_BACKFILL, EFFECT_TOOL_SCHEMAS
    from ._extensions import (
        CustomTurnParts,
        ExtensionTurn,
        ImageTurn,
        build_extensions,
        call_extension_factory,
        check_extensions,
        load_extension,
    )
    from ._function_tool import FunctionTool, tool
    from ._hooks import BudgetHook, HookDecision, HookRegistry, LifecycleObserver
    from ._logging_hook import LoggingHook
    from ._loop import TurnLoop
    from ._memory_tools import ReadMemoryTool, SearchMemoryTool
    from ._middleware import CallMiddleware, CallMiddlewareBase, ToolCall, as_tool_middleware
    from ._neuron import NeuronTurn
    from ._provider import Provider, StreamingProvider, TextSink
    from ._registry import ToolMiddleware, ToolNext, ToolOutcome, ToolRegistry
    from ._run_log import MAX_RUN_LOGS
    from ._state import SessionState, StepResult, ToolExecution
    from ._tool import MAX_TOOL_EFFECTS, ToolContext, ToolDyn, ToolResult
    from ._tool_choice import ToolChoicePolicy, failed_step

__all__ = [
    "COMPACTION_CONTENT_TYPE",
    "CONE_KEY",
    "CONE_SCOPE",
    "DEFAULT_MAX_TURNS",
    "EFFECT_BACKFILL",
    "EFFECT_TOOL_SCHEMAS",
    "MAX_RUN_LOGS",
    "MAX_TOOL_EFFECTS",
    "AnyTurnEvent",
    "BudgetHook",
    "CallMiddleware",
    "CallMiddlewareBase",
    "CausalCone",
    "Checkpoint",
    "Compaction",
    "CompactionPart",
    "Composite",
    "ContentPart",
    "ContextCompacted",
    "ContextStrategy",
    "CustomTurnParts",
    "ExtensionTurn",
    "FunctionTool",
    "HookDecision",
    "HookRegistry",
    "ImagePart",
    "ImageTurn",
    "InferenceFinished",
    "InferenceStarted",
    "LifecycleEvent",
    "LifecycleObserver",
    "LifecyclePayload",
    "LoggingHook",
    "NeuronTurn",
    "NoCompaction",
    "PendingCall",
    "Provider",
    "ProviderCompaction",
    "ProviderMessage",
    "ProviderRequest",
    "ProviderResponse",
    "ReadMemoryTool",
    "ResolvedConfig",
    "Role",
    "SearchMemoryTool",
    "SessionState",
    "SignalDelivered",
    "SlidingWindow",
    "StepResult",
    "StopReason",
    "StreamingProvider",
    "Summarization",
    "SuspendedForApproval",
    "TextDelta",
    "TextPart",
    "TextSink",
    "TokenUsage",
    "ToolCall",
    "ToolChoicePolicy",
    "ToolContext",
    "ToolDyn",
    "ToolExecution",
    "ToolFinished",
    "ToolMiddleware",
    "ToolNext",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResult",
    "ToolResultPart",
    "ToolSchema",
    "ToolStarted",
    "ToolUsePart",
    "TurnEvent",
    "TurnEventSink",
    "TurnLog",
    "TurnLoop",
    "TurnLoopError",
    "TurnPaused",
    "TurnStarted",
    "TurnSuspended",
    "as_tool_middleware",
    "block_to_part",
    "build_extensions",
    "call_extension_factory",
    "check_extensions",
    "estimate_tokens",
    "failed_step",
    "joined_delta_text",
    "load_extension",
    "part_to_block",
    "tool",
]

#: The public names defined by the modules loaded at first use.
_LAZY = frozenset(__all__) - globals().keys()
#: The modules defining them (all loaded together, at the first use of any).
_LAZY_MODULES = (
    "_context",
    "_effect_tools",
    "_extensions",
    "_function_tool",
    "_hooks",
    "_logging_hook",
    "_memory_tools",
    "_middleware",
    "_neuron",
    "_provider",
    "_registry",
    "_run_log",
    "_loop",
    "_state",
    "_tool",
    "_tool_choice",
)

if not _typing.TYPE_CHECKING:  # mypy sees the imports above: a module __getattr__ would type every name Any

    def __getattr__(name: str) -> object:
        """Load the loop and its parts (every module but the event and message types) at first use."""
        if name not in _LAZY:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        for where in _LAZY_MODULES:
            module = importlib.import_module(f".{where}", __name__)
            for public in _LAZY & vars(module).keys():
                globals()[public] = getattr(module, public)
        return globals()[name]

    def __dir__() -> list[str]:
        return sorted(globals().keys() | _LAZY)
