"""The state store as a job writes it (its effects, its turn records), fenced to the replica
holding the job."""

from __future__ import annotations

from typing import Any

from airlock.state import SqlStateStore
from layer0 import Scope, SearchResult, StateStore

from ._store import JobStore

# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]


def fenced_state(state: StateStore, store: JobStore, job_id: str) -> StateStore:
    """``state`` for writes by ``job_id``: each write or delete is refused (``LeaseLost``)
    once another replica adopted the job; reads pass through.

    Where the state and the job tables share a database (PostgreSQL: the replicas' one store),
    the claim is checked in the write's own transaction, and an adoption waits for it, so a
    replica that lost the job writes nothing after the adopter took it. Elsewhere (SQLite files:
    one controller, which no other adopts) the claim is checked just before the write.
    """
    if isinstance(state, SqlStateStore) and state.database is store.database:
        return state.guarded(lambda: store.fence(job_id))
    return CheckedState(state, store, job_id)


class CheckedState:
    """``state`` with ``job_id``'s claim checked before each write or delete (two transactions:
    for a store no other replica adopts from)."""

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
