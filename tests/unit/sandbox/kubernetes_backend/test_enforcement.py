"""NetworkPolicy enforcement proven before any job: the proof's pods, its verdicts, the guard.

The stand-in's scripted pods play the kubelet *and the network*: a reaching pod's log says
what each of its targets did, as a CNI that enforces (every attempt of the prober times out)
or ignores (it connects) NetworkPolicy would make them. What this proves: the objects the
proof creates and removes, how its lines are judged, that jobs wait for and obey the verdict,
the annotation, the opt-out. That a real CNI drops what the policies deny is the live test's
(and, for a CNI that does not, the Docker pod runtime's: tests/integration).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from airlock.policy import SandboxPlan
from airlock.proxy import host_port_text as host_port
from airlock.sandbox import (
    SandboxDefaults,
    SandboxObserver,
    SandboxRequest,
    backend,
    resolve_limits,
    set_sandbox_observer,
)
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings
from airlock.sandbox.kubernetes._enforcement_pods import (
    REACH_PREFIX,
    ProofShape,
    ProofTarget,
    render_canary,
    render_proof_policies,
    render_reacher,
    render_resolver,
)
from airlock.sandbox.kubernetes._enforcement_result import (
    ANNOTATION,
    EnforcementCheck,
    EnforcementResult,
    judge,
)
from airlock.sandbox.kubernetes._guard import EnforcementGuard
from airlock.sandbox.kubernetes._names import LABEL_ROLE, LABEL_SANDBOX, Owner, sandbox_labels
from airlock.sandbox.kubernetes._render import SandboxShape, render_network_policies
from airlock.testing import KubeApiStandIn, PodScript, ScriptedPods, bash_agent
from layer0 import EnvError, EnvironmentSpec, TurnInput
from tests.support.kube import RunnerPods
from tests.support.pod_security import restricted_violations

NS = "airlock-sandboxes"
OWNER = Owner(name="airlock-owner-test", uid="00000000-0000-0000-0000-000000000001")
#: Where the test says the metadata service is: a documentation address no traffic goes to
#: (the stand-in's pods are scripted; nothing connects anywhere).
METADATA = "192.0.2.1:80"


class Network:
    """What the scripted pods' attempts do: ``enforcing`` (the prober's time out, the control
    pod's connect) or not (everything connects); ``control_reaches``: the control pod's;
    ``resolves``: whether the resolver's name resolves (the cluster's DNS is a DNS peer)."""

    def __init__(self, pods: ScriptedPods) -> None:
        self.pods = pods
        self.enforcing = True
        self.control_reaches = True
        self.resolves = True
        self.finish = True
        self.created: list[str] = []

    def play(self, pod: dict[str, Any]) -> PodScript:
        name = pod["metadata"]["name"]
        self.created.append(name)
        container = pod["spec"]["containers"][0]
        if container["name"] not in ("prober", "control", "resolver") or not self.finish:
            return PodScript()
        if container["name"] == "resolver":
            return self._resolve(name, container["command"][-1])
        connects = self.control_reaches if container["name"] == "control" else not self.enforcing
        lines = []
        for arg in container["command"][4:]:
            target, address = arg.split("=", 1)
            outcome = "connected" if connects else "timeout"
            lines.append(
                REACH_PREFIX + json.dumps({"target": target, "address": address, "outcome": outcome})
            )
        self.pods.set_logs(NS, name, container["name"], "\n".join(lines) + "\n")
        return PodScript(exit_code=0)

    def _resolve(self, pod: str, name: str) -> PodScript:
        outcome = "resolved" if self.resolves else "unresolved"
        line = {"target": "cluster dns", "address": name, "outcome": outcome, "detail": "gaierror: -2"}
        self.pods.set_logs(NS, pod, "resolver", REACH_PREFIX + json.dumps(line) + "\n")
        return PodScript(exit_code=0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KubeApiStandIn, Network, Path]]:
    pods = ScriptedPods()
    network = Network(pods)
    pods.script = network.play
    with KubeApiStandIn(pods=pods, namespaces=(NS,)) as api:
        yield api, network, api.write_kubeconfig(tmp_path / "kubeconfig")


def settings(kubeconfig: Path, **overrides: Any) -> KubernetesSettings:
    values: dict[str, Any] = {
        "namespace": NS,
        "kubeconfig": str(kubeconfig),
        "connect": "port_forward",
        "start_timeout": 20.0,
        "enforcement": {"metadata_address": METADATA, "timeout_s": 5.0},
        **overrides,
    }
    return KubernetesSettings.model_validate(values)


def request() -> SandboxRequest:
    return SandboxRequest.compile(bash_agent("echo hi"), TurnInput.new("go"), EnvironmentSpec())


def proof_objects(api: KubeApiStandIn) -> list[str]:
    """Every object of a proof still in the namespace."""
    return [
        o["metadata"]["name"]
        for kind in ("pods", "networkpolicies")
        for o in api.objects(kind, NS)
        if (o["metadata"].get("labels") or {}).get(LABEL_SANDBOX)
    ]


def published(api: KubeApiStandIn) -> EnforcementResult:
    namespace = api.get("namespaces", "", NS)
    assert namespace is not None
    result = EnforcementResult.from_annotation(namespace["metadata"]["annotations"][ANNOTATION])
    assert result is not None
    return result


# --- jobs obey the proof -------------------------------------------------------------------


async def test_a_cluster_that_lets_the_prober_through_refuses_every_job(
    cluster: tuple[KubeApiStandIn, Network, Path],
) -> None:
    api, network, kubeconfig = cluster
    network.enforcing = False
    sandbox = KubernetesBackend(settings=settings(kubeconfig), sweep=False)
    with pytest.raises(EnvError) as info:
        await sandbox.run(request())
    assert info.value.kind == "isolation_violation"
    assert "canary" in str(info.value) and METADATA in str(info.value)
    assert "cloud metadata" in str(info.value)
    # No job's pod was ever created, and the proof removed its own objects.
    assert all(
        name.endswith(("-canary", "-control", "-resolver")) or name.count("-") == 2
        for name in network.created
    )
    assert len(network.created) == 4
    assert proof_objects(api) == []
    result = published(api)
    assert result.status == "failed" and {c.target for c in result.failed_checks()} >= {
        "canary",
        "cloud metadata",
    }


async def test_a_proven_cluster_runs_jobs_and_publishes_the_proof(
    cluster: tuple[KubeApiStandIn, Network, Path], tmp_path: Path
) -> None:
    api, network, kubeconfig = cluster
    sandbox = KubernetesBackend(settings=settings(kubeconfig), sweep=False)
    async with RunnerPods(api, network.pods, NS, tmp_path):
        output = await sandbox.run(request())
        again = await sandbox.run(request())
    assert output.message.as_text() and again.message.as_text()
    proofs = [n for n in network.created if n.endswith("-canary")]
    assert len(proofs) == 1, "one proof serves every job of its period"
    result = published(api)
    assert result.status == "enforced"
    assert {c.target for c in result.checks} == {"canary", "cloud metadata", "api server", "cluster dns"}
    assert all(c.passed for c in result.checks) and result.dns_resolves is True
    resolver = next(c for c in result.checks if c.pod == "resolver")
    assert resolver.address == "kubernetes.default.svc.cluster.local"
    proof = await sandbox.isolation_proof()
    assert proof.status == "enforced" and proof.scope == NS and proof.evidence


async def test_a_proof_whose_pods_never_finish_is_unproven_and_refuses_jobs(
    cluster: tuple[KubeApiStandIn, Network, Path],
) -> None:
    api, network, kubeconfig = cluster
    network.finish = False
    sandbox = KubernetesBackend(settings=settings(kubeconfig), sweep=False)
    with pytest.raises(EnvError) as info:
        await sandbox.run(request())
    assert info.value.kind == "isolation_violation" and "unproven" in str(info.value)
    assert "enforcement.timeout_s" in str(info.value)
    assert proof_objects(api) == []
    assert published(api).status == "unproven"


async def test_a_control_pod_that_cannot_reach_the_canary_proves_nothing(
    cluster: tuple[KubeApiStandIn, Network, Path],
) -> None:
    api, network, kubeconfig = cluster
    network.control_reaches = False  # e.g. a canary that never listened: the prober's timeouts mean nothing
    sandbox = KubernetesBackend(settings=settings(kubeconfig), sweep=False)
    with pytest.raises(EnvError) as info:
        await sandbox.run(request())
    assert info.value.kind == "isolation_violation"
    assert published(api).status == "unproven"
    assert "control" in str(info.value)


async def test_a_proxy_pod_that_cannot_resolve_is_said_but_isolation_still_holds(
    cluster: tuple[KubeApiStandIn, Network, Path], tmp_path: Path
) -> None:
    """Item 4: the proof resolves a name from a proxy-shaped pod; a cluster whose resolver the
    DNS peers miss (NodeLocal DNSCache, OpenShift) is named, and doctor warns with the fix."""
    from airlock.sandbox.kubernetes._access import DOCTOR_ACCESS, SANDBOX_ACCESS
    from airlock.sandbox.kubernetes._api import KubeApi
    from airlock.sandbox.kubernetes._enforcement_doctor import enforcement_check

    api, network, kubeconfig = cluster
    network.resolves = False
    kube = settings(kubeconfig, cluster_domain="corp.internal")
    sandbox = KubernetesBackend(settings=kube, sweep=False)
    async with RunnerPods(api, network.pods, NS, tmp_path):
        await sandbox.run(request())
    result = published(api)
    assert result.status == "enforced" and result.dns_resolves is False
    assert "could not resolve kubernetes.default.svc.corp.internal" in result.reason
    assert "backends.kubernetes.dns" in result.reason
    kube_api = await KubeApi.connect(kube, SANDBOX_ACCESS + DOCTOR_ACCESS)
    try:
        verdict = await enforcement_check(kube_api, kube)
    finally:
        kube_api.close()
    assert verdict.status == "warning" and "169.254.20.10" in verdict.hint


async def test_assume_enforced_runs_without_a_proof_and_warns(
    cluster: tuple[KubeApiStandIn, Network, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, network, kubeconfig = cluster
    network.enforcing = False
    caplog.set_level(logging.WARNING, "airlock.sandbox.kubernetes")
    sandbox = KubernetesBackend(settings=settings(kubeconfig, network_policy="assume_enforced"), sweep=False)
    async with RunnerPods(api, network.pods, NS, tmp_path):
        await sandbox.run(request())
    assert not [n for n in network.created if n.endswith("-canary")]
    assert any("ASSUMED, not proven" in r.getMessage() for r in caplog.records)
    assert (await sandbox.isolation_proof()).status == "assumed"


async def test_warming_a_pool_waits_for_the_proof_too(cluster: tuple[KubeApiStandIn, Network, Path]) -> None:
    from airlock.sandbox import PoolSettings, WarmPool

    _, network, kubeconfig = cluster
    network.enforcing = False
    pool: WarmPool[Any] = WarmPool(PoolSettings(size=1), name="kubernetes")
    sandbox = KubernetesBackend(settings=settings(kubeconfig), sweep=False, pool=pool)
    try:
        with pytest.raises(EnvError) as info:
            await sandbox.warm(EnvironmentSpec(), SandboxPlan())
    finally:
        await pool.aclose()
    assert info.value.kind == "isolation_violation"


# --- the guard -----------------------------------------------------------------------------


def result(status: str, at: datetime | None = None) -> EnforcementResult:
    return EnforcementResult.model_validate(
        {"status": status, "namespace": NS, "checked_at": at or datetime.now(UTC), "reason": "recorded"}
    )


async def test_a_recorded_enforcing_result_passes_jobs_and_is_proven_again_each_period() -> None:
    proofs: list[EnforcementResult] = []

    async def prove() -> EnforcementResult:
        proofs.append(result("enforced"))
        return proofs[-1]

    guard = EnforcementGuard(namespace=NS, mode="verify", interval_s=0.05, prove=prove)
    try:
        await guard.require()
        await asyncio.sleep(0.3)
        assert len(proofs) >= 3, "the background proof runs every interval"
        await guard.require()
    finally:
        await guard.aclose()


async def test_a_failed_result_refuses_then_a_passing_proof_admits(monkeypatch: pytest.MonkeyPatch) -> None:
    from airlock.sandbox.kubernetes import _guard

    verdicts = ["failed", "enforced"]

    async def prove() -> EnforcementResult:
        return result(verdicts.pop(0))

    monkeypatch.setattr(_guard, "RETRY_S", 0.0)
    guard = EnforcementGuard(namespace=NS, mode="verify", interval_s=600, prove=prove)
    verdicts_seen = Verdicts()
    previous = set_sandbox_observer(verdicts_seen)
    try:
        with pytest.raises(EnvError) as info:
            await guard.require()
        assert info.value.kind == "isolation_violation"
        await guard.require()  # proven again on demand: the cluster was fixed
        assert guard.latest is not None and guard.latest.status == "enforced"
    finally:
        set_sandbox_observer(previous)
        await guard.aclose()
    assert verdicts_seen.seen == [("kubernetes", "failed"), ("kubernetes", "enforced")]  # each reported


class Verdicts(SandboxObserver):
    """Records each isolation verdict reported."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def isolation_proved(self, backend: str, status: str) -> None:
        self.seen.append((backend, status))


async def test_a_stale_result_is_not_trusted() -> None:
    calls = 0

    async def prove() -> EnforcementResult:
        nonlocal calls
        calls += 1
        return result("enforced")

    guard = EnforcementGuard(namespace=NS, mode="verify", interval_s=600, prove=prove)
    guard._latest = result("enforced", datetime.now(UTC) - timedelta(hours=1))
    try:
        await guard.require()
    finally:
        await guard.aclose()
    assert calls == 1


# --- judging and rendering -----------------------------------------------------------------


def check(pod: str, target: str, outcome: str, expect: str | None = None) -> EnforcementCheck:
    return EnforcementCheck.model_validate(
        {
            "pod": pod,
            "target": target,
            "address": "10.0.0.1:80",
            "expect": expect or ("reachable" if pod == "control" else "blocked"),
            "outcome": outcome,
        }
    )


@pytest.mark.parametrize(
    ("checks", "status"),
    [
        ([check("prober", "canary", "timeout"), check("control", "canary", "connected")], "enforced"),
        ([check("prober", "canary", "refused"), check("control", "canary", "connected")], "enforced"),
        ([check("prober", "canary", "connected"), check("control", "canary", "connected")], "failed"),
        ([check("prober", "api server", "connected"), check("control", "canary", "timeout")], "failed"),
        ([check("prober", "canary", "timeout"), check("control", "canary", "timeout")], "unproven"),
        ([check("prober", "canary", "not run"), check("control", "canary", "connected")], "unproven"),
        ([check("prober", "canary", "timeout")], "unproven"),
        (
            [
                check("prober", "canary", "timeout"),
                check("control", "canary", "connected"),
                check("resolver", "cluster dns", "unresolved", "resolves"),
            ],
            "enforced",
        ),
        (
            [
                check("prober", "canary", "connected"),
                check("control", "canary", "connected"),
                check("resolver", "cluster dns", "resolved", "resolves"),
            ],
            "failed",
        ),
    ],
)
def test_the_verdict(checks: list[EnforcementCheck], status: str) -> None:
    assert judge(NS, checks, datetime.now(UTC)).status == status


def test_the_annotation_round_trips_and_garbage_is_none() -> None:
    original = judge(
        NS, [check("prober", "canary", "timeout"), check("control", "canary", "connected")], datetime.now(UTC)
    )
    assert EnforcementResult.from_annotation(original.annotation()) == original
    assert EnforcementResult.from_annotation("{not json") is None
    assert EnforcementResult.from_annotation('{"status": "enforced"}') is None


def shape() -> ProofShape:
    sandbox = SandboxShape(
        sandbox_id="sb-0123456789abcdef",
        namespace=NS,
        owner=OWNER,
        settings=KubernetesSettings(),
        image="registry.example.com/airlock-runner:1",
        plan=SandboxPlan(),
        limits=resolve_limits(EnvironmentSpec(), SandboxDefaults()),
        runtime_class=None,
        active_deadline_s=180,
        controller_namespace="airlock",
    )
    return ProofShape(sandbox, 8080, 2.0)


def objects() -> list[dict[str, Any]]:
    targets = [ProofTarget("canary", "10.244.0.9:8080"), ProofTarget("cloud metadata", "169.254.169.254:80")]
    return [
        render_canary(shape()),
        render_reacher(shape(), "prober", targets),
        render_reacher(shape(), "control", targets[:1]),
        render_resolver(shape(), "kubernetes.default.svc.cluster.local"),
        *render_proof_policies(shape()),
    ]


def test_the_resolver_has_the_clusters_resolver_and_only_a_proxy_pods_dns_rule() -> None:
    from airlock.sandbox.kubernetes._dns import dns_egress_rule

    resolver = render_resolver(shape(), "kubernetes.default.svc.cluster.local")
    assert "dnsPolicy" not in resolver["spec"], "ClusterFirst, as a proxy pod that resolves names"
    assert resolver["spec"]["containers"][0]["command"][-1] == "kubernetes.default.svc.cluster.local"
    policy = next(p for p in render_proof_policies(shape()) if p["metadata"]["name"].endswith("-resolver"))
    assert policy["spec"]["egress"] == [dns_egress_rule(shape().sandbox.settings.dns)]
    assert policy["spec"]["ingress"] == []
    prober = render_reacher(shape(), "prober", [])
    assert prober["spec"]["dnsPolicy"] == "None", "the prober's targets are addresses"


def test_the_prober_is_shaped_like_a_deny_all_sandbox() -> None:
    prober = render_reacher(shape(), "prober", [])
    assert prober["metadata"]["labels"] == sandbox_labels("sb-0123456789abcdef", "sandbox", OWNER)
    policies = render_proof_policies(shape())
    assert render_network_policies(shape().sandbox)[0] in policies
    sandbox_policy = policies[0]["spec"]
    assert (
        sandbox_policy["egress"] == []
        and sandbox_policy["podSelector"]["matchLabels"][LABEL_ROLE] == "sandbox"
    )


@pytest.mark.parametrize("version", ["1.25", "1.33"])
def test_every_object_of_the_proof_is_strictly_valid_and_restricted(version: str) -> None:
    for obj in objects():
        kubernetes_validate.validate(obj, version, strict=True)
        if obj["kind"] == "Pod":
            assert restricted_violations(obj) == []
            assert obj["spec"]["automountServiceAccountToken"] is False


def test_ipv6_addresses_are_bracketed() -> None:
    assert host_port("fd00::5", 8080) == "[fd00::5]:8080"
    assert host_port("10.0.0.5", 8080) == "10.0.0.5:8080"


def test_the_settings_refuse_an_address_without_a_port() -> None:
    with pytest.raises(ValueError, match="host:port"):
        KubernetesSettings.model_validate({"enforcement": {"metadata_address": "169.254.169.254"}})
    with pytest.raises(ValueError, match="network_policy"):
        KubernetesSettings.model_validate({"network_policy": "trust"})
    assert backend("kubernetes").settings is KubernetesSettings
