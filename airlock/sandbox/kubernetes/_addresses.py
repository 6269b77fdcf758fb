"""Where the sandboxes of a namespace are: their pods' IPs, by role (for the isolation probe)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ._access import ADDRESSES_ACCESS
from ._api import KubeApi
from ._names import LABEL_MANAGED, LABEL_ROLE, LABEL_SANDBOX, MANAGED_BY
from ._settings import KubernetesSettings

__all__ = ["SandboxAddress", "sandbox_addresses"]


@dataclass(frozen=True)
class SandboxAddress:
    """One running pod of a sandbox: its sandbox id, role (``sandbox``/``proxy``), IP, creation."""

    sandbox_id: str
    role: str
    ip: str
    created: datetime


async def sandbox_addresses(
    namespace: str, settings: KubernetesSettings | None = None
) -> list[SandboxAddress]:
    """The running airlock pods in ``namespace`` that have an IP, newest first (in-cluster
    credentials or the kubeconfig, as :class:`KubernetesSettings` says)."""
    chosen = (settings or KubernetesSettings()).model_copy(update={"namespace": namespace})
    api = await KubeApi.connect(chosen, ADDRESSES_ACCESS)
    try:
        found = await api.call(
            api.core.list_namespaced_pod, namespace, label_selector=f"{LABEL_MANAGED}={MANAGED_BY}"
        )
    finally:
        api.close()
    out = []
    for pod in found.get("items") or []:
        labels = pod["metadata"].get("labels") or {}
        ip = (pod.get("status") or {}).get("podIP")
        if not ip or (pod.get("status") or {}).get("phase") != "Running":
            continue
        created = datetime.fromisoformat(str(pod["metadata"]["creationTimestamp"]).replace("Z", "+00:00"))
        out.append(
            SandboxAddress(labels.get(LABEL_SANDBOX, ""), labels.get(LABEL_ROLE, ""), str(ip), created)
        )
    return sorted(out, key=lambda a: a.created, reverse=True)
