"""``airlock doctor``'s Kubernetes checks against the stand-in API server."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.sandbox import DoctorCheck, backend
from airlock.sandbox.kubernetes import REQUIRED_ACCESS, KubernetesSettings
from airlock.testing import KubeApiStandIn
from tests.unit.sandbox.kubernetes_backend.test_dns import kube_system

NS = "airlock-sandboxes"


def by_name(checks: list[DoctorCheck]) -> dict[str, DoctorCheck]:
    return {c.name: c for c in checks}


async def test_a_ready_cluster_passes_every_check(tmp_path: Path) -> None:
    kata = {"gvisor": "runsc", "kata": "kata-qemu"}
    with KubeApiStandIn(namespaces=(NS, "kube-system"), runtime_classes=kata) as api:
        kube_system(api, node_local=False)  # CoreDNS's Service, which the default DNS peers match
        settings = KubernetesSettings(
            namespace=NS,
            kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")),
            image="registry.local/airlock-runner:1",
        )
        sandbox = backend("kubernetes").create(settings=settings, sweep=False)
        await sandbox._prepare()  # type: ignore[attr-defined]  # creates the default-deny policy
        checks = by_name(await backend("kubernetes").doctor(settings))
    assert {n: c.status for n, c in checks.items()} == {
        "kubernetes api": "ok",
        "kubernetes namespace": "ok",
        "kubernetes rbac": "ok",
        "kubernetes gvisor": "ok",
        "kubernetes micro_vm": "ok",
        "kubernetes image": "ok",
        "kubernetes default-deny": "ok",
        "kubernetes dns": "ok",
    }
    assert f"all {len(REQUIRED_ACCESS)} verbs" in checks["kubernetes rbac"].message
    assert "v1." in checks["kubernetes api"].message


async def test_what_is_missing_is_named(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        api.deny("create", "pods/portforward")
        api.deny("delete", "secrets")
        settings = KubernetesSettings(namespace=NS, kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")))
        checks = by_name(await backend("kubernetes").doctor(settings))
        missing_ns = KubernetesSettings(namespace="elsewhere", kubeconfig=settings.kubeconfig)
        no_namespace = by_name(await backend("kubernetes").doctor(missing_ns))
    rbac = checks["kubernetes rbac"]
    assert (
        rbac.status == "error"
        and "create pods/portforward" in rbac.message
        and "delete secrets" in rbac.message
    )
    assert (
        checks["kubernetes gvisor"].status == "warning"
        and "refused (never downgraded)" in checks["kubernetes gvisor"].message
    )
    assert (
        checks["kubernetes image"].status == "warning"
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
