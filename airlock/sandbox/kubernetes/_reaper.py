"""Removing what dead controllers left on the cluster (every controller's sweep, ``airlock gc``).

A controller's objects name its owner Lease (label :data:`~._names.LABEL_OWNER` and an
ownerReference). An owner is gone when its Lease is missing or expired (not renewed within
its duration). The sweep deletes those owners' pods (with a grace period, confirmed gone),
then their NetworkPolicies and Secrets, then the expired Leases themselves (on a real cluster
the garbage collector would also cascade from the Lease; deleting the dependents here does
not wait for it). A pod not confirmed gone keeps its sandbox's policies and Secrets and its
owner's Lease until a later sweep (see :mod:`._removal`). ``include_live`` removes every
airlock object in the namespace (``airlock gc --all``). A running controller sweeps every
lease period (:class:`~._upkeep.Upkeep`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from layer0 import EnvError

from ._access import SANDBOX_ACCESS
from ._api import ApiFailure, KubeApi, configured
from ._names import LABEL_MANAGED, LABEL_OWNER, LABEL_ROLE, MANAGED_BY
from ._owner import OWNER_ROLE, lease_expired
from ._removal import MANAGED_SELECTOR, delete_object, remove_selected
from ._settings import KubernetesSettings

__all__ = ["KubeReapReport", "reap", "reap_with"]


@dataclass
class KubeReapReport:
    """What a sweep removed (``(kind, name)``), and what it could not."""

    removed_items: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        """How many objects were removed."""
        return len(self.removed_items)

    def items(self) -> list[tuple[str, str]]:
        """``(kind, name)`` of each removed object."""
        return list(self.removed_items)

    def summary(self) -> str:
        """One line: how many objects of each kind were removed."""
        if not self.removed_items:
            return "nothing to remove"
        counts = Counter(kind for kind, _ in self.removed_items)
        return ", ".join(f"{n} {kind}(s)" for kind, n in sorted(counts.items()))


async def reap(
    state_dir: Path | None = None, *, include_live: bool = False, settings: BaseModel | None = None
) -> KubeReapReport | None:
    """Sweep the configured namespace (None: the cluster cannot be reached; nothing to sweep
    when no cluster is configured at all)."""
    if not configured(settings):
        return KubeReapReport()
    chosen = settings if isinstance(settings, KubernetesSettings) else KubernetesSettings()
    try:
        api = await KubeApi.connect(chosen, SANDBOX_ACCESS)
    except EnvError:
        return None
    try:
        await api.call(api.core.read_namespace, chosen.namespace)
    except ApiFailure as e:
        if e.status in (0, 401):
            api.close()
            return None
    try:
        return await reap_with(api, chosen, include_live=include_live)
    finally:
        api.close()


async def reap_with(
    api: KubeApi,
    settings: KubernetesSettings,
    *,
    include_live: bool = False,
    keep: frozenset[str] = frozenset(),
    now: datetime | None = None,
) -> KubeReapReport:
    """Sweep ``settings.namespace`` through ``api`` (see the module docstring); the owner
    Leases named in ``keep`` (the caller's own) count as live even when expired. An object
    whose owner has no Lease at all is removed only once it is older than a lease period
    (``now``: the sweep's time, default the clock's), as a controller creates its Lease just
    before its first objects and a sweep may have listed the Leases in between."""
    ns = settings.namespace
    report = KubeReapReport()
    listed_at = now or datetime.now(UTC)
    try:
        leases = await _items(
            api,
            api.coordination.list_namespaced_lease,
            ns,
            f"{LABEL_MANAGED}={MANAGED_BY},{LABEL_ROLE}={OWNER_ROLE}",
        )
    except ApiFailure as e:
        report.errors.append(f"listing owner leases in {ns}: {e}")
        return report
    live = {_name(lease) for lease in leases if not include_live and not lease_expired(lease)}
    live |= keep
    known = {_name(lease) for lease in leases}
    # An owner with no Lease in the listing may be a controller that created its Lease just
    # after it: only its objects older than a lease period are an orphan's.
    young = listed_at - timedelta(seconds=settings.lease_seconds)

    def doomed(obj: dict[str, Any]) -> bool:
        owner = (obj.get("metadata", {}).get("labels") or {}).get(LABEL_OWNER)
        if owner in live:
            return False
        return include_live or owner in known or not _created_after(obj, young)

    removal = await remove_selected(api, ns, MANAGED_SELECTOR, doomed)
    report.removed_items += removal.removed
    report.errors += removal.errors
    for lease in leases:
        name = _name(lease)
        if name in live or name in removal.stuck_owners:
            continue  # its pods may still run: the Lease's cascade would take their policies
        failure = await delete_object(api, api.coordination.delete_namespaced_lease, ns, name)
        if failure is not None:
            report.errors.append(f"lease {name}: {failure}")
        else:
            report.removed_items.append(("lease", name))
    return report


async def _items(api: KubeApi, lister: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = await api.call(lister, namespace, label_selector=selector)
    return list(found.get("items") or [])


def _created_after(obj: dict[str, Any], when: datetime) -> bool:
    """Whether ``obj`` was created after ``when`` (an unreadable time: not)."""
    stamp = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) > when
    except ValueError:
        return False


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
