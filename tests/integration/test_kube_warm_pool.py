"""The Kubernetes backend's warm pool on the stand-in API server, its pods run on Docker.

The official client talks to :class:`~airlock.testing.KubeApiStandIn`; ``DockerPods`` runs
its pods as a kubelet would (the token init container, the Secret volume, the hardened
runner), and the controller reaches each runner by pod IP. Proven here: a pool of 2 fills
with running pods whose runners answer SERVING; a job claims one, its ``env_var`` credential
reaches the tool although the member's Secret only ever held the runner token; the claimed
pod goes with its job and the pool refills; sandboxes with a network or a file credential
are not pooled and start cold; ``size: 0`` is no pool; closing the pool deletes every member;
members hold the owner Lease while they exist, and their objects go with it.

What the stand-in does not emulate: NetworkPolicy enforcement; a real kubelet's Secret
volume sync (why file credentials are not pooled); scheduling; pod update restrictions, and
DockerPods reads ``activeDeadlineSeconds`` once, at the pod's start, so the backstop a claim
lowers is stored but never fires here; Lease expiry and the reaper (the garbage collector's
cascade on the Lease's deletion is emulated).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.images import runner_image_tag
from airlock.policy import EnvSecretResolver
from airlock.sandbox import PoolSettings, SandboxRequest, WarmPool, compile_sandbox_plan
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._names import LABEL_OWNER, LABEL_POOL
from airlock.testing import DockerPods, KubeApiStandIn, bash_agent
from airlock.turn import ToolFinished
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    ExitReason,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TurnInput,
    TurnOutput,
)
from tests.support.kube import recorded_guard

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]

NS = "airlock-sandboxes"
KINDS = ("pods", "secrets", "networkpolicies")
VALUES = {"API_TOKEN": "env-secret-Kq72bW9xe4", "DEPLOY_KEY": "file-secret-Tn58dR1vc6"}
ENV_CREDENTIAL = EnvironmentSpec(
    credentials=[CredentialRef(name="api-token", injection=CredentialInjection.env_var("API_TOKEN"))]
)
FILE_CREDENTIAL = EnvironmentSpec(
    credentials=[
        CredentialRef(name="deploy-key", injection=CredentialInjection.file("/run/secrets/deploy-key"))
    ]
)
NETWORKED = EnvironmentSpec(
    network=NetworkPolicy(
        default=NetworkAction.DENY,
        rules=[NetworkRule(destination="192.0.2.10/32", action=NetworkAction.ALLOW)],
    )
)


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Cluster:
    """The stand-in, its Docker-run pods, and sandboxes configured for it."""

    def __init__(self, api: KubeApiStandIn, pods: DockerPods, kubeconfig: Path) -> None:
        self.api = api
        self.pods = pods
        self.kubeconfig = kubeconfig

    def sandbox(self, pool: WarmPool[Any] | None) -> KubernetesBackend:
        settings = KubernetesSettings(
            namespace=NS,
            kubeconfig=str(self.kubeconfig),
            connect="pod_ip",
            image_pull_policy="Never",
            start_timeout=90.0,
            # The runner's fence tries the pod's own loopback: nothing leaves the machine.
            enforcement={"metadata_address": "127.0.0.1:9"},
        )
        return KubernetesBackend(
            settings=settings,
            secrets=EnvSecretResolver(VALUES),
            sweep=False,
            pool=pool,
            turn_timeout=120.0,
            guard=recorded_guard(NS),
        )

    def members(self, kind: str = "pods") -> dict[str, dict[str, Any]]:
        """The pool's objects of ``kind`` by name (claimed ones keep the label)."""
        return {
            o["metadata"]["name"]: o
            for o in self.api.objects(kind, NS)
            if LABEL_POOL in (o["metadata"].get("labels") or {})
        }

    def left(self) -> dict[str, list[str]]:
        """Every sandbox object still in the namespace."""
        found: dict[str, list[str]] = {}
        for kind in KINDS:
            names = [
                o["metadata"]["name"]
                for o in self.api.objects(kind, NS)
                if LABEL_OWNER in (o["metadata"].get("labels") or {})
            ]
            if names:
                found[kind] = names
        return found


def secret_values(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


@pytest.fixture(scope="module")
def image(docker_client: Any) -> str:
    tag = runner_image_tag()
    if not docker_client.images.list(name=tag):
        pytest.fail(f"the runner image {tag} is not built (airlock images build)")
    return tag


@pytest.fixture
def cluster(image: str, tmp_path: Path) -> Iterator[Cluster]:
    pods = DockerPods()
    try:
        with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
            yield Cluster(api, pods, api.write_kubeconfig(tmp_path / "kubeconfig"))
    finally:
        pods.close()


@pytest.fixture
async def pool() -> AsyncIterator[WarmPool[Any]]:
    p: WarmPool[Any] = WarmPool(PoolSettings(size=2, refill_concurrency=2), name="kubernetes")
    yield p
    await p.aclose()


async def run(
    sandbox: KubernetesBackend, environment: EnvironmentSpec, *commands: str, on_event: Any = None
) -> tuple[TurnOutput, list[str]]:
    """The job's output and each bash call's stdout."""
    outputs: list[str] = []

    async def sink(event: Any) -> None:
        if on_event is not None:
            on_event()
        if isinstance(event, ToolFinished):
            outputs.append(json.loads(event.output)["stdout"].strip())

    request = SandboxRequest.compile(bash_agent(*commands), TurnInput.new("go"), environment, events=sink)
    return await sandbox.run(request), outputs


async def test_a_job_claims_a_warm_pod_its_env_credential_bound_late(
    cluster: Cluster, pool: WarmPool[Any]
) -> None:
    sandbox = cluster.sandbox(pool)
    assert await sandbox.warm(ENV_CREDENTIAL, compile_sandbox_plan(ENV_CREDENTIAL))
    assert await pool.wait_ready(180), pool.stats()
    waiting = await asyncio.to_thread(cluster.members)
    assert len(waiting) == 2
    for pod in waiting.values():
        assert pod["status"]["phase"] == "Running"
        assert "activeDeadlineSeconds" not in pod["spec"]
        assert "API_TOKEN" not in json.dumps(pod["spec"])
    # Each member's Secret holds its runner token and its own TLS certificate, nothing else.
    secrets = cluster.members("secrets")
    assert set(secrets) == set(waiting)
    assert all(set(secret_values(s)) == {"token", "tls.crt", "tls.key"} for s in secrets.values())
    assert all(len(cluster.api.objects(k, NS)) >= 2 for k in KINDS)

    seen_after_claim: list[dict[str, dict[str, Any]]] = []

    def snapshot() -> None:  # while the job runs in its claimed pod
        if not seen_after_claim:
            seen_after_claim.append(cluster.members("secrets"))

    output, stdout = await run(
        sandbox, ENV_CREDENTIAL, 'printf %s "$API_TOKEN" | sha256sum', on_event=snapshot
    )
    assert output.exit_reason == ExitReason.complete(), output
    assert stdout[0].split()[0] == sha(VALUES["API_TOKEN"])
    assert VALUES["API_TOKEN"] not in output.model_dump_json()
    stats = pool.stats()
    assert (stats.hits, stats.misses) == (1, 0)
    # During the job, the claimed pod's Secret (and the refill's) still held only its token and
    # its own certificate.
    assert set(waiting) <= set(seen_after_claim[0])
    for secret in seen_after_claim[0].values():
        assert set(secret_values(secret)) == {"token", "tls.crt", "tls.key"}
        assert VALUES["API_TOKEN"] not in json.dumps(secret_values(secret))

    # The claimed pod goes with its job; the pool refills behind it.
    await pool.settle()
    assert await pool.wait_ready(180), pool.stats()
    now = await asyncio.to_thread(cluster.members)
    assert len(now) == 2 and len(set(now) & set(waiting)) == 1
    (claimed,) = set(waiting) - set(now)
    assert all(cluster.api.get(kind, NS, claimed) is None for kind in KINDS)
    # Its deadline backstop was lowered for the job (the only pod update).
    patched = [path for method, path in cluster.api.requests if method == "PATCH"]
    assert patched == [f"/api/v1/namespaces/{NS}/pods/{claimed}"]
    assert {o["metadata"]["name"] for o in cluster.api.objects("secrets", NS)} == set(now)

    await pool.aclose()
    assert cluster.left() == {}


async def test_networked_and_file_credential_sandboxes_start_cold(
    cluster: Cluster, pool: WarmPool[Any]
) -> None:
    sandbox = cluster.sandbox(pool)
    assert not await sandbox.warm(NETWORKED, compile_sandbox_plan(NETWORKED))
    assert not await sandbox.warm(FILE_CREDENTIAL, compile_sandbox_plan(FILE_CREDENTIAL))
    output, stdout = await run(sandbox, FILE_CREDENTIAL, "sha256sum < /run/secrets/deploy-key")
    assert output.exit_reason == ExitReason.complete(), output
    assert stdout[0].split()[0] == sha(VALUES["DEPLOY_KEY"])
    stats = pool.stats()
    assert (stats.hits, stats.misses, stats.started, stats.shapes) == (0, 0, 0, [])
    assert cluster.members() == {} and cluster.left() == {}


async def test_size_zero_is_no_pool(cluster: Cluster) -> None:
    empty: WarmPool[Any] = WarmPool(PoolSettings(size=0), name="kubernetes")
    sandbox = cluster.sandbox(empty)
    assert not await sandbox.warm(ENV_CREDENTIAL, compile_sandbox_plan(ENV_CREDENTIAL))
    output, stdout = await run(sandbox, ENV_CREDENTIAL, 'printf %s "$API_TOKEN" | sha256sum')
    assert stdout[0].split()[0] == sha(VALUES["API_TOKEN"]), output
    stats = empty.stats()
    assert (stats.hits, stats.misses, stats.started) == (0, 0, 0)
    assert cluster.members() == {} and cluster.left() == {}
    await empty.aclose()


async def test_members_hold_the_owner_lease_and_go_with_it(cluster: Cluster, pool: WarmPool[Any]) -> None:
    """A member holds a use of its controller's owner Lease until it is destroyed, and its
    objects name the Lease as their owner: once a crashed controller's Lease is deleted (by
    the reaper), the garbage collector takes its members; a claim then finds none healthy."""
    sandbox = cluster.sandbox(pool)
    environment = EnvironmentSpec()
    assert await sandbox.warm(environment, compile_sandbox_plan(environment))
    assert await pool.wait_ready(180), pool.stats()
    lease = sandbox._lease
    assert lease is not None and lease._users == 2  # one use per member, none by a job
    (stored,) = cluster.api.objects("leases", NS)
    for kind in KINDS:
        found = cluster.members(kind)
        assert len(found) == 2
        for o in found.values():
            (ref,) = o["metadata"]["ownerReferences"]
            owner = (stored["metadata"]["name"], stored["metadata"]["uid"])
            assert (ref["kind"], ref["name"], ref["uid"]) == ("Lease", *owner)
    api = sandbox._api
    assert api is not None
    await api.call(api.coordination.delete_namespaced_lease, lease.name, NS)
    assert cluster.left() == {}
    key = next(iter(pool._shapes))
    assert await pool.claim(key) is None
    assert pool.stats().misses == 1
    await pool.aclose()
    assert lease._users == 0 and lease._renewer is None
