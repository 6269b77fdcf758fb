"""``airlock doctor``'s Kubernetes checks against the stand-in API server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox import DoctorCheck, backend
from airlock.sandbox.kubernetes import DOCTOR_ACCESS, SANDBOX_ACCESS, KubernetesSettings
from airlock.sandbox.kubernetes._access import resolve
from airlock.sandbox.kubernetes._api import KubeApi
from airlock.sandbox.kubernetes._enforcement_result import ANNOTATION, EnforcementResult
from airlock.testing import KubeApiStandIn
from tests.unit.sandbox.kubernetes_backend.test_dns import kube_system
from tests.unit.sandbox.kubernetes_backend.test_storage_doctor import storage_class

NS = "airlock-sandboxes"


async def publish(settings: KubernetesSettings, status: str, **extra: Any) -> None:
    """Annotate the namespace as a controller's proof would (through the official client)."""
    result = EnforcementResult.model_validate(
        {"status": status, "namespace": settings.namespace, "checked_at": datetime.now(UTC),
         "reason": "recorded", **extra}
    )  # fmt: skip
    api = await KubeApi.connect(settings, SANDBOX_ACCESS)
    try:
        patch = {"metadata": {"annotations": {ANNOTATION: result.annotation()}}}
        await api.call(api.core.patch_namespace, settings.namespace, patch)
    finally:
        api.close()


def by_name(checks: list[DoctorCheck]) -> dict[str, DoctorCheck]:
    return {c.name: c for c in checks}


async def test_a_ready_cluster_passes_every_check(tmp_path: Path) -> None:
    kata = {"gvisor": "runsc", "kata": "kata-qemu"}
    with KubeApiStandIn(namespaces=(NS, "kube-system"), runtime_classes=kata) as api:
        kube_system(api, node_local=False)  # CoreDNS's Service, which the default DNS peers match
        storage_class(api, "standard", default=True)  # the chart's job-store claim binds
        settings = KubernetesSettings(
            namespace=NS,
            kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")),
            image="registry.local/airlock-runner:1",
        )
        sandbox = backend("kubernetes").create(settings=settings, sweep=False)
        await sandbox._prepare()  # type: ignore[attr-defined]  # creates the default-deny policy
        await publish(settings, "enforced")  # what a controller's proof leaves on the namespace
        checks = by_name(await backend("kubernetes").doctor(settings))
    assert {n: c.status for n, c in checks.items()} == {
        "kubernetes api": "ok",
        "kubernetes namespace": "ok",
        "kubernetes rbac": "ok",
        "kubernetes gvisor": "ok",
        "kubernetes micro_vm": "ok",
        "kubernetes image": "ok",
        "kubernetes default-deny": "ok",
        "kubernetes enforcement": "ok",
        "kubernetes dns": "ok",
        "kubernetes storage": "ok",
    }
    assert "enforced in 'airlock-sandboxes'" in checks["kubernetes enforcement"].message
    granted = resolve(SANDBOX_ACCESS + DOCTOR_ACCESS, settings, "port_forward").grants
    reviewed = sum(len(g.names) or 1 for g in granted if g.default_role is None)
    assert f"all {reviewed} permissions" in checks["kubernetes rbac"].message
    assert "connect port_forward" in checks["kubernetes rbac"].message
    assert "v1." in checks["kubernetes api"].message


async def test_what_is_missing_is_named(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        api.deny("create", "pods/portforward")
        api.deny("delete", "secrets")
        api.deny("patch", "pods")  # the warm pool's deadline
        settings = KubernetesSettings(namespace=NS, kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")))
        checks = by_name(await backend("kubernetes").doctor(settings))
        missing_ns = KubernetesSettings(namespace="elsewhere", kubeconfig=settings.kubeconfig)
        no_namespace = by_name(await backend("kubernetes").doctor(missing_ns))
    rbac = checks["kubernetes rbac"]
    assert (
        rbac.status == "error"
        and "create pods/portforward" in rbac.message
        and "delete secrets" in rbac.message
        and "patch pods," in rbac.message
    )
    assert (
        checks["kubernetes gvisor"].status == "warning"
        and "refused (never downgraded)" in checks["kubernetes gvisor"].message
    )
    assert (
        checks["kubernetes image"].status == "error"
        and "names no registry" in checks["kubernetes image"].message
    )
    assert checks["kubernetes default-deny"].status == "warning"
    assert no_namespace["kubernetes namespace"].status == "error"
    assert "does not exist" in no_namespace["kubernetes namespace"].message


async def test_an_unreachable_cluster_is_an_error_only_when_configured(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kc")
    configured = await backend("kubernetes").doctor(KubernetesSettings(kubeconfig=str(kubeconfig)))
    assert [c.status for c in configured] == ["error"] and "does not answer" in configured[0].message


async def test_an_unconfigured_machine_is_not_failed_by_a_cluster_it_never_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kc")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    checks = await backend("kubernetes").doctor(None)
    assert [c.status for c in checks] == ["warning"] and "does not answer" in checks[0].message
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))
    (only,) = await backend("kubernetes").doctor(None)
    assert only.status == "ok" and "not configured" in only.message


async def test_doctor_shows_the_published_proof_and_what_it_means(tmp_path: Path) -> None:
    failed_check = {"pod": "prober", "target": "cloud metadata", "address": "169.254.169.254:80",
                    "expect": "blocked", "outcome": "connected"}  # fmt: skip
    with KubeApiStandIn(namespaces=(NS,)) as api:
        settings = KubernetesSettings(namespace=NS, kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")))
        none_yet = by_name(await backend("kubernetes").doctor(settings))["kubernetes enforcement"]
        await publish(settings, "failed", checks=[failed_check])
        failed = by_name(await backend("kubernetes").doctor(settings))["kubernetes enforcement"]
        await publish(settings, "enforced", checked_at=datetime.now(UTC) - timedelta(hours=1))
        stale = by_name(await backend("kubernetes").doctor(settings))["kubernetes enforcement"]
        assumed_settings = settings.model_copy(update={"network_policy": "assume_enforced"})
        assumed = by_name(await backend("kubernetes").doctor(assumed_settings))["kubernetes enforcement"]
    assert none_yet.status == "warning" and "no controller has proven" in none_yet.message
    assert failed.status == "error" and "cloud metadata 169.254.169.254:80: connected" in failed.message
    assert "CNI" in failed.hint
    assert stale.status == "warning" and "is the controller running" in stale.message
    assert assumed.status == "warning" and "assumed, not proven" in assumed.message
