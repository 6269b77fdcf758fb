"""A job never runs twice: teardown order, a predecessor's Lease retired at once, the sweep
while running, and a resume that first removes the job's previous sandbox.

Against the stand-in API server with graceful pod deletion (``pod_termination_s``: a pod
deleted with a grace period stays Terminating a moment), so the order of what leaves the
store is observable. A "previous controller" is written into the stand-in as it would have
left things after a crash: its owner Lease and its sandbox's pod, Secret and NetworkPolicy.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airlock.sandbox.kubernetes import KubernetesBackend
from airlock.sandbox.kubernetes._names import (
    LABEL_JOB,
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_ROLE,
    LABEL_SANDBOX,
    MANAGED_BY,
)
from airlock.sandbox.kubernetes._owner import PROCESS_HOLDER, lease_name, micro_time
from airlock.testing import KubeApiStandIn, ScriptedPods, bash_agent, calculator_agent
from layer0 import EnvError, TurnConfig
from tests.support.kube import recorded_guard, until

from .test_sandbox_flow import NS, Cluster, request

#: Seconds a gracefully deleted pod stays Terminating in the stand-in.
TERMINATING_S = 0.4


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    pods = ScriptedPods()
    with KubeApiStandIn(pods=pods, namespaces=(NS,), pod_termination_s=TERMINATING_S) as api:
        yield Cluster(api, pods, api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


def leftover(cluster: Cluster, sandbox_id: str, owner: str, *, job: str | None = None) -> None:
    """What a controller that died left of one sandbox: its pod (running), Secret and policy."""
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    net = client.NetworkingV1Api(core.api_client)
    labels = {LABEL_MANAGED: MANAGED_BY, LABEL_OWNER: owner, LABEL_SANDBOX: sandbox_id, LABEL_ROLE: "sandbox"}
    if job is not None:
        labels[LABEL_JOB] = job
    meta = {"name": f"airlock-{sandbox_id}", "labels": labels}
    core.create_namespaced_secret(NS, {"metadata": meta, "stringData": {"token": "its-runner-token"}})
    net.create_namespaced_network_policy(NS, {"metadata": meta, "spec": {"podSelector": {}}})
    core.create_namespaced_pod(
        NS, {"metadata": meta, "spec": {"containers": [{"name": "runner", "image": "airlock-runner"}]}}
    )


def owner_lease(cluster: Cluster, name: str, *, holder: str, renewed: datetime) -> None:
    from kubernetes import client, config

    coordination = client.CoordinationV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    coordination.create_namespaced_lease(
        NS,
        {
            "metadata": {"name": name, "labels": {LABEL_MANAGED: MANAGED_BY, LABEL_ROLE: "owner"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 60, "renewTime": micro_time(renewed)},
        },
    )


def expire(cluster: Cluster, name: str) -> None:
    """The Lease was last renewed an hour ago (its holder died)."""
    from kubernetes import client, config

    coordination = client.CoordinationV1Api(config.new_client_from_config(str(cluster.kubeconfig)))
    renewed = micro_time(datetime.now(UTC) - timedelta(hours=1))
    coordination.patch_namespaced_lease(name, NS, {"spec": {"renewTime": renewed}})


def names(cluster: Cluster, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.api.objects(kind, NS)}


def removed_before(cluster: Cluster, first: tuple[str, str], then: tuple[str, str]) -> bool:
    removals = cluster.api.removals
    return removals.index(first) < removals.index(then)


async def test_teardown_deletes_the_pod_gracefully_and_its_policy_and_secret_only_once_it_is_gone(
    cluster: Cluster,
) -> None:
    async with cluster.runners():
        output = await cluster.sandbox().run(request(calculator_agent()))
    assert output.message.as_text() == "17 x 23 = 391."
    assert cluster.left() == {}
    [pod] = [
        name for kind, name, _ in cluster.api.deletions if kind == "pods" and not name.endswith("-proxy")
    ]
    graces = [grace for kind, _, grace in cluster.api.deletions if kind == "pods"]
    assert graces and all(grace is not None and grace > 0 for grace in graces), "never forced"
    # the pod lingered Terminating; its policy and Secret went only after it was gone
    assert removed_before(cluster, ("pods", pod), ("networkpolicies", pod))
    assert removed_before(cluster, ("pods", pod), ("secrets", pod))


async def test_a_restarted_controller_retires_its_predecessors_lease_and_sandbox_at_once(
    cluster: Cluster,
) -> None:
    lease = lease_name("controller-a")
    # the previous process of the same identity crashed a moment ago: its Lease still looks alive
    owner_lease(cluster, lease, holder="old-host/1/0000", renewed=datetime.now(UTC))
    leftover(cluster, "sb-0000000000000001", lease)
    sandbox = KubernetesBackend(
        settings=cluster.settings(owner_identity="controller-a"), sweep=False, guard=recorded_guard(NS)
    )
    try:
        async with cluster.runners():
            output = await sandbox.run(request(calculator_agent()))
    finally:
        await sandbox.aclose()
    assert output.message.as_text() == "17 x 23 = 391."
    old = "airlock-sb-0000000000000001"
    assert old not in names(cluster, "pods") | names(cluster, "secrets") | names(cluster, "networkpolicies")
    assert removed_before(cluster, ("pods", old), ("networkpolicies", old))
    [held] = cluster.api.objects("leases", NS)
    assert held["metadata"]["name"] == lease and held["spec"]["holderIdentity"] == PROCESS_HOLDER


async def test_two_backends_of_one_controller_share_its_lease_without_retiring_each_other(
    cluster: Cluster,
) -> None:
    settings = cluster.settings(owner_identity="controller-b")
    first, second = (
        KubernetesBackend(settings=settings, sweep=False, guard=recorded_guard(NS)) for _ in range(2)
    )
    try:
        async with cluster.runners():
            await first.run(request(calculator_agent()))
            await second.run(request(calculator_agent()))
    finally:
        await first.aclose()
        await second.aclose()
    assert [o["metadata"]["name"] for o in cluster.api.objects("leases", NS)] == [lease_name("controller-b")]
    assert ("leases", lease_name("controller-b")) not in cluster.api.removals


async def test_a_running_backend_sweeps_an_owner_that_expired_after_its_start(cluster: Cluster) -> None:
    sandbox = KubernetesBackend(
        settings=cluster.settings(), sweep=False, reap_every=0.1, guard=recorded_guard(NS)
    )
    try:
        async with cluster.runners():
            await sandbox.run(request(calculator_agent()))
        # another controller, alive when this one started, stops renewing its Lease
        owner_lease(cluster, "airlock-owner-gone", holder="h/2/0000", renewed=datetime.now(UTC))
        leftover(cluster, "sb-0000000000000002", "airlock-owner-gone")
        expire(cluster, "airlock-owner-gone")
        await until(lambda: "airlock-owner-gone" not in names(cluster, "leases"))
    finally:
        await sandbox.aclose()
    assert cluster.left() == {}
    old = "airlock-sb-0000000000000002"
    assert removed_before(cluster, ("pods", old), ("secrets", old))
    assert len(cluster.api.objects("leases", NS)) == 1, "its own Lease is kept"


async def test_closing_the_backend_stops_its_sweep(cluster: Cluster) -> None:
    sandbox = KubernetesBackend(
        settings=cluster.settings(), sweep=False, reap_every=0.05, guard=recorded_guard(NS)
    )
    async with cluster.runners():
        await sandbox.run(request(calculator_agent()))
    [sweep] = [t for t in asyncio.all_tasks() if t.get_name() == f"sweep {NS}"]
    assert not sweep.done()
    await sandbox.aclose()
    assert sweep.cancelled()


async def test_a_resume_removes_the_jobs_previous_sandbox_first(cluster: Cluster) -> None:
    # a live controller of another identity still holds the job's previous sandbox (a fast restart)
    owner_lease(cluster, "airlock-owner-other", holder="h/3/0000", renewed=datetime.now(UTC))
    leftover(cluster, "sb-0000000000000003", "airlock-owner-other", job="j-resumed")
    leftover(cluster, "sb-0000000000000004", "airlock-owner-other", job="j-another")
    sandbox = cluster.sandbox()
    try:
        await sandbox.ensure_gone("j-resumed")
    finally:
        await sandbox.aclose()
    old = "airlock-sb-0000000000000003"
    assert old not in names(cluster, "pods") | names(cluster, "secrets") | names(cluster, "networkpolicies")
    assert removed_before(cluster, ("pods", old), ("networkpolicies", old))
    assert "airlock-sb-0000000000000004" in names(cluster, "pods"), "another job's sandbox stays"


async def test_a_resume_is_refused_while_the_previous_pod_cannot_be_removed(cluster: Cluster) -> None:
    owner_lease(cluster, "airlock-owner-other", holder="h/3/0000", renewed=datetime.now(UTC))
    leftover(cluster, "sb-0000000000000005", "airlock-owner-other", job="j-stuck")
    cluster.api.deny("delete", "pods")
    sandbox = cluster.sandbox()
    try:
        with pytest.raises(EnvError) as info:
            await sandbox.ensure_gone("j-stuck")
    finally:
        await sandbox.aclose()
    assert info.value.kind == "provision_failed"
    assert "j-stuck is not resumed" in str(info.value) and "airlock-sb-0000000000000005" in str(info.value)
    # the pod may still run: its policy and Secret were kept
    assert "airlock-sb-0000000000000005" in names(cluster, "networkpolicies") & names(cluster, "secrets")


async def test_a_jobs_sandbox_objects_carry_its_job(cluster: Cluster) -> None:
    seen: dict[str, dict[str, Any]] = {}

    async def capture() -> None:
        await until(lambda: cluster.api.objects("pods", NS))
        for kind in ("pods", "secrets", "networkpolicies"):
            for obj in cluster.api.objects(kind, NS):
                seen[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"].get("labels") or {}

    sandbox = cluster.sandbox()
    try:
        async with cluster.runners():
            watcher = asyncio.create_task(capture())
            agent = bash_agent("sleep 0.5", defaults=TurnConfig(max_duration=30_000))
            await sandbox.run(request(agent, job="j-labelled"))
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
    finally:
        await sandbox.aclose()
    jobs = {key: labels.get(LABEL_JOB) for key, labels in seen.items() if LABEL_OWNER in labels}
    assert jobs and set(jobs.values()) == {"j-labelled"}, jobs
