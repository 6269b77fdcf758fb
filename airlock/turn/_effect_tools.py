"""Effect tools: tools the loop intercepts and turns into layer0 Effects instead of running."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from layer0 import (
    AgentId,
    Delegate,
    DeleteMemory,
    Effect,
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

_SCOPE = {
    "type": "string",
    "enum": ["session", "global"],
    "description": "Where the memory lives: this conversation (default when there is one) or global.",
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


def memory_scope(args: dict[str, Any], session: SessionId | None) -> Scope:
    """The scope an effect or memory tool call names (``session`` by default when the turn has
    one).

    Raises:
        EffectToolError: ``session`` named (or defaulted to) in a turn without a session.
    """
    kind = args.get("scope") or ("session" if session is not None else "global")
    if kind == "global":
        return Scope.global_()
    if session is None:
        raise EffectToolError("scope 'session' needs a session, and this turn has none; use scope 'global'")
    return Scope.session(session)


def effect_from_call(name: str, input: JsonValue, session: SessionId | None) -> Effect:
    """The Effect an effect-tool call declares (input already schema-validated).

    Raises:
        EffectToolError: the input names a scope that does not exist here.
    """
    args: dict[str, Any] = input if isinstance(input, dict) else {}
    if name == "write_memory":
        return WriteMemory(scope=memory_scope(args, session), key=args["key"], value=args["value"])
    if name == "delete_memory":
        return DeleteMemory(scope=memory_scope(args, session), key=args["key"])
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
