"""layer0's ``dispatch_many`` over any ``dispatch``: concurrent, bounded, failures in place."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from layer0 import AgentId, OrchError, TurnInput, TurnOutput

#: One turn of an agent, as an Orchestrator's ``dispatch`` runs it.
Dispatch = Callable[[AgentId, TurnInput], Awaitable[TurnOutput]]


async def dispatch_concurrently(
    dispatch: Dispatch, tasks: list[tuple[AgentId, TurnInput]], limit: int | None = None
) -> list[TurnOutput | OrchError]:
    """Run ``tasks`` through ``dispatch`` at once (at most ``limit`` in flight; None: all);
    results in input order, each ``OrchError`` (never raised) in its task's place."""
    slots = asyncio.Semaphore(limit) if limit else None

    async def one(agent: AgentId, input: TurnInput) -> TurnOutput | OrchError:
        try:
            if slots is None:
                return await dispatch(agent, input)
            async with slots:
                return await dispatch(agent, input)
        except OrchError as e:
            return e

    return list(await asyncio.gather(*(one(agent, input) for agent, input in tasks)))
