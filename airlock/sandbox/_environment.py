"""SandboxEnvironment: any backend as a ``layer0.Environment``, for protocol users.

``layer0.Environment.run(turn, input, spec)`` hands over a built turn; a sandbox needs the
turn as data. The adapter accepts any Turn describable as an AgentSpec (built by
:func:`airlock.build.build_turn`, or a ``RemoteTurn``) and reads, through the turn's own
``StateReader``, the state it would read in-process (its session's history and the memory
it may read), which travels with the request as the read-only snapshot.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from airlock.policy import SidecarRoute
from airlock.spec import HISTORY_KEY
from layer0 import EnvError, EnvironmentSpec, Scope, SessionId, StateReader, Turn, TurnInput, TurnOutput

from ._events import SandboxEventSink
from ._placement import Placement
from ._port import Sandbox, SandboxRequest, StateEntry
from ._turn import agent_spec_of

__all__ = ["SandboxEnvironment", "state_snapshot"]

_log = logging.getLogger(__name__)

#: The memory a snapshot carries besides the history, at most: entries, and bytes of their
#: values as compact JSON.
SNAPSHOT_MAX_ENTRIES = 1000
SNAPSHOT_MAX_BYTES = 4 * 1024 * 1024


class SandboxEnvironment:
    """A ``layer0.Environment`` running each turn in a fresh sandbox of ``sandbox``.

    Args:
        sandbox: the backend.
        sidecar_routes: upstream + header per sidecar credential name, over the built-in
            conventions (``anthropic-api-key``, ``openai-api-key``); ``run`` may add more.
        events: default sink for the turn's events (``run(..., events=)`` overrides).
    """

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
        events: SandboxEventSink | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.sidecar_routes = dict(sidecar_routes or {})
        self.events = events

    async def run(
        self,
        turn: Turn,
        input: TurnInput,
        spec: EnvironmentSpec,
        *,
        events: SandboxEventSink | None = None,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
        placement: Placement | None = None,
    ) -> TurnOutput:
        """Run ``turn`` in a fresh sandbox (scheduled by ``placement``, on a backend that
        places sandboxes); its StateReader's view travels as the snapshot.

        Raises:
            EnvError: ``other`` for a turn not describable as an AgentSpec, or whose state
                cannot be read; whatever the backend raises (see :class:`Sandbox`).
        """
        agent = agent_spec_of(turn)
        request = SandboxRequest.compile(
            agent,
            input,
            spec,
            sidecar_routes={**self.sidecar_routes, **(sidecar_routes or {})},
            state=await state_snapshot(getattr(turn, "state", None), input),
            events=events if events is not None else self.events,
            placement=placement,
        )
        return await self.sandbox.run(request)

    async def host_address(self) -> str:
        """:meth:`Sandbox.host_address` of the backend."""
        return await self.sandbox.host_address()


async def state_snapshot(
    reader: StateReader | None,
    input: TurnInput,
    *,
    max_entries: int = SNAPSHOT_MAX_ENTRIES,
    max_bytes: int = SNAPSHOT_MAX_BYTES,
    memory: Collection[str] = ("session", "global"),
    workflow: str | None = None,
    agent: str | None = None,
) -> tuple[StateEntry, ...]:
    """What a turn reading through ``reader`` sees for ``input``: its session's history, then
    the memory it may read (``read_memory``, ``search_memory``, ``memory.context_keys``): every
    key of its session's scope, of its ``workflow``'s, of ``agent``'s within that workflow, of
    each custom scope, then of the global scope, each only when ``memory`` (the agent's memory
    grants: ``session``, ``workflow``, ``agent``, ``custom:<name>``, ``global``) names it.

    The memory is bounded: at most ``max_entries`` entries and ``max_bytes`` bytes of values
    (compact JSON), the history not counted. A StateReader tells no write times, so what is
    kept beyond that favours the session (this conversation) over the global scope, then key
    order; an entry that does not fit is left out (a smaller one after it may still fit) and
    a warning says how many were. The bound never fails the snapshot.

    Raises:
        EnvError: ``other`` when the reader fails.
    """
    if reader is None:
        return ()
    entries: list[StateEntry] = []
    if input.session is not None:
        entries += await _history(reader, input.session)
    scopes = _granted_scopes(memory, input.session, workflow, agent)
    budget = _MemoryBudget(max_entries, max_bytes)
    for scope in scopes:
        entries += await _memory_of(reader, scope, input.session, budget)
    if budget.left:
        _log.warning(
            "%d memory entries (%d bytes read among them) left out of the state snapshot for "
            "session %s: it carries at most %d entries and %d bytes besides the history",
            budget.left,
            budget.left_bytes,
            input.session,
            max_entries,
            max_bytes,
        )
    return tuple(entries)


def _granted_scopes(
    memory: Collection[str], session: SessionId | None, workflow: str | None, agent: str | None
) -> list[Scope]:
    """The scopes ``memory`` grants that this turn has, the session's first and global last."""
    scopes = [Scope.session(session)] if session is not None and "session" in memory else []
    if workflow and "workflow" in memory:
        scopes.append(Scope.workflow(workflow))
    if workflow and agent and "agent" in memory:
        scopes.append(Scope.agent(workflow, agent))
    scopes += [Scope.custom(g.removeprefix("custom:")) for g in memory if g.startswith("custom:")]
    return scopes + ([Scope.global_()] if "global" in memory else [])


async def _history(reader: StateReader, session: SessionId) -> list[StateEntry]:
    """The session's history entry (none before its first turn)."""
    scope = Scope.session(session)
    try:
        history = await reader.read(scope, HISTORY_KEY)
    except Exception as e:
        raise EnvError.other(f"cannot read the history of session {session}: {e}") from e
    return [] if history is None else [StateEntry(scope, HISTORY_KEY, history)]


@dataclass
class _MemoryBudget:
    """What the memory part of a snapshot may still take, and what it left out."""

    max_entries: int
    max_bytes: int
    kept: int = 0
    used: int = 0
    left: int = 0
    left_bytes: int = 0

    def admit(self, size: int) -> bool:
        """Take an entry of ``size`` bytes if it fits; else count it as left out."""
        if self.used + size > self.max_bytes:
            self.left, self.left_bytes = self.left + 1, self.left_bytes + size
            return False
        self.kept, self.used = self.kept + 1, self.used + size
        return True


async def _memory_of(
    reader: StateReader, scope: Scope, session: SessionId | None, budget: _MemoryBudget
) -> list[StateEntry]:
    """The entries of one memory scope that fit ``budget`` (the session's history excepted)."""
    where = f"session {session}" if scope.kind == "session" else f"the {'/'.join(scope.path_parts())} scope"
    try:
        keys = await reader.list(scope, "")
    except Exception as e:
        raise EnvError.other(f"cannot list the memory of {where}: {e}") from e
    entries = []
    for key in keys:
        if scope.kind == "session" and key == HISTORY_KEY:
            continue
        if budget.kept >= budget.max_entries:
            budget.left += 1
            continue
        try:
            value = await reader.read(scope, key)
        except Exception as e:
            raise EnvError.other(f"cannot read memory {key!r} of {where}: {e}") from e
        if value is None:
            continue
        if budget.admit(len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())):
            entries.append(StateEntry(scope, key, value))
    return entries
