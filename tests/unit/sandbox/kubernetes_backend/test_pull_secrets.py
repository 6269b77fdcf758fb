"""Image pull Secrets copied into a sandbox namespace that starts empty (``pull_secrets_from``,
what the Helm chart's release namespace holds): created at the controller's start through the
API, refreshed when the original changes, an operator's own Secret of that name left alone,
a missing original a clear error; against the stand-in API server."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox import backend
from airlock.sandbox.kubernetes import SANDBOX_ACCESS, KubernetesSettings
from airlock.sandbox.kubernetes._api import KubeApi
from airlock.sandbox.kubernetes._pull_secrets import ANNOTATION_COPIED_FROM, copy_pull_secrets
from airlock.testing import KubeApiStandIn
from layer0 import EnvError

RELEASE = "airlock"
SANDBOXES = "airlock-sandboxes"
DOCKERCONFIG = "kubernetes.io/dockerconfigjson"


def pull_secret(name: str, password: str) -> dict[str, Any]:
    config = f'{{"auths": {{"registry.example.com": {{"password": "{password}"}}}}}}'
    return {
        "metadata": {"name": name, "namespace": RELEASE},
        "type": DOCKERCONFIG,
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
    }


async def as_operator(api: KubeApiStandIn, method: str, *args: Any) -> None:
    """A write the operator makes with their own client (not the backend's, whose access table
    has no business in the release namespace)."""
    from kubernetes import client

    core = client.CoreV1Api(client.ApiClient(api.configuration()))
    await asyncio.to_thread(getattr(core, method), *args)


async def connect(api: KubeApiStandIn, tmp_path: Path, **settings: Any) -> tuple[KubeApi, KubernetesSettings]:
    chosen = KubernetesSettings(
        namespace=SANDBOXES, kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")), **settings
    )
    return await KubeApi.connect(chosen, SANDBOX_ACCESS), chosen


async def test_named_secrets_are_copied_and_refreshed_when_the_original_changes(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(RELEASE, SANDBOXES)) as stand_in:
        kube, settings = await connect(
            stand_in, tmp_path, image_pull_secrets=("registry-pull",), pull_secrets_from=RELEASE
        )
        try:
            original = pull_secret("registry-pull", "first")
            await as_operator(stand_in, "create_namespaced_secret", RELEASE, original)
            assert await copy_pull_secrets(kube, settings) == ["registry-pull"]
            copy = stand_in.get("secrets", SANDBOXES, "registry-pull")
            assert copy is not None
            assert copy["type"] == DOCKERCONFIG and copy["data"] == original["data"]
            assert copy["metadata"]["annotations"][ANNOTATION_COPIED_FROM] == f"{RELEASE}/registry-pull"
            assert await copy_pull_secrets(kube, settings) == []  # current: nothing written

            rotated = pull_secret("registry-pull", "rotated")
            await as_operator(stand_in, "replace_namespaced_secret", "registry-pull", RELEASE, rotated)
            assert await copy_pull_secrets(kube, settings) == ["registry-pull"]
            refreshed = stand_in.get("secrets", SANDBOXES, "registry-pull")
            assert refreshed is not None and refreshed["data"] == rotated["data"]
        finally:
            kube.close()


async def test_a_secret_the_operator_made_is_left_alone(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(RELEASE, SANDBOXES)) as stand_in:
        kube, settings = await connect(
            stand_in, tmp_path, image_pull_secrets=("registry-pull",), pull_secrets_from=RELEASE
        )
        try:
            await as_operator(
                stand_in, "create_namespaced_secret", RELEASE, pull_secret("registry-pull", "a")
            )
            own = {**pull_secret("registry-pull", "the operator's"), "metadata": {"name": "registry-pull"}}
            await as_operator(stand_in, "create_namespaced_secret", SANDBOXES, own)
            assert await copy_pull_secrets(kube, settings) == []
            kept = stand_in.get("secrets", SANDBOXES, "registry-pull")
            assert kept is not None and kept["data"] == own["data"]
        finally:
            kube.close()


async def test_a_missing_original_is_an_error_naming_it(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(RELEASE, SANDBOXES)) as stand_in:
        kube, settings = await connect(
            stand_in, tmp_path, image_pull_secrets=("registry-pull",), pull_secrets_from=RELEASE
        )
        try:
            with pytest.raises(EnvError, match="'registry-pull' does not exist in 'airlock'"):
                await copy_pull_secrets(kube, settings)
        finally:
            kube.close()


async def test_without_a_source_nothing_is_copied(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(RELEASE, SANDBOXES)) as stand_in:
        kube, settings = await connect(stand_in, tmp_path, image_pull_secrets=("registry-pull",))
        try:
            assert await copy_pull_secrets(kube, settings) == []
            assert stand_in.objects("secrets") == []
        finally:
            kube.close()


async def test_the_backend_copies_them_when_it_starts(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=(RELEASE, SANDBOXES)) as stand_in:
        kube, settings = await connect(
            stand_in, tmp_path, image_pull_secrets=("registry-pull",), pull_secrets_from=RELEASE
        )
        try:
            await as_operator(
                stand_in, "create_namespaced_secret", RELEASE, pull_secret("registry-pull", "a")
            )
        finally:
            kube.close()
        sandbox = backend("kubernetes").create(settings=settings, sweep=False)
        await sandbox._prepare()  # type: ignore[attr-defined]  # what the first job or warm pod runs
        assert stand_in.get("secrets", SANDBOXES, "registry-pull") is not None
