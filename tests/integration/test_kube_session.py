"""A long-lived sandbox on the Kubernetes backend: the stand-in API server, its pods on Docker.

One pod serves three jobs one after another (shared workspace, same runner process); a second
job while one runs is refused; every object is labelled with the session, never a job, and
keeps its owner label (what the sweep of a dead controller's objects looks for); the pod's
``activeDeadlineSeconds`` comes from the session's TTL, not a turn's deadline; closing deletes
every object; a pod that is gone is reported as an EnvError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.images import runner_image_tag
from airlock.sandbox import LongLivedSandbox
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._names import LABEL_JOB, LABEL_OWNER, LABEL_SESSION
from airlock.testing import DockerPods, KubeApiStandIn
from layer0 import EnvError, TurnInput
from tests.support.kube import recorded_guard
from tests.support.sessions import session_request, three_jobs_share_the_box

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

NS = "airlock-sandboxes"
KINDS = ("pods", "secrets", "networkpolicies")
START_TIMEOUT = 90.0


@pytest.fixture(scope="module")
def image(docker_client: Any) -> str:
    tag = runner_image_tag()
    if not docker_client.images.list(name=tag):
        pytest.fail(f"the runner image {tag} is not built (airlock images build)")
    return tag


@pytest.fixture
def cluster(image: str, tmp_path: Path) -> Iterator[tuple[KubeApiStandIn, Path]]:
    pods = DockerPods()
    try:
        with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
            yield api, api.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        pods.close()


def backend(kubeconfig: Path) -> KubernetesBackend:
    settings = KubernetesSettings(
        namespace=NS,
        kubeconfig=str(kubeconfig),
        connect="pod_ip",
        image_pull_policy="Never",
        start_timeout=START_TIMEOUT,
        enforcement={"metadata_address": "127.0.0.1:9"},  # the fence tries the pod's loopback
    )
    return KubernetesBackend(settings=settings, sweep=False, turn_timeout=120.0, guard=recorded_guard(NS))


def objects(api: KubeApiStandIn) -> list[dict[str, Any]]:
    """Every sandbox's object (the namespace's default-deny policy is no sandbox's)."""
    found = [o for kind in KINDS for o in api.objects(kind, NS)]
    return [o for o in found if LABEL_OWNER in (o["metadata"].get("labels") or {})]


async def test_three_jobs_share_one_pod_its_deadline_from_the_ttl_and_close_leaves_nothing(
    cluster: tuple[KubeApiStandIn, Path],
) -> None:
    api, kubeconfig = cluster
    sandboxes = backend(kubeconfig)
    assert isinstance(sandboxes, LongLivedSandbox)
    try:
        session = await sandboxes.open(session_request(), label="sbx-kube-1", ttl=3600)
        try:
            made = await asyncio.to_thread(objects, api)
            assert made
            for o in made:
                labels = o["metadata"]["labels"]
                assert labels[LABEL_SESSION] == "sbx-kube-1"
                assert LABEL_JOB not in labels
            [pod] = api.objects("pods", NS)
            assert pod["spec"]["activeDeadlineSeconds"] > 3600 + START_TIMEOUT
            await three_jobs_share_the_box(session)
            assert [p["metadata"]["name"] for p in api.objects("pods", NS)] == [pod["metadata"]["name"]]
        finally:
            await session.close()
        assert await asyncio.to_thread(objects, api) == []
    finally:
        await sandboxes.aclose()


async def test_a_lost_pod_is_an_env_error(cluster: tuple[KubeApiStandIn, Path]) -> None:
    api, kubeconfig = cluster
    sandboxes = backend(kubeconfig)
    try:
        session = await sandboxes.open(session_request(), label="sbx-kube-lost")
        try:
            [pod] = api.objects("pods", NS)
            assert "activeDeadlineSeconds" not in pod["spec"]  # no TTL: no bound
            await session.instance.stop()  # the pod deleted behind the session's back
            with pytest.raises(EnvError) as lost:
                await session.run(TurnInput.new("job"))
            assert lost.value.kind == "other"
            assert "re-open" in str(lost.value)
        finally:
            await session.close()
        assert await asyncio.to_thread(objects, api) == []
    finally:
        await sandboxes.aclose()
