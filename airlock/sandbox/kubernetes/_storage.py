"""``airlock doctor``'s storage check: a default StorageClass for the controller's job store.

The Helm chart's controller keeps its SQLite job store on a PersistentVolumeClaim. A claim
that names no StorageClass (``persistence.storageClass: ""``) binds only through the
cluster's default class, and new EKS clusters have none: the claim stays Pending and the
controller never starts. Doctor lists the StorageClasses with the caller's identity (the
controller's own Role has no cluster-wide read; what it cannot read is said, not failed).
"""

from __future__ import annotations

from typing import Any

from .._declaration import DoctorCheck
from ._api import ApiFailure, KubeApi

__all__ = ["DEFAULT_CLASS_ANNOTATIONS", "storage_check"]

_NAME = "kubernetes storage"
#: The annotations that mark a default StorageClass (the beta one is still honoured).
DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)


async def storage_check(api: KubeApi) -> DoctorCheck:
    """Whether a claim that names no StorageClass would bind (one class is the default)."""
    try:
        found: dict[str, Any] = await api.call(api.storage.list_storage_class)
    except ApiFailure as e:
        return DoctorCheck(
            _NAME,
            "ok",
            f"not checked: cannot list StorageClasses ({e}); the chart's claim needs a default "
            "StorageClass unless persistence.storageClass names one",
        )
    classes = found.get("items") or []
    names = [str((c.get("metadata") or {}).get("name")) for c in classes]
    defaults = [name for name, c in zip(names, classes, strict=True) if _is_default(c)]
    if len(defaults) == 1:
        return DoctorCheck(_NAME, "ok", f"default StorageClass {defaults[0]!r} (of {', '.join(names)})")
    if defaults:
        return DoctorCheck(
            _NAME,
            "warning",
            f"{len(defaults)} StorageClasses are marked default ({', '.join(defaults)}): which one a "
            "claim that names none gets depends on the Kubernetes version",
            "mark one default, or set persistence.storageClass in the chart's values",
        )
    have = f" (the cluster has: {', '.join(names)})" if names else " (the cluster has none)"
    return DoctorCheck(
        _NAME,
        "warning",
        f"no default StorageClass{have}: the chart's job-store claim stays Pending unless "
        "persistence.storageClass names a class",
        "set persistence.storageClass, or mark a class default (kubectl annotate storageclass NAME "
        "storageclass.kubernetes.io/is-default-class=true); on EKS install the EBS CSI driver first",
    )


def _is_default(storage_class: dict[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(str(annotations.get(key, "")).lower() == "true" for key in DEFAULT_CLASS_ANNOTATIONS)
