"""NeuronTurn: the ReAct loop (call model, run tools, repeat) implementing ``layer0.Turn``."""

from ._context import (
    Composite,
    ContextStrategy,
    NoCompaction,
    SlidingWindow,
    Summarization,
    estimate_tokens,
)
from ._effect_tools import EFFECT_BACKFILL, EFFECT_TOOL_SCHEMAS
from ._events import (
    EventSink,
    InferenceFinished,
    InferenceStarted,
    ToolFinished,
    ToolStarted,
    TurnEvent,
    TurnLog,
    TurnPaused,
    TurnStarted,
)
from ._function_tool import FunctionTool, tool
from ._hooks import BudgetHook, HookDecision, HookRegistry
from ._logging_hook import LoggingHook
from ._neuron import NeuronTurn
from ._provider import Provider
from ._registry import ToolMiddleware, ToolNext, ToolOutcome, ToolRegistry
from ._session import DEFAULT_MAX_TURNS, ResolvedConfig, TurnSession, TurnSessionError
from ._state import SessionState, StepResult, ToolExecution
from ._tool import ToolContext, ToolDyn
from ._types import (
    ContentPart,
    ImagePart,
    ProviderMessage,
    ProviderRequest,
    ProviderResponse,
    Role,
    StopReason,
    TextPart,
    TokenUsage,
    ToolResultPart,
    ToolSchema,
    ToolUsePart,
    block_to_part,
    part_to_block,
)

__all__ = [
    "DEFAULT_MAX_TURNS",
    "EFFECT_BACKFILL",
    "EFFECT_TOOL_SCHEMAS",
    "BudgetHook",
    "Composite",
    "ContentPart",
    "ContextStrategy",
    "EventSink",
    "FunctionTool",
    "HookDecision",
    "HookRegistry",
    "ImagePart",
    "InferenceFinished",
    "InferenceStarted",
    "LoggingHook",
    "NeuronTurn",
    "NoCompaction",
    "Provider",
    "ProviderMessage",
    "ProviderRequest",
    "ProviderResponse",
    "ResolvedConfig",
    "Role",
    "SessionState",
    "SlidingWindow",
    "StepResult",
    "StopReason",
    "Summarization",
    "TextPart",
    "TokenUsage",
    "ToolContext",
    "ToolDyn",
    "ToolExecution",
    "ToolFinished",
    "ToolMiddleware",
    "ToolNext",
    "ToolOutcome",
    "ToolRegistry",
    "ToolResultPart",
    "ToolSchema",
    "ToolStarted",
    "ToolUsePart",
    "TurnEvent",
    "TurnLog",
    "TurnPaused",
    "TurnSession",
    "TurnSessionError",
    "TurnStarted",
    "block_to_part",
    "estimate_tokens",
    "part_to_block",
    "tool",
]
