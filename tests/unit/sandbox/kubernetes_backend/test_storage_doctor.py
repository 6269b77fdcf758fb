"""``airlock doctor`` says whether the chart's job-store claim can bind: a default StorageClass
(new EKS clusters have none), through the stand-in API server and the official client."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from airlock.sandbox import DoctorCheck, backend
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.testing import KubeApiStandIn

NS = "airlock-sandboxes"


def storage_class(api: KubeApiStandIn, name: str, *, default: bool, beta: bool = False) -> None:
    key = "storageclass.beta.kubernetes.io" if beta else "storageclass.kubernetes.io"
    annotations = {f"{key}/is-default-class": "true"} if default else {}
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": "ebs.csi.aws.com",
    }
    client.StorageV1Api(client.ApiClient(api.configuration())).create_storage_class(body)


async def storage(api: KubeApiStandIn, tmp_path: Path) -> DoctorCheck:
    settings = KubernetesSettings(namespace=NS, kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")))
    (found,) = [c for c in await backend("kubernetes").doctor(settings) if c.name == "kubernetes storage"]
    return found


async def test_no_default_storage_class_is_a_warning_with_the_fix(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        empty = await storage(api, tmp_path)
        storage_class(api, "gp2", default=False)
        undefaulted = await storage(api, tmp_path)
    assert empty.status == "warning" and "the cluster has none" in empty.message
    assert (
        undefaulted.status == "warning"
        and "no default StorageClass (the cluster has: gp2)" in undefaulted.message
    )
    assert "persistence.storageClass" in undefaulted.hint and "is-default-class=true" in undefaulted.hint


async def test_one_default_class_passes_and_two_are_named(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        storage_class(api, "standard", default=True)
        storage_class(api, "fast", default=False)
        one = await storage(api, tmp_path)
        storage_class(api, "legacy", default=True, beta=True)
        two = await storage(api, tmp_path)
    assert one.status == "ok" and "default StorageClass 'standard'" in one.message
    assert two.status == "warning" and "(legacy, standard)" in two.message


async def test_an_identity_that_cannot_list_classes_is_told_not_failed(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        api.deny("list", "storageclasses")
        found = await storage(api, tmp_path)
    assert found.status == "ok" and found.message.startswith("not checked: cannot list StorageClasses")
