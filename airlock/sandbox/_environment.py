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

from airlock.policy import SidecarRoute
from airlock.spec import HISTORY_KEY
from layer0 import EnvError, EnvironmentSpec, Scope, StateReader, Turn, TurnInput, TurnOutput

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
) -> tuple[StateEntry, ...]:
    """What a turn reading through ``reader`` sees for ``input``: its session's history, then
    the memory it may read (``read_memory``, ``search_memory``, ``memory.context_keys``): every
    key of its session's scope, then of the global scope, each only when ``memory`` (the
    agent's memory grants: ``session``, ``global``) names it.

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
    scopes = [Scope.global_()] if "global" in memory else []
    if input.session is not None:
        scope = Scope.session(input.session)
        try:
            history = await reader.read(scope, HISTORY_KEY)
        except Exception as e:
            raise EnvError.other(f"cannot read the history of session {input.session}: {e}") from e
        if history is not None:
            entries.append(StateEntry(scope, HISTORY_KEY, history))
        if "session" in memory:
            scopes.insert(0, scope)
    kept = used = left = left_bytes = 0
    for scope in scopes:
        where = f"session {input.session}" if scope.kind == "session" else "the global scope"
        try:
            keys = await reader.list(scope, "")
        except Exception as e:
            raise EnvError.other(f"cannot list the memory of {where}: {e}") from e
        for key in keys:
            if scope.kind == "session" and key == HISTORY_KEY:
                continue
            if kept >= max_entries:
                left += 1
                continue
            try:
                value = await reader.read(scope, key)
            except Exception as e:
                raise EnvError.other(f"cannot read memory {key!r} of {where}: {e}") from e
            if value is None:
                continue
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
            if used + size > max_bytes:
                left, left_bytes = left + 1, left_bytes + size
                continue
            entries.append(StateEntry(scope, key, value))
            kept, used = kept + 1, used + size
    if left:
        _log.warning(
            "%d memory entries (%d bytes read among them) left out of the state snapshot for "
            "session %s: it carries at most %d entries and %d bytes besides the history",
            left,
            left_bytes,
            input.session,
            max_entries,
            max_bytes,
        )
    return tuple(entries)
