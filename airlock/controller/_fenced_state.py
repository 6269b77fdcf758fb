"""FencedState: the state store as a job's effects write it, fenced to the replica holding it."""

from __future__ import annotations

from typing import Any

from layer0 import Scope, SearchResult, StateStore

from ._store import JobStore

# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]


class FencedState:
    """``state`` for the effects of ``job_id``: each write or delete first checks that this
    replica still holds the job (refused with ``LeaseLost`` once another adopted it); reads
    pass through.

    The check and the write are two transactions: a replica paused between them (a few
    microseconds) could still write once after its lease ran out. Memory writes are idempotent
    (the adopter writes the same value when it applies the effect again).
    """

    def __init__(self, state: StateStore, store: JobStore, job_id: str) -> None:
        self._state = state
        self._store = store
        self._job_id = job_id

    async def read(self, scope: Scope, key: str) -> Any | None:
        """As the state store."""
        return await self._state.read(scope, key)

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        """As the state store, by the replica holding the job only."""
        await self._store.check_claim(self._job_id)
        await self._state.write(scope, key, value)

    async def delete(self, scope: Scope, key: str) -> None:
        """As the state store, by the replica holding the job only."""
        await self._store.check_claim(self._job_id)
        await self._state.delete(scope, key)

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """As the state store."""
        return await self._state.list(scope, prefix)

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """As the state store."""
        return await self._state.search(scope, query, limit)
