"""SandboxEnvironment: any backend as a ``layer0.Environment``, for protocol users.

``layer0.Environment.run(turn, input, spec)`` hands over a built turn; a sandbox needs the
turn as data. The adapter accepts any Turn describable as an AgentSpec (built by
:func:`airlock.build.build_turn`, or a ``RemoteTurn``) and reads, through the turn's own
``StateReader``, the state it would read in-process (its session's history), which
travels with the request as the read-only snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping

from airlock.policy import SidecarRoute
from airlock.spec import HISTORY_KEY
from layer0 import EnvError, EnvironmentSpec, Scope, StateReader, Turn, TurnInput, TurnOutput

from ._events import EventSink
from ._port import Sandbox, SandboxRequest, StateEntry
from ._turn import agent_spec_of

__all__ = ["SandboxEnvironment", "state_snapshot"]


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
        events: EventSink | None = None,
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
        events: EventSink | None = None,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
    ) -> TurnOutput:
        """Run ``turn`` in a fresh sandbox; its StateReader's view travels as the snapshot.

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
        )
        return await self.sandbox.run(request)

    async def host_address(self) -> str:
        """:meth:`Sandbox.host_address` of the backend."""
        return await self.sandbox.host_address()


async def state_snapshot(reader: StateReader | None, input: TurnInput) -> tuple[StateEntry, ...]:
    """What a turn reading through ``reader`` sees for ``input``: its session's history.

    Raises:
        EnvError: ``other`` when the reader fails.
    """
    if reader is None or input.session is None:
        return ()
    scope = Scope.session(input.session)
    try:
        history = await reader.read(scope, HISTORY_KEY)
    except Exception as e:
        raise EnvError.other(f"cannot read the history of session {input.session}: {e}") from e
    return () if history is None else (StateEntry(scope, HISTORY_KEY, history),)
