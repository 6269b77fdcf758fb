"""The runner image on Kubernetes: ``backends.kubernetes.image`` takes a tag or a digest
reference (what ``airlock images push`` prints) and refuses a malformed one naming the key;
doctor fails an image that names no registry unless the operator said it is preloaded on the
nodes (``image_pull_policy: Never``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from airlock.sandbox import DoctorCheck, backend
from airlock.sandbox.kubernetes import KubernetesSettings
from airlock.testing import KubeApiStandIn

NS = "airlock-sandboxes"
PINNED = "registry.example.com/airlock-runner@sha256:" + "0f" * 32


def test_a_digest_reference_is_accepted_for_the_runner_and_the_proxy() -> None:
    settings = KubernetesSettings.model_validate({"image": PINNED, "proxy": {"image": PINNED}})
    assert settings.image == PINNED and settings.proxy.image == PINNED


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"image": "registry.example.com/airlock-runner@sha256:12"}, "image"),
        ({"proxy": {"image": "Registry.example.com/Airlock"}}, "proxy.image"),
    ],
)
def test_a_malformed_image_is_refused_naming_the_key(section: dict[str, object], key: str) -> None:
    with pytest.raises(ValidationError) as refused:
        KubernetesSettings.model_validate(section)
    (error,) = refused.value.errors()
    assert ".".join(str(p) for p in error["loc"]) == key


async def image_check(tmp_path: Path, **settings: object) -> DoctorCheck:
    with KubeApiStandIn(namespaces=(NS,)) as api:
        chosen = KubernetesSettings.model_validate(
            {"namespace": NS, "kubeconfig": str(api.write_kubeconfig(tmp_path / "kc")), **settings}
        )
        checks = await backend("kubernetes").doctor(chosen)
    (check,) = [c for c in checks if c.name == "kubernetes image"]
    return check


async def test_an_image_with_no_registry_is_an_error(tmp_path: Path) -> None:
    check = await image_check(tmp_path, image="airlock-runner:0.1.0")
    assert check.status == "error"
    assert "names no registry" in check.message
    assert "airlock images push" in check.hint and "image_pull_policy: Never" in check.hint


async def test_an_image_said_to_be_preloaded_passes(tmp_path: Path) -> None:
    check = await image_check(tmp_path, image="airlock-runner:0.1.0", image_pull_policy="Never")
    assert check.status == "ok" and "preloaded on the nodes" in check.message


async def test_a_pinned_image_passes_saying_so(tmp_path: Path) -> None:
    check = await image_check(tmp_path, image=PINNED)
    assert check.status == "ok" and "pinned by digest" in check.message


async def test_pull_secrets_to_copy_are_looked_for_where_they_are_copied_from(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(NS, "airlock")) as api:
        settings = KubernetesSettings(
            namespace=NS,
            kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")),
            image=PINNED,
            image_pull_secrets=("registry-pull",),
            pull_secrets_from="airlock",
        )
        missing = [c for c in await backend("kubernetes").doctor(settings) if c.name == "kubernetes image"]
    assert missing[0].status == "error" and "missing in 'airlock': registry-pull" in missing[0].message
