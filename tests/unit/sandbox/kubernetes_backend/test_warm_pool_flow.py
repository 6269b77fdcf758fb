"""KubernetesBackend's warm pool against the stand-in API server, without Docker.

Each sandbox pod's runner is a real runner process on this host, reached through the
stand-in's port-forward (:class:`RunnerPods`), so this covers the port-forward channel of a
member (the Docker-run pods of ``tests/integration/test_kube_warm_pool.py`` use pod IPs): a
claim binds the env_var credential late; a member whose runner died is dropped at its claim
and the job starts cold; a failing start leaves nothing. Not emulated: as in
``test_sandbox_flow``, scheduling and NetworkPolicy enforcement; and a runner here is a host
process, so a cold pod's ``secretKeyRef`` environment never reaches it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airlock.policy import EnvSecretResolver
from airlock.sandbox import (
    SandboxRequest,
    WarmPool,
    compile_sandbox_plan,
)
from airlock.sandbox.kubernetes import SANDBOX_ACCESS, KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._access import resolve
from airlock.sandbox.kubernetes._names import LABEL_OWNER, LABEL_POOL
from airlock.testing import KubeApiStandIn, PodScript, ScriptedPods, bash_agent
from airlock.turn import ToolFinished
from layer0 import CredentialInjection, CredentialRef, EnvironmentSpec, ExitReason, TurnInput
from tests.support.kube import RunnerPods, recorded_guard, until
from tests.support.provisions import Provisions, recorded_provisions

NS = "airlock-sandboxes"
VALUE = "env-secret-Pz39fL2qk8"
ENVIRONMENT = EnvironmentSpec(
    credentials=[CredentialRef(name="api-token", injection=CredentialInjection.env_var("API_TOKEN"))]
)


class Cluster:
    def __init__(self, api: KubeApiStandIn, pods: ScriptedPods, kubeconfig: Path, work: Path) -> None:
        self.api, self.pods, self.kubeconfig, self.work = api, pods, kubeconfig, work

    def sandbox(self, pool: WarmPool[Any]) -> KubernetesBackend:
        settings = KubernetesSettings(
            namespace=NS, kubeconfig=str(self.kubeconfig), connect="port_forward", start_timeout=20.0
        )
        resolver = EnvSecretResolver({"API_TOKEN": VALUE})
        return KubernetesBackend(
            settings=settings,
            secrets=resolver,
            sweep=False,
            pool=pool,
            turn_timeout=60,
            guard=recorded_guard(NS),
        )

    def runners(self) -> RunnerPods:
        return RunnerPods(self.api, self.pods, NS, self.work)

    def named(self, kind: str, label: str) -> list[str]:
        return [
            o["metadata"]["name"]
            for o in self.api.objects(kind, NS)
            if label in (o["metadata"].get("labels") or {})
        ]


@pytest.fixture
def script() -> dict[str, PodScript]:
    return {}


@pytest.fixture
def provisions() -> Iterator[Provisions]:
    with recorded_provisions() as recorder:
        yield recorder


@pytest.fixture
def cluster(tmp_path: Path, script: dict[str, PodScript]) -> Iterator[Cluster]:
    pods = ScriptedPods(lambda pod: script.get("sandbox", PodScript()))
    with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
        yield Cluster(api, pods, api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


async def job(sandbox: KubernetesBackend) -> tuple[Any, list[str]]:
    stdout: list[str] = []

    async def sink(event: Any) -> None:
        if isinstance(event, ToolFinished):
            stdout.append(json.loads(event.output)["stdout"].strip())

    agent = bash_agent('printf %s "$API_TOKEN" | sha256sum')
    request = SandboxRequest.compile(agent, TurnInput.new("go"), ENVIRONMENT, events=sink)
    return await sandbox.run(request), stdout


async def test_a_claim_through_port_forward_binds_the_credential_late(
    cluster: Cluster, pool: WarmPool[Any], provisions: Provisions
) -> None:
    sandbox = cluster.sandbox(pool)
    async with cluster.runners():
        assert await sandbox.warm(ENVIRONMENT, compile_sandbox_plan(ENVIRONMENT))
        assert await pool.wait_ready(30), pool.stats()
        (member,) = cluster.named("pods", LABEL_POOL)
        output, stdout = await job(sandbox)
        assert output.exit_reason == ExitReason.complete(), output
        assert stdout == [f"{hashlib.sha256(VALUE.encode()).hexdigest()}  -"]
        assert (pool.stats().hits, pool.stats().misses) == (1, 0)
        assert provisions.seen == [("kubernetes", "warm")]
        await pool.settle()
        assert member not in cluster.named("pods", LABEL_POOL)
        await pool.aclose()
    assert cluster.named("pods", LABEL_OWNER) == cluster.named("secrets", LABEL_OWNER) == []


async def test_the_deadline_patch_of_a_claimed_member_is_in_the_access_table(
    cluster: Cluster, pool: WarmPool[Any]
) -> None:
    """A claim lowers the member's deadline with a patch (the backstop): the access table lists
    it (the chart's Role and doctor's review come from the table), so it reaches the server,
    and so does every other request of the flow."""
    sandbox = cluster.sandbox(pool)
    async with cluster.runners():
        assert await sandbox.warm(ENVIRONMENT, compile_sandbox_plan(ENVIRONMENT))
        assert await pool.wait_ready(30), pool.stats()
        (member,) = cluster.named("pods", LABEL_POOL)
        output, _ = await job(sandbox)
        assert output.exit_reason == ExitReason.complete(), output
        await pool.settle()
        await pool.aclose()
    patched = [path for method, path in cluster.api.requests if method == "PATCH"]
    assert patched == [f"/api/v1/namespaces/{NS}/pods/{member}"]
    grants = resolve(SANDBOX_ACCESS, sandbox.settings, "port_forward")
    for method, path in cluster.api.requests:
        grants.check_request(method, path)


async def test_a_member_whose_runner_died_is_dropped_and_the_job_starts_cold(
    cluster: Cluster, pool: WarmPool[Any], provisions: Provisions
) -> None:
    sandbox = cluster.sandbox(pool)
    async with cluster.runners() as runners:
        assert await sandbox.warm(ENVIRONMENT, compile_sandbox_plan(ENVIRONMENT))
        assert await pool.wait_ready(30), pool.stats()
        (member,) = cluster.named("pods", LABEL_POOL)
        runners.kill_runner(member)
        output, stdout = await job(sandbox)
        assert output.exit_reason == ExitReason.complete(), output
        # (a cold pod's env_var credential is a secretKeyRef: RunnerPods' host processes lack it)
        assert len(stdout) == 1
        assert (pool.stats().hits, pool.stats().misses) == (0, 1)
        assert provisions.seen == [("kubernetes", "cold")]
        await pool.settle()
        assert member not in cluster.named("pods", LABEL_OWNER)
        await pool.aclose()
    assert cluster.named("pods", LABEL_OWNER) == cluster.named("secrets", LABEL_OWNER) == []


async def test_a_member_that_cannot_start_leaves_nothing(
    cluster: Cluster, pool: WarmPool[Any], script: dict[str, PodScript]
) -> None:
    script["sandbox"] = PodScript(terminated_reason="Error")
    sandbox = cluster.sandbox(pool)
    async with cluster.runners():
        assert await sandbox.warm(ENVIRONMENT, compile_sandbox_plan(ENVIRONMENT))
        await until(lambda: pool.stats().failed >= 1)
        await pool.aclose()
    assert cluster.named("pods", LABEL_OWNER) == cluster.named("secrets", LABEL_OWNER) == []
    assert sandbox._lease is not None and sandbox._lease._users == 0


async def test_a_cancelled_claim_removes_its_pod_and_gives_up_the_lease(
    cluster: Cluster, pool: WarmPool[Any]
) -> None:
    sandbox = cluster.sandbox(pool)
    async with cluster.runners():
        assert await sandbox.warm(ENVIRONMENT, compile_sandbox_plan(ENVIRONMENT))
        assert await pool.wait_ready(30), pool.stats()
        (member,) = cluster.named("pods", LABEL_POOL)
        request = SandboxRequest.compile(bash_agent("sleep 30"), TurnInput.new("go"), ENVIRONMENT)
        running = asyncio.ensure_future(sandbox.run(request))
        await until(lambda: pool.stats().hits == 1)
        await asyncio.sleep(0.5)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert cluster.api.get("pods", NS, member) is None
        await pool.aclose()
    assert cluster.named("pods", LABEL_OWNER) == cluster.named("secrets", LABEL_OWNER) == []
    assert sandbox._lease is not None and sandbox._lease._users == 0
