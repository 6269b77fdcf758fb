"""InMemoryStore: a dict per scope; for tests and ephemeral runs."""

from __future__ import annotations

from typing import Any

from layer0 import Scope, SearchResult

from ._codec import check_key, check_prefix, decode_value, encode_value, scope_text
from ._search import rank

# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]


class InMemoryStore:
    """A ``layer0.StateStore`` held in process memory; nothing survives the process.

    Values are kept as JSON text, so a read returns a fresh copy and mutating it
    never changes the store. Every method completes without awaiting, so concurrent
    coroutines on one event loop cannot interleave inside an operation.
    """

    def __init__(self) -> None:
        self._scopes: dict[str, dict[str, str]] = {}

    async def read(self, scope: Scope, key: str) -> Any | None:
        """The value under ``key``, or None."""
        text = self._scopes.get(scope_text(scope), {}).get(check_key(key))
        return None if text is None else decode_value(text)

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        """Create or overwrite ``key``. Raises ``StateError.serialization`` for non-JSON."""
        check_key(key)
        text = encode_value(value)
        self._scopes.setdefault(scope_text(scope), {})[key] = text

    async def delete(self, scope: Scope, key: str) -> None:
        """Delete ``key``; a missing key is a no-op."""
        check_key(key)
        entries = self._scopes.get(scope_text(scope))
        if entries is not None:
            entries.pop(key, None)

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        """Sorted keys starting with ``prefix`` (all keys for ``""``)."""
        check_prefix(prefix)
        return sorted(k for k in self._scopes.get(scope_text(scope), {}) if k.startswith(prefix))

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        """Keys whose JSON text contains the query's terms (case-insensitive), best first."""
        return rank(self._scopes.get(scope_text(scope), {}).items(), query, limit)
