"""An agent's placement on the Kubernetes backend: rendered onto the sandbox and proxy pods
(node selector merged over the settings', tolerations after theirs, the RuntimeClass on the
sandbox pod alone), strictly valid; a job through the stand-in API server creates its pods so;
a missing or unreadable per-agent RuntimeClass fails before any pod; a pod warmed for one
placement never serves a job of another."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from airlock.sandbox import (
    Placement,
    SandboxRequest,
    Toleration,
    WarmPool,
    compile_sandbox_plan,
)
from airlock.sandbox.kubernetes import KubernetesBackend, KubernetesSettings, placed_settings
from airlock.sandbox.kubernetes._access import SANDBOX_ACCESS, resolve
from airlock.sandbox.kubernetes._names import LABEL_OWNER, LABEL_POOL, LABEL_ROLE
from airlock.sandbox.kubernetes._render import render_pod, render_proxy_pod
from airlock.testing import KubeApiStandIn, PodScript, ScriptedPods, bash_agent
from layer0 import (
    EnvError,
    EnvironmentSpec,
    ExitReason,
    GvisorIsolation,
    NetworkAction,
    NetworkPolicy,
    NetworkRule,
    TurnInput,
)
from tests.support.kube import RunnerPods, recorded_guard
from tests.unit.sandbox.kubernetes_backend.test_render import PROXY_IP, shape_for

NS = "airlock-sandboxes"
GPU_TAINT = Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule")
POOL_TAINT = Toleration(key="airlock.dev/sandboxes", value="true", effect="NoSchedule")
GPU = Placement(
    node_selector={"airlock.dev/pool": "gpu", "nvidia.com/gpu.present": "true"},
    tolerations=(GPU_TAINT,),
    runtime_class="nvidia",
)
#: The backend's own placement: every sandbox goes to the sandbox pool, tolerating its taint.
BACKEND = {
    "node_selector": {"airlock.dev/pool": "sandboxes", "kubernetes.io/os": "linux"},
    "tolerations": (POOL_TAINT,),
}
MERGED_SELECTOR = {"airlock.dev/pool": "gpu", "kubernetes.io/os": "linux", "nvidia.com/gpu.present": "true"}
MERGED_TOLERATIONS = [POOL_TAINT.manifest(), GPU_TAINT.manifest()]
WITH_EGRESS = EnvironmentSpec(
    network=NetworkPolicy(
        default=NetworkAction.DENY,
        rules=[NetworkRule(destination="example.org", port=443, action=NetworkAction.ALLOW)],
    )
)


def validate(pod: dict[str, Any]) -> None:
    for version in ("1.25", str(kubernetes_validate.latest_version())):
        kubernetes_validate.validate(pod, version, strict=True)


# --- rendering ------------------------------------------------------------------------------


def test_both_pods_carry_the_merged_placement_and_only_the_sandbox_its_runtime_class() -> None:
    shape = dataclasses.replace(shape_for(WITH_EGRESS, KubernetesSettings(**BACKEND)), placement=GPU)
    pod, proxy = render_pod(shape, proxy_ip=PROXY_IP), render_proxy_pod(shape)
    for rendered in (pod, proxy):
        assert rendered["spec"]["nodeSelector"] == MERGED_SELECTOR  # the agent wins per key
        assert rendered["spec"]["tolerations"] == MERGED_TOLERATIONS  # the backend's, then the agent's
        validate(rendered)
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in proxy["spec"]


def test_with_no_placement_the_pods_keep_the_settings_placement() -> None:
    shape = shape_for(WITH_EGRESS, KubernetesSettings(**BACKEND))
    for rendered in (render_pod(shape, proxy_ip=PROXY_IP), render_proxy_pod(shape)):
        assert rendered["spec"]["nodeSelector"] == BACKEND["node_selector"]
        assert rendered["spec"]["tolerations"] == [POOL_TAINT.manifest()]
        assert "runtimeClassName" not in rendered["spec"]


def test_a_placed_runc_pod_keeps_its_user_namespace() -> None:
    """A placement's RuntimeClass under ``container`` isolation (NVIDIA's runc) is no reason to
    drop ``hostUsers: false``: the boundary asked for stays."""
    shape = shape_for(EnvironmentSpec(), KubernetesSettings(user_namespaces=True))
    pod = render_pod(dataclasses.replace(shape, placement=GPU), proxy_ip=None)
    assert pod["spec"]["runtimeClassName"] == "nvidia" and pod["spec"]["hostUsers"] is False
    validate(pod)


def test_a_placement_never_replaces_the_isolations_runtime_class() -> None:
    shape = shape_for(EnvironmentSpec(isolation=[GvisorIsolation()]))
    with pytest.raises(ValueError, match="would replace the isolation's RuntimeClass 'gvisor'"):
        render_pod(dataclasses.replace(shape, placement=GPU), proxy_ip=None)
    placed = dataclasses.replace(shape, placement=GPU.model_copy(update={"runtime_class": None}))
    pod = render_pod(placed, proxy_ip=None)
    assert pod["spec"]["runtimeClassName"] == "gvisor"
    assert pod["spec"]["nodeSelector"] == GPU.node_selector


def test_placed_settings_make_the_agents_runtime_classes_readable() -> None:
    settings = placed_settings(None, [GPU, Placement(runtime_class="nvidia"), Placement()])
    assert settings.placement_runtime_classes == ("nvidia",)
    grants = resolve(SANDBOX_ACCESS, settings, "port_forward")
    grants.check_request("GET", "/apis/node.k8s.io/v1/runtimeclasses/nvidia")
    unplaced = resolve(SANDBOX_ACCESS, KubernetesSettings(), "port_forward").grants
    assert [g.names for g in unplaced if g.resource == "runtimeclasses"] == [("gvisor", "kata")]


def test_equal_placements_are_one_pool_key() -> None:
    other = Placement(
        node_selector={"nvidia.com/gpu.present": "true", "airlock.dev/pool": "gpu"},
        tolerations=(GPU_TAINT,),
        runtime_class="nvidia",
    )
    assert other == GPU and hash(other) == hash(GPU) and repr(other) == repr(GPU)
    assert Placement() != GPU and Placement().empty and not GPU.empty


# --- through the stand-in API server ----------------------------------------------------------


class Cluster:
    def __init__(self, api: KubeApiStandIn, pods: ScriptedPods, kubeconfig: Path, work: Path) -> None:
        self.api, self.pods, self.kubeconfig, self.work = api, pods, kubeconfig, work

    def sandbox(self, pool: WarmPool[Any] | None = None, **overrides: Any) -> KubernetesBackend:
        values: dict[str, Any] = {
            "namespace": NS,
            "kubeconfig": str(self.kubeconfig),
            "connect": "port_forward",
            "start_timeout": 20.0,
            **BACKEND,
        }
        settings = placed_settings(KubernetesSettings(**{**values, **overrides}), [GPU])
        return KubernetesBackend(
            settings=settings, sweep=False, pool=pool, turn_timeout=60, guard=recorded_guard(NS)
        )

    def runners(self) -> RunnerPods:
        return RunnerPods(self.api, self.pods, NS, self.work)

    def pods_of(self, role: str) -> list[dict[str, Any]]:
        return [o for o in self.api.objects("pods", NS) if o["metadata"]["labels"].get(LABEL_ROLE) == role]

    def posted(self) -> list[str]:
        """What was created besides the namespace's default-deny policy."""
        return [p for m, p in self.api.requests if m == "POST" and not p.endswith("/networkpolicies")]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    pods = ScriptedPods(lambda pod: PodScript())
    runtime_classes = {"gvisor": "runsc", "nvidia": "nvidia"}
    with KubeApiStandIn(pods=pods, namespaces=(NS,), runtime_classes=runtime_classes) as api:
        yield Cluster(api, pods, api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path)


def request(spec: EnvironmentSpec, placement: Placement | None) -> SandboxRequest:
    return SandboxRequest.compile(bash_agent("true"), TurnInput.new("go"), spec, placement=placement)


async def test_a_placed_job_creates_its_pods_with_the_placement(cluster: Cluster) -> None:
    async with cluster.runners() as runners:
        output = await cluster.sandbox().run(request(WITH_EGRESS, GPU))
    assert output.exit_reason == ExitReason.complete(), output
    by_role = {p["metadata"]["labels"][LABEL_ROLE]: p for p in runners.seen.values()}
    sandbox, proxy = by_role["sandbox"], by_role["proxy"]
    for pod in (sandbox, proxy):
        assert pod["spec"]["nodeSelector"] == MERGED_SELECTOR
        assert pod["spec"]["tolerations"] == MERGED_TOLERATIONS
    assert sandbox["spec"]["runtimeClassName"] == "nvidia"
    assert "runtimeClassName" not in proxy["spec"]


async def test_a_missing_per_agent_runtime_class_fails_before_any_pod(cluster: Cluster) -> None:
    missing = GPU.model_copy(update={"runtime_class": "nvidia-not-installed"})
    sandbox = cluster.sandbox()
    sandbox.settings = placed_settings(sandbox.settings, [missing])
    with pytest.raises(EnvError) as info:
        await sandbox.run(request(EnvironmentSpec(), missing))
    assert info.value.kind == "isolation_violation"
    assert (
        "placement.runtime_class 'nvidia-not-installed' names a RuntimeClass this cluster does not have"
        in str(info.value)
    )
    assert cluster.posted() == []  # no Lease, Secret or pod


async def test_a_runtime_class_the_backend_may_not_read_is_refused_clearly(cluster: Cluster) -> None:
    """A caller (not the configuration) naming a RuntimeClass outside placement_runtime_classes:
    a clear refusal, not a request outside the access table."""
    other = Placement(runtime_class="kata-gpu")
    with pytest.raises(
        EnvError, match=r"'kata-gpu' is not in backends\.kubernetes\.placement_runtime_classes"
    ):
        await cluster.sandbox().run(request(EnvironmentSpec(), other))
    assert cluster.posted() == []


async def test_a_runtime_class_is_refused_with_gvisor_isolation(cluster: Cluster) -> None:
    with pytest.raises(EnvError, match="refused with gvisor isolation") as info:
        await cluster.sandbox().run(request(EnvironmentSpec(isolation=[GvisorIsolation()]), GPU))
    assert info.value.kind == "isolation_violation"
    assert cluster.posted() == []


async def test_a_pod_warmed_without_placement_never_serves_a_placed_job(
    cluster: Cluster, pool: WarmPool[Any]
) -> None:
    sandbox = cluster.sandbox(pool)
    spec = EnvironmentSpec()
    async with cluster.runners() as runners:
        assert await sandbox.warm(spec, compile_sandbox_plan(spec))
        assert await pool.wait_ready(30), pool.stats()
        (member,) = [p["metadata"]["name"] for p in cluster.pods_of("sandbox")]
        output = await sandbox.run(request(spec, GPU))
        assert output.exit_reason == ExitReason.complete(), output
        assert pool.stats().hits == 0
        assert cluster.api.get("pods", NS, member) is not None  # still waiting, unclaimed
        await pool.aclose()
    # the job's pod was started cold, placed; the member was never placed
    (cold,) = [p for name, p in runners.seen.items() if name != member]
    assert LABEL_POOL not in cold["metadata"]["labels"]
    assert cold["spec"]["runtimeClassName"] == "nvidia" and cold["spec"]["nodeSelector"] == MERGED_SELECTOR
    assert "runtimeClassName" not in runners.seen[member]["spec"]
    assert cluster.api.get("pods", NS, member) is None
    assert [o for o in cluster.api.objects("pods", NS) if LABEL_OWNER in o["metadata"]["labels"]] == []


async def test_a_pod_warmed_for_a_placement_serves_only_that_placement(
    cluster: Cluster, pool: WarmPool[Any]
) -> None:
    sandbox = cluster.sandbox(pool)
    spec = EnvironmentSpec()
    async with cluster.runners() as runners:
        assert await sandbox.warm(spec, compile_sandbox_plan(spec), GPU)
        assert await pool.wait_ready(30), pool.stats()
        (member,) = [p for p in cluster.pods_of("sandbox")]
        assert member["spec"]["nodeSelector"] == MERGED_SELECTOR
        assert member["spec"]["runtimeClassName"] == "nvidia"
        unplaced = await sandbox.run(request(spec, None))
        assert unplaced.exit_reason == ExitReason.complete(), unplaced
        assert pool.stats().hits == 0
        placed = await sandbox.run(request(spec, GPU))
        assert placed.exit_reason == ExitReason.complete(), placed
        assert pool.stats().hits == 1
        await pool.settle()
        await pool.aclose()
    unplaced_pods = [p for p in runners.seen.values() if "runtimeClassName" not in p["spec"]]
    assert len(unplaced_pods) == 1
    assert unplaced_pods[0]["spec"]["nodeSelector"] == BACKEND["node_selector"]
