"""Each tenant's own state: memory, session histories and anything else a turn's effects
write live in scopes of their tenant, so a job of tenant B never reads (or continues) what
tenant A's jobs wrote, even under the same session id or key."""

from __future__ import annotations

from typing import Any

from airlock.identity import DEFAULT_TENANT
from layer0 import Scope, SearchResult, StateStore

# ``list`` is shadowed by the method of that name inside the class.
_Keys = list[str]
_Results = list[SearchResult]


class TenantState:
    """A ``StateStore`` confining every scope to ``tenant``'s: scope S of tenant T is the custom
    scope ``tenant/T/<S as JSON>`` of ``inner``. The default tenant's scopes are ``inner``'s own
    (state written before tenants existed stays where it was)."""

    def __init__(self, inner: StateStore, tenant: str) -> None:
        self._inner = inner
        self._prefix = f"tenant/{tenant}/"

    def _scope(self, scope: Scope) -> Scope:
        return Scope.custom(self._prefix + scope.model_dump_json())

    async def read(self, scope: Scope, key: str) -> Any | None:
        return await self._inner.read(self._scope(scope), key)

    async def list(self, scope: Scope, prefix: str) -> _Keys:
        return await self._inner.list(self._scope(scope), prefix)

    async def search(self, scope: Scope, query: str, limit: int) -> _Results:
        return await self._inner.search(self._scope(scope), query, limit)

    async def write(self, scope: Scope, key: str, value: Any) -> None:
        await self._inner.write(self._scope(scope), key, value)

    async def delete(self, scope: Scope, key: str) -> None:
        await self._inner.delete(self._scope(scope), key)


def workflow_key(tenant: str, workflow: str) -> str:
    """Where ``tenant``'s signals to ``workflow`` are recorded (the name itself for the
    default tenant): two tenants' workflows of one name are two workflows."""
    return workflow if tenant == DEFAULT_TENANT else f"tenant/{tenant}/{workflow}"


def tenant_state(inner: StateStore, tenant: str) -> StateStore:
    """``tenant``'s view of ``inner`` (``inner`` itself for the default tenant)."""
    return inner if tenant == DEFAULT_TENANT else TenantState(inner, tenant)
