"""``airlock doctor``'s view of NetworkPolicy enforcement: the proof a controller published."""

from __future__ import annotations

from .._declaration import DoctorCheck
from ._api import ApiFailure, KubeApi
from ._enforcement_result import EnforcementResult
from ._enforcement_setup import read_published
from ._settings import KubernetesSettings

__all__ = ["enforcement_check"]

_NAME = "kubernetes enforcement"


async def enforcement_check(api: KubeApi, settings: KubernetesSettings) -> DoctorCheck:
    """What the namespace's annotation says of the latest proof (doctor proves nothing itself:
    the controller does, before its first job and every ``enforcement.interval_s``)."""
    if settings.network_policy == "assume_enforced":
        return DoctorCheck(
            _NAME,
            "warning",
            f"NetworkPolicy enforcement in {settings.namespace!r} is assumed, not proven "
            "(backends.kubernetes.network_policy: assume_enforced): if the CNI ignores NetworkPolicy, "
            "every sandbox sits on the open pod network",
            "remove network_policy: assume_enforced so the controller proves it before any job",
        )
    try:
        namespace = await api.call(api.core.read_namespace, settings.namespace)
    except ApiFailure as e:
        return DoctorCheck(_NAME, "warning", f"cannot read namespace {settings.namespace!r}: {e}")
    result = read_published(namespace)
    if result is None:
        return DoctorCheck(
            _NAME,
            "warning",
            f"no controller has proven NetworkPolicy enforcement in {settings.namespace!r} yet; "
            "jobs wait for the proof (a controller makes it before its first job)",
            "start the controller (airlock serve) and run doctor again",
        )
    return _verdict(result, settings)


def _verdict(result: EnforcementResult, settings: KubernetesSettings) -> DoctorCheck:
    text = f"{result.summary()}\n{result.evidence()}".rstrip()
    if result.status == "enforced":
        stale = result.age_s() > 2 * settings.enforcement.interval_s
        if stale:
            return DoctorCheck(
                _NAME,
                "warning",
                f"{text}\n(older than two proof periods: is the controller running?)",
                "a running controller proves it again every enforcement.interval_s",
            )
        if result.dns_resolves is False:
            return DoctorCheck(
                _NAME,
                "warning",
                text,
                "isolation holds, but a proxy pod cannot resolve in-cluster names: set "
                "backends.kubernetes.dns to the cluster's resolver (NodeLocal DNSCache: ip_blocks "
                "[169.254.20.10]; OpenShift: the openshift-dns selector and port 5353)",
            )
        return DoctorCheck(_NAME, "ok", text)
    return DoctorCheck(
        _NAME,
        "error",
        text,
        "jobs are refused: use a CNI that enforces NetworkPolicy (Calico, Cilium, GKE Dataplane V2, "
        "the EKS network policy agent, ...), and see each failed check above",
    )
