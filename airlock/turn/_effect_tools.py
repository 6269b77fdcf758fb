"""Effect tools: tools the loop intercepts and turns into layer0 Effects instead of running."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from airlock.spec import named_workflow
from layer0 import (
    AgentId,
    Delegate,
    DeleteMemory,
    Effect,
    ExitReason,
    Handoff,
    Scope,
    SessionId,
    Signal,
    SignalPayload,
    TriggerType,
    TurnInput,
    WorkflowId,
    WriteMemory,
)

from ._config import ToolSchema

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

#: The scope names a memory tool call may use (``custom:<name>`` names a custom scope).
SCOPE_PATTERN = r"^(session|global|workflow|agent|custom:\S{1,128})$"

_SCOPE = {
    "type": "string",
    "pattern": SCOPE_PATTERN,
    "description": (
        "Where the memory lives: session (this conversation; the default when there is one), "
        "workflow (shared by the agents of this workflow), agent (this agent within the "
        "workflow), global, or custom:<name> (a named scope, e.g. custom:team-notes)."
    ),
}

EFFECT_TOOL_SCHEMAS: dict[str, ToolSchema] = {
    "write_memory": ToolSchema(
        name="write_memory",
        description="Remember a value under a key (persisted by the platform after this turn).",
        input_schema={
            "type": "object",
            "properties": {"key": {"type": "string", "minLength": 1}, "value": {}, "scope": _SCOPE},
            "required": ["key", "value"],
            "additionalProperties": False,
        },
    ),
    "delete_memory": ToolSchema(
        name="delete_memory",
        description="Forget the value stored under a key.",
        input_schema={
            "type": "object",
            "properties": {"key": {"type": "string", "minLength": 1}, "scope": _SCOPE},
            "required": ["key"],
            "additionalProperties": False,
        },
    ),
    "delegate": ToolSchema(
        name="delegate",
        description="Ask another agent to do a task; it runs after this turn.",
        input_schema={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "minLength": 1, "description": "The agent's id."},
                "message": {"type": "string", "description": "The task for that agent."},
            },
            "required": ["agent", "message"],
            "additionalProperties": False,
        },
    ),
    "handoff": ToolSchema(
        name="handoff",
        description="Hand the conversation over to another agent, with the state it needs.",
        input_schema={
            "type": "object",
            "properties": {"agent": {"type": "string", "minLength": 1}, "state": {}},
            "required": ["agent"],
            "additionalProperties": False,
        },
    ),
    "signal": ToolSchema(
        name="signal",
        description="Send a fire-and-forget signal to a workflow.",
        input_schema={
            "type": "object",
            "properties": {
                "target": {"type": "string", "minLength": 1, "description": "The workflow id."},
                "signal_type": {"type": "string", "minLength": 1},
                "data": {},
            },
            "required": ["target", "signal_type"],
            "additionalProperties": False,
        },
    ),
}

#: The text backfilled as each effect tool's result.
EFFECT_BACKFILL = {
    "write_memory": "Memory written.",
    "delete_memory": "Memory deleted.",
    "delegate": "Delegation requested.",
    "handoff": "Handoff initiated.",
    "signal": "Signal sent.",
}


#: How a turn that handed its conversation over ends: the model is not called again.
HANDOFF_EXIT = ExitReason.custom("handoff")


def handed_off(effects: list[Effect | None]) -> bool:
    """Whether one of ``effects`` is a Handoff."""
    return any(isinstance(e, Handoff) for e in effects)


@cache
def _validator(name: str) -> Validator:
    """Effect tool ``name``'s input validator, built at first use (jsonschema loads lazily)."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(EFFECT_TOOL_SCHEMAS[name].input_schema)


def effect_validation_error(name: str, input: JsonValue) -> str | None:
    """Why ``input`` does not fit effect tool ``name``'s schema, or None when it does."""
    errors = sorted(_validator(name).iter_errors(input), key=lambda e: list(e.path))
    if not errors:
        return None
    details = "; ".join(
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}" for e in errors
    )
    return f"invalid input for tool {name!r}: {details}"


class EffectToolError(ValueError):
    """Raised when an effect tool's input cannot become an Effect (the message is for the model)."""


@dataclass(frozen=True)
class MemoryPlace:
    """What a turn knows of where its memory lives: its session, workflow and agent."""

    session: SessionId | None = None
    workflow: WorkflowId | None = None
    agent: AgentId | None = None

    @classmethod
    def of(cls, input: TurnInput, agent: str | None) -> MemoryPlace:
        """The place of a turn on ``input`` for ``agent`` (its workflow: ``metadata.workflow``)."""
        return cls(input.session, turn_workflow(input.metadata), AgentId(agent) if agent else None)


def turn_workflow(metadata: object) -> WorkflowId | None:
    """The workflow a turn belongs to: its input's ``metadata.workflow`` (the controller sets
    it to the job's workflow), or None."""
    named = named_workflow(metadata)
    return WorkflowId(named) if named is not None else None


def memory_scope(args: dict[str, Any], place: MemoryPlace) -> Scope:
    """The scope an effect or memory tool call names (``session`` by default when the turn has
    one, else ``global``).

    Raises:
        EffectToolError: the scope needs a session, workflow or agent this turn does not have.
    """
    kind = str(args.get("scope") or ("session" if place.session is not None else "global"))
    if kind == "global":
        return Scope.global_()
    if kind.startswith("custom:") and len(kind) > len("custom:"):
        return Scope.custom(kind.removeprefix("custom:"))
    if kind == "session":
        if place.session is None:
            raise EffectToolError(
                "scope 'session' needs a session, and this turn has none; use scope 'global'"
            )
        return Scope.session(place.session)
    if kind in ("workflow", "agent"):
        if place.workflow is None:
            raise EffectToolError(f"scope {kind!r} needs a workflow, and this turn has none")
        if kind == "workflow":
            return Scope.workflow(place.workflow)
        if place.agent is None:
            raise EffectToolError("scope 'agent' needs the agent's name, and this turn has none")
        return Scope.agent(place.workflow, place.agent)
    raise EffectToolError(f"unknown scope {kind!r}: use session, workflow, agent, global or custom:<name>")


def scope_name(scope: Scope) -> str:
    """How a tool names ``scope``: ``session``, ``workflow``, ``agent``, ``global`` or ``custom:<name>``."""
    return f"custom:{scope.custom_name}" if scope.kind == "custom" else scope.kind


def effect_from_call(name: str, input: JsonValue, place: MemoryPlace) -> Effect:
    """The Effect an effect-tool call declares (input already schema-validated).

    Raises:
        EffectToolError: the input names a scope that does not exist here.
    """
    args: dict[str, Any] = input if isinstance(input, dict) else {}
    if name == "write_memory":
        return WriteMemory(scope=memory_scope(args, place), key=args["key"], value=args["value"])
    if name == "delete_memory":
        return DeleteMemory(scope=memory_scope(args, place), key=args["key"])
    if name == "delegate":
        return Delegate(
            agent=AgentId(args["agent"]), input=TurnInput.new(args["message"], trigger=TriggerType.task())
        )
    if name == "handoff":
        return Handoff(agent=AgentId(args["agent"]), state=args.get("state"))
    if name == "signal":
        return Signal(
            target=WorkflowId(args["target"]),
            payload=SignalPayload(signal_type=args["signal_type"], data=args.get("data")),
        )
    raise EffectToolError(f"{name!r} is not an effect tool")
