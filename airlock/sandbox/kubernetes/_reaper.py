"""Removing what dead controllers left on the cluster (start-up sweep, ``airlock gc``).

A controller's objects name its owner Lease (label :data:`~._names.LABEL_OWNER` and an
ownerReference). An owner is gone when its Lease is missing or expired (not renewed within
its duration). The sweep deletes those owners' pods, NetworkPolicies and Secrets, then the
expired Leases themselves (on a real cluster the garbage collector would also cascade from
the Lease; deleting the dependents here does not wait for it). ``include_live`` removes
every airlock object in the namespace (``airlock gc --all``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from layer0 import EnvError

from ._access import SANDBOX_ACCESS
from ._api import ApiFailure, KubeApi, configured
from ._names import LABEL_MANAGED, LABEL_OWNER, LABEL_ROLE, MANAGED_BY
from ._owner import OWNER_ROLE, lease_expired
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
    api: KubeApi, settings: KubernetesSettings, *, include_live: bool = False
) -> KubeReapReport:
    """Sweep ``settings.namespace`` through ``api`` (see the module docstring)."""
    ns = settings.namespace
    report = KubeReapReport()
    managed = f"{LABEL_MANAGED}={MANAGED_BY}"
    try:
        leases = await _items(
            api, api.coordination.list_namespaced_lease, ns, f"{managed},{LABEL_ROLE}={OWNER_ROLE}"
        )
    except ApiFailure as e:
        report.errors.append(f"listing owner leases in {ns}: {e}")
        return report
    live = {_name(lease) for lease in leases if not include_live and not lease_expired(lease)}
    kinds: tuple[tuple[str, Any, Any], ...] = (
        ("pod", api.core.list_namespaced_pod, api.core.delete_namespaced_pod),
        (
            "networkpolicy",
            api.networking.list_namespaced_network_policy,
            api.networking.delete_namespaced_network_policy,
        ),
        ("secret", api.core.list_namespaced_secret, api.core.delete_namespaced_secret),
    )
    for kind, lister, deleter in kinds:
        try:
            found = await _items(api, lister, ns, f"{managed},{LABEL_OWNER}")
        except ApiFailure as e:
            report.errors.append(f"listing {kind}s in {ns}: {e}")
            continue
        for obj in found:
            owner = (obj.get("metadata", {}).get("labels") or {}).get(LABEL_OWNER)
            if owner not in live:
                await _delete(api, deleter, ns, kind, _name(obj), report)
    for lease in leases:
        if _name(lease) not in live:
            await _delete(api, api.coordination.delete_namespaced_lease, ns, "lease", _name(lease), report)
    return report


async def _items(api: KubeApi, lister: Any, namespace: str, selector: str) -> list[dict[str, Any]]:
    found = await api.call(lister, namespace, label_selector=selector)
    return list(found.get("items") or [])


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


async def _delete(api: KubeApi, deleter: Any, ns: str, kind: str, name: str, report: KubeReapReport) -> None:
    try:
        await api.call(deleter, name, ns, grace_period_seconds=0, propagation_policy="Background")
    except ApiFailure as e:
        if e.status != 404:
            report.errors.append(f"{kind} {name}: {e}")
        return
    report.removed_items.append((kind, name))
