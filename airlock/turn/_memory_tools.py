"""Memory tools: ``read_memory`` and ``search_memory``, answered by the turn from its read-only
state (in a sandbox, the snapshot the runner was given). They never write: writes are the
``write_memory`` effect, applied after the turn.

Scopes are those of ``write_memory``: ``session`` (the default when the turn has one),
``workflow`` (the turn's workflow, shared by its agents), ``agent`` (this agent within the
workflow), ``global`` or ``custom:<name>``. A sandboxed turn sees the scopes its agent's
``effects.memory`` grants. The session's history key is not memory: it is already the
conversation.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import JsonValue

from airlock.errors import ToolError
from airlock.spec import HISTORY_KEY
from layer0 import AgentId, Scope, StateReader

from ._effect_tools import (
    SCOPE_PATTERN,
    EffectToolError,
    MemoryPlace,
    memory_scope,
    scope_name,
    turn_workflow,
)
from ._tool import ToolContext, ToolDyn

_SCOPE: dict[str, Any] = {
    "type": "string",
    "pattern": SCOPE_PATTERN,
    "description": (
        "Whose memory: session (this conversation's; the default when there is one), workflow "
        "(shared by this workflow's agents), agent (this agent's within the workflow), global, "
        "or custom:<name>."
    ),
}
#: Keys a "no memory under that key" answer lists, at most.
LISTED_KEYS = 20
#: Results ``search_memory`` returns by default, and at most.
SEARCH_LIMIT = 5
MAX_SEARCH_LIMIT = 20
#: Characters of a value shown in the context (``AgentSpec.memory.context_keys``); longer
#: values are cut there, saying so.
CONTEXT_VALUE_CHARS = 20_000


def _scope_of(args: dict[str, Any], ctx: ToolContext) -> Scope:
    place = MemoryPlace(ctx.session, turn_workflow(ctx.metadata), AgentId(ctx.agent) if ctx.agent else None)
    try:
        return memory_scope(args, place)
    except EffectToolError as e:
        raise ToolError.model_retry(str(e)) from e


def _is_history(scope: Scope, key: str) -> bool:
    return scope.kind == "session" and key == HISTORY_KEY


class _MemoryTool:
    """What both memory tools share: the state they read, and the scope a call names."""

    def __init__(self, state: StateReader | None) -> None:
        self._state = state

    @staticmethod
    def _scope(input: JsonValue, ctx: ToolContext) -> tuple[dict[str, Any], Scope, str]:
        """The call's arguments, its scope, and the scope's name for answers."""
        args: dict[str, Any] = input if isinstance(input, dict) else {}
        scope = _scope_of(args, ctx)
        return args, scope, f"{scope_name(scope)} memory"


class ReadMemoryTool(_MemoryTool):
    """``read_memory``: the value remembered under a key (JSON text), or a clear answer that
    there is none, listing the keys that exist."""

    name = "read_memory"
    description = (
        "Read a value remembered under a key (written with write_memory in an earlier turn). "
        "Returns the value as JSON, or says there is none and lists the keys that exist."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"key": {"type": "string", "minLength": 1}, "scope": _SCOPE},
        "required": ["key"],
        "additionalProperties": False,
    }

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue:
        """The value under ``key`` in ``scope``."""
        args, scope, where = self._scope(input, ctx)
        key = str(args["key"])
        if self._state is None:
            return f"No memory is available to this turn: nothing is stored under {key!r} in {where}."
        if _is_history(scope, key):
            return f"{key!r} is this conversation's history (already in your context), not a memory."
        value = await self._state.read(scope, key)
        if value is not None:
            return json.dumps(value, ensure_ascii=False, sort_keys=True)
        keys = [k for k in await self._state.list(scope, "") if not _is_history(scope, k)]
        listed = ", ".join(repr(k) for k in keys[:LISTED_KEYS]) or "none"
        more = f" (and {len(keys) - LISTED_KEYS} more)" if len(keys) > LISTED_KEYS else ""
        return f"No memory under key {key!r} in {where}. Keys there: {listed}{more}."


class SearchMemoryTool(_MemoryTool):
    """``search_memory``: the keys whose values match a query, best first, with a snippet."""

    name = "search_memory"
    description = (
        "Search remembered values for words (case-insensitive); returns the matching keys, best "
        "first, with a snippet of each value. Read a whole value with read_memory."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1},
            "scope": _SCOPE,
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "default": SEARCH_LIMIT},
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    async def call(self, input: JsonValue, ctx: ToolContext) -> JsonValue:
        """The matches of ``query`` in ``scope`` (a list of ``{key, score, snippet}``)."""
        args, scope, where = self._scope(input, ctx)
        query = str(args["query"])
        limit = int(args.get("limit", SEARCH_LIMIT))
        if self._state is None:
            return f"No memory is available to this turn: nothing in {where} matches {query!r}."
        found = await self._state.search(scope, query, limit + 1)
        hits = [r for r in found if not _is_history(scope, r.key)][:limit]
        if not hits:
            return f"Nothing in {where} matches {query!r}."
        return [{"key": r.key, "score": r.score, "snippet": r.snippet} for r in hits]


def make_memory_tools(names: list[str] | tuple[str, ...], state: StateReader | None) -> list[ToolDyn]:
    """The memory tools named in ``names`` (of ``airlock.spec.MEMORY_TOOLS``), reading ``state``."""
    made: dict[str, ToolDyn] = {
        ReadMemoryTool.name: ReadMemoryTool(state),
        SearchMemoryTool.name: SearchMemoryTool(state),
    }
    return [made[n] for n in names]


async def memory_context(
    state: StateReader | None, place: MemoryPlace, keys: list[str] | tuple[str, ...]
) -> list[str]:
    """The values of ``keys`` as lines for the context: the session's first (when the turn has
    one), then the workflow's and this agent's (when it has a workflow), then the global ones;
    missing keys and the history key are skipped.

    Each line reads ``Memory <key> (<scope>): <JSON>``; a value longer than
    :data:`CONTEXT_VALUE_CHARS` is cut there, saying so.
    """
    if state is None or not keys:
        return []
    scopes = [Scope.session(place.session)] if place.session is not None else []
    if place.workflow is not None:
        scopes.append(Scope.workflow(place.workflow))
        if place.agent is not None:
            scopes.append(Scope.agent(place.workflow, place.agent))
    scopes.append(Scope.global_())
    lines = []
    for scope in scopes:
        for key in keys:
            if _is_history(scope, key):
                continue
            value = await state.read(scope, key)
            if value is None:
                continue
            text = json.dumps(value, ensure_ascii=False, sort_keys=True)
            if len(text) > CONTEXT_VALUE_CHARS:
                text = f"{text[:CONTEXT_VALUE_CHARS]}… (cut: {len(text)} characters in all)"
            lines.append(f"Memory {key} ({scope_name(scope)}): {text}")
    return lines
