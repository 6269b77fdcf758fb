"""GuardedState: a SqlStateStore whose writes each first pass a guard, in their transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from layer0 import Scope, SearchResult

from ._sql import Op

# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]

#: An operation that refuses (raises) when the write must not happen, or returns.
Guard = Callable[[], Op[None]]


class OpStore(Protocol):
    """A state store whose writes are operations it can run (``SqlStateStore``)."""

    async def read(self, scope: Scope, key: str) -> Any | None: ...
    async def list(self, scope: Scope, prefix: str) -> _Keys: ...
    async def search(self, scope: Scope, query: str, limit: int) -> _Results: ...
    def write_op(self, scope: Scope, key: str, value: Any) -> Op[None]: ...
    def delete_op(self, scope: Scope, key: str) -> Op[None]: ...
    async def run_write(self, op: Op[None]) -> None: ...


class GuardedState:
    """``store`` (a ``layer0.StateStore``) with ``guard()`` run before each write or delete, in
    the same transaction: the write happens only if the guard passes, and nothing the guard
    read can change between its check and the write. Reads pass through.

    Used by the controller to fence a job's state writes to the replica holding the job.
    """

    def __init__(self, store: OpStore, guard: Guard) -> None:
        self._store = store
        self._guard = guard

    def _guarded(self, op: Op[None]) -> Op[None]:
        yield from self._guard()
        yield from op

    async def read(self, scope: Scope, key: str) -> Any | None:
        """As the store."""
        return await self._store.read(scope, key)

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        """As the store, if the guard passes."""
        await self._store.run_write(self._guarded(self._store.write_op(scope, key, value)))

    async def delete(self, scope: Scope, key: str) -> None:
        """As the store, if the guard passes."""
        await self._store.run_write(self._guarded(self._store.delete_op(scope, key)))

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """As the store."""
        return await self._store.list(scope, prefix)

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """As the store."""
        return await self._store.search(scope, query, limit)
