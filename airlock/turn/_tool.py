"""Tools: the ToolDyn protocol, the context a call receives, and the result with effects a
tool may return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from layer0 import CustomEffect, SessionId

#: The most effects one tool call may declare (a ToolResult with more is an error result).
MAX_TOOL_EFFECTS = 16


@dataclass(frozen=True)
class ToolContext:
    """What a tool call knows about its surroundings."""

    #: The tool_use id of this call.
    tool_use_id: str
    #: The agent's name (from its AgentSpec), if known.
    agent: str | None = None
    #: Free-form per-turn data (e.g. the TurnInput metadata).
    metadata: dict[str, Any] = field(default_factory=dict)
    #: The turn's session, if it has one.
    session: SessionId | None = None


class ToolResult(BaseModel):
    """What a tool may return instead of a plain value: the result the model reads and the
    effects the call declares.

    ``content`` becomes the result text as a plain return value would (a string as-is, other
    JSON encoded). ``effects`` join the turn's ``TurnOutput.effects`` in the order of the
    calls; the caller applies them if the agent's policy grants their ``effect_type``
    (``effects.custom``). At most :data:`MAX_TOOL_EFFECTS` per call.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    content: JsonValue = None
    effects: list[CustomEffect] = Field(default_factory=list)


@runtime_checkable
class ToolDyn(Protocol):
    """A tool of any source (local function, sandbox command, MCP, HTTP).

    ``call`` returns a JSON value (a string is used as-is as the result text, other
    values are JSON-encoded) or a :class:`ToolResult` (the value plus the effects the call
    declares), or raises ``airlock.errors.ToolError``.
    """

    @property
    def name(self) -> str:
        """Unique name offered to the model."""
        ...

    @property
    def description(self) -> str:
        """What the tool does, for the model."""
        ...

    @property
    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the input object."""
        ...

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue | ToolResult:
        """Run the tool."""
        ...
