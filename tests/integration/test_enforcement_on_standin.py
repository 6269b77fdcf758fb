"""A cluster that does not enforce NetworkPolicy gets no job: the proof fails, jobs are refused.

A real controller serves a Kubernetes agent; the stand-in API server's pods run on the local
Docker engine (``DockerPods``), which enforces no NetworkPolicy, like a CNI that ignores them.
Before the first job the controller proves enforcement for real: the canary, control and
prober pods run, and the prober (a deny-all sandbox's labels and policy) reaches the canary
and each destination the test gave it. Those destinations are listeners this test starts on
the pod network's gateway (this machine, on the bridge the runtime created) standing in for
the cloud metadata service, the API server and the controller, so no traffic leaves the
machine. The job must fail with ``isolation_violation`` naming them, no sandbox pod of a job
may exist, and the namespace must carry the failed verdict. The resolver pod (a proxy's DNS)
runs as well; the stand-in has no cluster DNS, so its name stays unresolved.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.images import runner_image_tag
from airlock.jobs import JobState
from airlock.sandbox.kubernetes._enforcement_result import ANNOTATION, EnforcementResult
from airlock.testing import DockerPods, KubeApiStandIn
from tests.support.controller import running_controller
from tests.support.kube import docker_pod_network

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
NAMESPACE = "airlock-sandboxes"


@pytest.fixture
def pods() -> Iterator[tuple[DockerPods, str]]:
    with docker_pod_network() as found:
        yield found


@contextlib.asynccontextmanager
async def listener(host: str) -> AsyncIterator[tuple[str, list[str]]]:
    """A TCP listener on ``host`` that records each peer and closes the connection."""
    peers: list[str] = []

    def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(str(writer.get_extra_info("peername")[0]))
        writer.close()

    server = await asyncio.start_server(accept, host, 0)
    try:
        yield f"{host}:{server.sockets[0].getsockname()[1]}", peers
    finally:
        server.close()
        await server.wait_closed()


def agent() -> dict[str, Any]:
    return {
        "provider": {"kind": "scripted", "script": [{"text": "never runs"}]},
        "backend": "kubernetes",
        "resources": {"cpu": "250m", "memory": "128Mi"},
        "defaults": {"max_turns": 1, "max_duration": "60s"},
    }


def test_jobs_are_refused_on_a_cluster_that_ignores_network_policy(
    pods: tuple[DockerPods, str], tmp_path: Path
) -> None:
    runtime, gateway = pods
    with KubeApiStandIn(pods=runtime, namespaces=(NAMESPACE,)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")

        async def scenario() -> tuple[Any, dict[str, list[str]]]:
            async with (
                listener(gateway) as (metadata, metadata_peers),
                listener(gateway) as (api_server, api_peers),
                listener(gateway) as (controller_at, controller_peers),
            ):
                enforcement = {"metadata_address": metadata, "api_server_address": api_server,
                               "controller_address": controller_at, "timeout_s": 180}  # fmt: skip
                config = {
                    "version": 1,
                    "backends": {"kubernetes": {"kubeconfig": str(kubeconfig), "namespace": NAMESPACE,
                                                "connect": "pod_ip", "image_pull_policy": "Never",
                                                "enforcement": enforcement}},
                    "agents": {"worker": agent()},
                }  # fmt: skip
                path = tmp_path / "airlock.yaml"
                path.write_text(yaml.safe_dump(config))
                serving = running_controller(path, tmp_path / "data", tmp_path / "sb", runner_image_tag())
                async with serving as (_, client):
                    async with asyncio.timeout(400):
                        job = await client.wait((await client.submit("worker", "hello")).id)
                reached = {"metadata": metadata_peers, "api": api_peers, "controller": controller_peers}
                return job, reached

        job, reached = asyncio.run(scenario())
        namespace = api.get("namespaces", "", NAMESPACE)
        assert namespace is not None
        left = api.objects("pods", NAMESPACE)
    assert job.state is JobState.FAILED, job
    assert job.error is not None and job.error.kind == "isolation_violation", job.error
    message = job.error.message
    for target in ("canary", "cloud metadata", "api server", "controller"):
        assert target in message, message
    # The prober really reached each stand-in destination (Docker enforces nothing).
    assert all(reached.values()), reached
    result = EnforcementResult.from_annotation(namespace["metadata"]["annotations"][ANNOTATION])
    assert result is not None and result.status == "failed"
    failed = {c.target for c in result.failed_checks()}
    # The resolver ran too; the stand-in has no cluster DNS (its ClusterFirst pods resolve
    # nothing, so no query leaves this machine): the name is unresolved and said so.
    assert failed == {"canary", "cloud metadata", "api server", "controller", "cluster dns"}, (
        result.evidence()
    )
    assert result.dns_resolves is False and "could not resolve kubernetes.default.svc" in result.reason
    control = [c for c in result.checks if c.pod == "control"]
    assert control and all(c.passed for c in control), result.evidence()
    assert left == [], "the proof removed its pods and no job's pod was created"
