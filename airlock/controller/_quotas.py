"""Tenant quotas: admission of a submitted job (in the store's transaction, so concurrent
submits cannot overshoot), the cost a starting job may still spend today, and the room left
for artifacts. Each exceeded quota is a :class:`QuotaExceeded` naming it, its limit and use."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING

from airlock.errors import AirlockError
from airlock.identity import AuthSettings, TenantQuota
from airlock.jobs import QuotaUse, TenantUse, utcnow
from airlock.policy.resources import parse_cpu, parse_disk, parse_memory
from airlock.state import Op
from layer0 import TurnConfig, TurnInput

from ._tenant_use import COUNTED, Usage, measure

if TYPE_CHECKING:
    from airlock.config import AgentConfig

    from ._store import Admission, JobStore


class QuotaExceeded(AirlockError):
    """A tenant's quota would be exceeded (``RESOURCE_EXHAUSTED`` on the wire)."""

    def __init__(self, tenant: str, quota: str, limit: object, used: object) -> None:
        super().__init__(f"tenant {tenant!r} is at its {quota} quota: {used} used of {limit}")
        self.tenant = tenant
        self.quota = quota
        self.limit = str(limit)
        self.used = str(used)


_SIZES: tuple[tuple[str, Callable[[str], int]], ...] = (
    ("cpu", parse_cpu),
    ("memory", parse_memory),
    ("disk", parse_disk),
)


def check_resources(tenant: str, quota: TenantQuota, agent: AgentConfig) -> None:
    """The agent's sandbox asks for no more than the tenant's ``max_*`` allow.

    Raises:
        QuotaExceeded: ``max_cpu``, ``max_memory`` or ``max_disk``; an agent with no limit
            on a resource the quota bounds asks for the whole host, so it is refused too.
    """
    asked = agent.environment.resources
    for name, parse in _SIZES:
        limit = getattr(quota, f"max_{name}")
        if limit is None:
            continue
        value = getattr(asked, name) if asked is not None else None
        if value is None or parse(value) > parse(limit):
            raise QuotaExceeded(tenant, f"max_{name}", limit, value or "unlimited")


def check_admission(tenant: str, quota: TenantQuota, use: Usage) -> None:
    """One more submitted job fits ``quota`` given ``use``.

    Raises:
        QuotaExceeded: the first quota that does not.
    """
    if quota.concurrent_jobs is not None and use.concurrent_jobs >= quota.concurrent_jobs:
        raise QuotaExceeded(tenant, "concurrent_jobs", quota.concurrent_jobs, use.concurrent_jobs)
    if quota.jobs_per_minute is not None and use.jobs_last_minute >= quota.jobs_per_minute:
        raise QuotaExceeded(tenant, "jobs_per_minute", quota.jobs_per_minute, use.jobs_last_minute)
    if quota.cost_per_day is not None and use.cost_today >= quota.cost_per_day:
        raise QuotaExceeded(tenant, "cost_per_day", quota.cost_per_day, use.cost_today)
    if quota.artifact_bytes is not None and use.artifact_bytes >= quota.artifact_bytes:
        raise QuotaExceeded(tenant, "artifact_bytes", quota.artifact_bytes, use.artifact_bytes)


def capped(input: TurnInput, default: Decimal | None, left: Decimal | None) -> TurnInput:
    """``input`` whose ``max_cost`` (its own, else the agent's ``default``) is at most ``left``,
    what the tenant may still spend today: the turn then stops with exit reason ``budget`` as
    it does at its own ``max_cost``. Unchanged when nothing is left to cap."""
    config = input.config or TurnConfig()
    own = config.max_cost if config.max_cost is not None else default
    if left is None or (own is not None and own <= left):
        return input
    return input.model_copy(update={"config": config.model_copy(update={"max_cost": left})})


class Quotas:
    """The tenants' quotas (from ``auth:``) against their use in ``store``."""

    def __init__(self, settings: AuthSettings, store: JobStore) -> None:
        self.settings = settings
        self._store = store

    def admission(self, tenant: str, agent: AgentConfig) -> Admission | None:
        """What the store runs in the transaction that records a submitted job (None: no
        quota counts jobs, cost or bytes).

        Raises:
            QuotaExceeded: at once for the sandbox's size; in the transaction for the rest.
        """
        quota = self.settings.quotas(tenant)
        check_resources(tenant, quota, agent)
        counted = frozenset(name for name in COUNTED if getattr(quota, name) is not None)
        if not counted:
            return None

        def admit() -> Op[None]:
            check_admission(tenant, quota, (yield from measure(tenant, utcnow(), counted)))

        return admit

    async def cost_left(self, tenant: str) -> Decimal | None:
        """What ``tenant`` may still spend today (None: no ``cost_per_day``)."""
        limit = self.settings.quotas(tenant).cost_per_day
        if limit is None:
            return None
        use = await self._store.tenant_use(tenant, frozenset({"cost_per_day"}))
        return max(Decimal(0), limit - use.cost_today)

    async def artifact_room(self, tenant: str) -> int | None:
        """Artifact bytes ``tenant`` may still keep (None: no ``artifact_bytes``)."""
        limit = self.settings.quotas(tenant).artifact_bytes
        if limit is None:
            return None
        use = await self._store.tenant_use(tenant, frozenset({"artifact_bytes"}))
        return max(0, limit - use.artifact_bytes)

    async def tenant_use(self, tenant: str) -> TenantUse:
        """Each quota of ``tenant`` with its limit (None: unlimited) and use, for
        ``airlock tenants``."""
        quota, use = self.settings.quotas(tenant), await self._store.tenant_use(tenant)
        used: dict[str, object] = {
            "concurrent_jobs": use.concurrent_jobs,
            "jobs_per_minute": use.jobs_last_minute,
            "cost_per_day": use.cost_today,
            "artifact_bytes": use.artifact_bytes,
        }
        lines = [
            QuotaUse(
                quota=name,
                limit=None if getattr(quota, name) is None else str(getattr(quota, name)),
                used=str(value),
            )
            for name, value in used.items()
        ]
        lines += [
            QuotaUse(quota=f"max_{name}", limit=getattr(quota, f"max_{name}"), used="-") for name, _ in _SIZES
        ]
        return TenantUse(tenant=tenant, quotas=tuple(lines))
