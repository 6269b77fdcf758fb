"""Effects: side effects a turn declares and its caller executes."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Self

from pydantic import Field

from ._id import AgentId, SessionId, WorkflowId
from ._input import TurnInput
from ._wire import ExternallyTagged, Json, WireModel


class Scope(ExternallyTagged):
    """Where state lives: ``{"session": id}``, ``{"workflow": id}``,
    ``{"agent": {"workflow", "agent"}}``, ``"global"`` or ``{"custom": "…"}``."""

    _variants: ClassVar[dict[str, str | dict[str, str] | None]] = {
        "session": "session_id",
        "workflow": "workflow_id",
        "agent": {"workflow": "workflow_id", "agent": "agent_id"},
        "global": None,
        "custom": "custom_name",
    }
    session_id: SessionId | None = None
    workflow_id: WorkflowId | None = None
    agent_id: AgentId | None = None
    custom_name: str | None = None

    @classmethod
    def session(cls, session: SessionId | str) -> Self:
        """Per conversation."""
        return cls._make("session", str(session))

    @classmethod
    def workflow(cls, workflow: WorkflowId | str) -> Self:
        """Per workflow execution."""
        return cls._make("workflow", str(workflow))

    @classmethod
    def agent(cls, workflow: WorkflowId | str, agent: AgentId | str) -> Self:
        """Per agent within a workflow."""
        return cls._make("agent", {"workflow": str(workflow), "agent": str(agent)})

    @classmethod
    def global_(cls) -> Self:
        """Shared across all workflows."""
        return cls._make("global")

    @classmethod
    def custom(cls, name: str) -> Self:
        """A scope layer0 does not name (e.g. ``tenant:acme``)."""
        return cls._make("custom", name)

    def path_parts(self) -> list[str]:
        """The scope as a list of path segments (``["session", "s1"]``), for stores."""
        if self.kind == "global":
            return ["global"]
        if self.kind == "agent":
            return ["agent", str(self.workflow_id), str(self.agent_id)]
        value = {"session": self.session_id, "workflow": self.workflow_id}.get(self.kind)
        return [self.kind, str(value) if value is not None else str(self.custom_name)]


class SignalPayload(WireModel):
    """A fire-and-forget message to a workflow; the same type on both sides."""

    signal_type: str
    data: Json


class LogLevel(StrEnum):
    """Severity of a log effect."""

    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class WriteMemory(WireModel):
    """Write ``value`` under ``key`` in ``scope`` (create or overwrite)."""

    type: Literal["write_memory"] = "write_memory"
    scope: Scope
    key: str
    value: Json


class DeleteMemory(WireModel):
    """Delete ``key`` in ``scope`` (no-op when absent)."""

    type: Literal["delete_memory"] = "delete_memory"
    scope: Scope
    key: str


class Signal(WireModel):
    """Send a signal to a workflow."""

    type: Literal["signal"] = "signal"
    target: WorkflowId
    payload: SignalPayload


class Delegate(WireModel):
    """Ask the orchestrator to dispatch another agent with this input."""

    type: Literal["delegate"] = "delegate"
    agent: AgentId
    input: TurnInput


class Handoff(WireModel):
    """Hand the conversation to another agent with the state it needs."""

    type: Literal["handoff"] = "handoff"
    agent: AgentId
    state: Json


class Log(WireModel):
    """A log or trace event for observers."""

    type: Literal["log"] = "log"
    level: LogLevel
    message: str
    data: Json = None


class CustomEffect(WireModel):
    """A domain-specific effect: a name and a payload."""

    type: Literal["custom"] = "custom"
    effect_type: str
    data: Json


#: A side effect declared by a turn (``"type"``-tagged).
Effect = Annotated[
    WriteMemory | DeleteMemory | Signal | Delegate | Handoff | Log | CustomEffect,
    Field(discriminator="type"),
]
