"""Protocol ③, State: how data persists across turns and sessions."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from ._effect import Scope
from ._wire import WireModel

# ``list`` is shadowed by the method of that name inside the classes below.
_Keys = list[str]


class SearchResult(WireModel):
    """A key matched by a search, with a relevance score and an optional snippet."""

    key: str
    score: float = Field(allow_inf_nan=False)
    snippet: str | None = None


_Results = list[SearchResult]


@runtime_checkable
class StateReader(Protocol):
    """Read-only view of state, handed to a turn for context assembly."""

    async def read(self, scope: Scope, key: str) -> Any | None:
        """The value under ``key`` in ``scope``, or None when absent."""
        ...

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """Keys in ``scope`` starting with ``prefix`` (all keys for ``""``), sorted."""
        ...

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """Keys whose values match ``query``, best first; ``[]`` if unsupported."""
        ...


@runtime_checkable
class StateStore(StateReader, Protocol):
    """Protocol ③: CRUD + list + search over scoped JSON values.

    Every StateStore is a StateReader (structurally); ``read_only(store)`` gives a
    turn a view that has no write methods at all.
    """

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        """Create or overwrite ``key`` in ``scope``."""
        ...

    async def delete(self, scope: Scope, key: str) -> None:
        """Delete ``key`` in ``scope``; a missing key is a no-op."""
        ...


class ReadOnlyState:
    """A StateReader over a store that exposes no way to write.

    The wrapped store is private; a turn given this view cannot reach ``write`` or
    ``delete`` through it.
    """

    __slots__ = ("__reader",)

    def __init__(self, reader: StateReader) -> None:
        self.__reader = reader

    async def read(self, scope: Scope, key: str) -> Any | None:
        """See ``StateReader.read``."""
        return await self.__reader.read(scope, key)

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """See ``StateReader.list``."""
        return await self.__reader.list(scope, prefix)

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """See ``StateReader.search``."""
        return await self.__reader.search(scope, query, limit)


def read_only(store: StateReader) -> StateReader:
    """Wrap a store (or reader) in a view that cannot write."""
    return ReadOnlyState(store)
