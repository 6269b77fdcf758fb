"""Which effects an agent may declare: its ``EffectPolicy`` and the pure check against it.

A sandbox is untrusted, so every effect in the ``TurnOutput`` it returns is checked before
the controller applies it. :func:`check_effect` is that check: it takes the declaring
agent's policy, one effect and the job it came from, and returns why the effect is refused
(or None). It does no I/O and keeps no state.

Secure defaults: no delegate, handoff or signal target unless listed; memory writes and
deletes only in the declaring job's own session, unless ``effects.memory`` grants more:
``global``, ``workflow`` (the job's own workflow, shared by the agents of its tree),
``agent`` (the declaring agent's own scope within that workflow) or ``custom:<name>`` (that
named scope); another workflow's or agent's scope is never writable; custom effects refused
unless their ``effect_type`` is listed; logs allowed but size-capped. Whatever the grants,
the session history the runner writes back
(``WriteMemory(Scope.session(<the job's session>), "history", …)``) is allowed for the
job's own session only, and an output with more than ``max_effects`` effects has every
effect refused (an over-long output is malformed; applying a prefix of it would be
arbitrary).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    Strict,
    StringConstraints,
)

from airlock.spec import HISTORY_KEY, WORKFLOW_METADATA
from layer0 import (
    AgentId,
    CustomEffect,
    Delegate,
    DeleteMemory,
    Effect,
    Handoff,
    Log,
    Scope,
    SessionId,
    Signal,
    TurnInput,
    WorkflowId,
    WriteMemory,
)

#: The longest memory key accepted, in characters.
MAX_KEY_CHARS = 256
#: Metadata keys of a turn input that only the controller sets (on a handoff).
CONTROLLER_METADATA = ("handoff_state", "handoff_from")

#: The memory grants that name no scope of their own: ``session``, ``workflow`` and ``agent``
#: (the declaring job's own), ``global``; a custom scope is granted as ``custom:<name>``.
MEMORY_GRANTS = ("session", "global", "workflow", "agent")


def _known_grant(grant: str) -> str:
    if grant not in MEMORY_GRANTS and not _custom_grant(grant):
        raise ValueError(f"unknown memory scope {grant!r}; valid: {', '.join(MEMORY_GRANTS)}, custom:<name>")
    return grant


#: A memory grant: one of :data:`MEMORY_GRANTS`, or ``custom:<name>``.
MemoryGrant = Annotated[str, StringConstraints(max_length=135), AfterValidator(_known_grant)]


def _memory_grants(value: object) -> object:
    """``effects.memory`` as a list: ``{scopes: [...]}`` is the same list, spelt out."""
    if isinstance(value, dict) and set(value) == {"scopes"}:
        return value["scopes"]
    return value


_Name = Annotated[str, StringConstraints(min_length=1, max_length=128)]
_Limit = Annotated[int, Strict(), Field(ge=1, le=1 << 30)]


class EffectPolicy(BaseModel):
    """What an agent's turns may declare (the ``effects:`` key of an agent entry)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Agents this one may delegate to.
    delegate: tuple[_Name, ...] = ()
    #: Agents it may hand off to.
    handoff: tuple[_Name, ...] = ()
    #: Scopes it may write and delete in (and, in a sandbox, read): ``session`` (its job's own
    #: session), ``workflow`` (its job's workflow), ``agent`` (its own within that workflow),
    #: ``global``, ``custom:<name>``.
    memory: Annotated[tuple[MemoryGrant, ...], BeforeValidator(_memory_grants)] = ("session",)
    #: Workflows it may signal.
    signal: tuple[_Name, ...] = ()
    #: ``CustomEffect`` types it may declare.
    custom: tuple[_Name, ...] = ()
    #: Effects one turn may declare; an output with more has all of them refused.
    max_effects: _Limit = 64
    #: The largest memory value, delegate input, handoff state, signal payload, log or
    #: custom effect, in bytes of compact JSON.
    max_value_bytes: _Limit = 1 << 20

    def summary(self) -> dict[str, JsonValue]:
        """The policy as plain JSON (for ``airlock agents show``)."""
        return self.model_dump(mode="json")


@dataclass(frozen=True)
class EffectContext:
    """Where an effect comes from: the declaring agent's job and the effect's place in its output."""

    #: The agent whose turn declared the effect (None: not known, so nothing is granted).
    agent: AgentId | None
    #: The session of that agent's job (None: the job has none).
    session: SessionId | None
    #: The effect's position in its ``TurnOutput.effects``.
    index: int = 0
    #: How many effects that output declared.
    count: int = 1
    #: 0 for the submitted job's output, n for a child n dispatches down.
    depth: int = 0
    #: The workflow of that agent's job (None: not known, so no workflow scope is its own).
    workflow: WorkflowId | None = None


def with_workflow(input: TurnInput, workflow: str) -> TurnInput:
    """``input`` naming ``workflow`` as its turn's (``metadata.workflow``, replacing any other)."""
    metadata = dict(input.metadata) if isinstance(input.metadata, dict) else {}
    if metadata.get(WORKFLOW_METADATA) == workflow:
        return input
    return input.model_copy(update={"metadata": {**metadata, WORKFLOW_METADATA: workflow}})


def json_size(value: object) -> int:
    """``value``'s size in bytes as compact UTF-8 JSON."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    return len(text.encode())


def check_effect(policy: EffectPolicy, effect: Effect, context: EffectContext) -> str | None:
    """Why ``effect`` may not be applied for ``context``'s agent under ``policy``; None if it may."""
    who = f"agent {context.agent}" if context.agent is not None else "an unknown agent"
    if context.count > policy.max_effects:
        return (
            f"the turn declared {context.count} effects, more than max_effects "
            f"({policy.max_effects}) of {who}; none of them is applied"
        )
    match effect:
        case WriteMemory(scope=scope, key=key, value=value):
            return _memory(policy, scope, key, context, who) or _size(policy, "memory value", value)
        case DeleteMemory(scope=scope, key=key):
            return _memory(policy, scope, key, context, who)
        case Delegate(agent=agent, input=child_input):
            if str(agent) not in policy.delegate:
                return _not_granted(who, "delegate to", agent, policy.delegate, "effects.delegate")
            if child_input.session is not None and child_input.session != context.session:
                return (
                    f"a delegate's input may not name session {_quote(child_input.session)} (not this job's)"
                )
            if isinstance(child_input.metadata, dict):
                reserved = [k for k in CONTROLLER_METADATA if k in child_input.metadata]
                if reserved:
                    names = ", ".join(reserved)
                    return f"a delegate's input may not set metadata {names} (the controller sets it)"
            return _size(policy, "delegate input", child_input.model_dump(mode="json"))
        case Handoff(agent=agent, state=state):
            if str(agent) not in policy.handoff:
                return _not_granted(who, "hand off to", agent, policy.handoff, "effects.handoff")
            return _size(policy, "handoff state", state)
        case Signal(target=target, payload=payload):
            if str(target) not in policy.signal:
                return _not_granted(who, "signal workflow", target, policy.signal, "effects.signal")
            return _size(policy, "signal payload", payload.model_dump(mode="json"))
        case Log(message=message, data=data):
            return _size(policy, "log", {"message": message, "data": data})
        case CustomEffect(effect_type=effect_type, data=data):
            if effect_type not in policy.custom:
                return _not_granted(
                    who, "declare custom effect", effect_type, policy.custom, "effects.custom"
                )
            return _size(policy, "custom effect", data)
    return f"unknown effect {type(effect).__name__}"  # pragma: no cover - the union is closed


def _custom_grant(grant: str) -> bool:
    name = grant.removeprefix("custom:")
    return grant.startswith("custom:") and bool(name) and len(name) <= 128 and not name.isspace()


def _memory(policy: EffectPolicy, scope: Scope, key: str, context: EffectContext, who: str) -> str | None:
    if len(key) > MAX_KEY_CHARS:
        return f"memory key of {len(key)} characters (at most {MAX_KEY_CHARS})"
    match scope.kind:
        case "global":
            return _granted(policy, "global", who, "global memory")
        case "custom":
            grant = f"custom:{scope.custom_name}"
            return _granted(policy, grant, who, f"custom memory scope {_quote(scope.custom_name)}")
        case "workflow" | "agent":
            return _workflow_memory(policy, scope, context, who)
        case "session":
            return _session_memory(policy, scope, key, context, who)
    return f"{who} may not write {scope.kind!r} memory"  # pragma: no cover - the kinds are closed


def _granted(policy: EffectPolicy, grant: str, who: str, what: str) -> str | None:
    if grant in policy.memory:
        return None
    return f"{who} may not write {what} (not granted in effects.memory)"


def _workflow_memory(policy: EffectPolicy, scope: Scope, context: EffectContext, who: str) -> str | None:
    """A ``workflow`` or ``agent`` scope: granted, and the declaring job's own."""
    what = "workflow memory" if scope.kind == "workflow" else "agent memory"
    refused = _granted(policy, scope.kind, who, what)
    if refused is not None:
        return refused
    if context.workflow is None:
        return f"workflow {_quote(scope.workflow_id)} is not this job's (the job's workflow is not known)"
    if scope.workflow_id != context.workflow:
        return f"workflow {_quote(scope.workflow_id)} is not this job's workflow ({_quote(context.workflow)})"
    if scope.kind == "agent" and scope.agent_id != context.agent:
        return f"agent scope {_quote(scope.agent_id)} is not {who}'s own"
    return None


def _session_memory(
    policy: EffectPolicy, scope: Scope, key: str, context: EffectContext, who: str
) -> str | None:
    if context.session is None:
        return f"session {_quote(scope.session_id)} is not this job's (the job has no session)"
    if scope.session_id != context.session:
        return f"session {_quote(scope.session_id)} is not this job's session ({_quote(context.session)})"
    if key == HISTORY_KEY or "session" in policy.memory:
        return None  # the history is how a session keeps its conversation: always its own
    return f"{who} may not write session memory (not granted in effects.memory)"


def _size(policy: EffectPolicy, what: str, value: JsonValue | object) -> str | None:
    size = json_size(value)
    if size > policy.max_value_bytes:
        return f"{what} of {size} bytes exceeds max_value_bytes ({policy.max_value_bytes})"
    return None


def _not_granted(who: str, verb: str, target: object, granted: tuple[str, ...], key: str) -> str:
    listed = ", ".join(granted) or "none"
    return f"{who} may not {verb} {_quote(target)} (granted in {key}: {listed})"


def _quote(value: object, limit: int = 128) -> str:
    """``value`` quoted for a reason, cut to ``limit`` characters (a sandbox chose it)."""
    text = str(value)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"… ({len(text)} characters)"
