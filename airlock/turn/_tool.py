"""Tools: the ToolDyn protocol and the context a call receives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import JsonValue


@dataclass(frozen=True)
class ToolContext:
    """What a tool call knows about its surroundings."""

    #: The tool_use id of this call.
    tool_use_id: str
    #: The agent's name (from its AgentSpec), if known.
    agent: str | None = None
    #: Free-form per-turn data (e.g. the TurnInput metadata).
    metadata: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ToolDyn(Protocol):
    """A tool of any source (local function, sandbox command, MCP, HTTP).

    ``call`` returns a JSON value (a string is used as-is as the result text, other
    values are JSON-encoded) or raises ``airlock.errors.ToolError``.
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

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue:
        """Run the tool."""
        ...
