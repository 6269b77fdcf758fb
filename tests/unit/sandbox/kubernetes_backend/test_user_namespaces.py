"""``backends.kubernetes.user_namespaces``: pods with no RuntimeClass (runc) run in a user
namespace (``hostUsers: false``), still valid for the API and Pod Security ``restricted``;
gVisor and Kata pods, and every pod by default, are left as they were."""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from airlock.sandbox.kubernetes import KubernetesSettings
from layer0 import ContainerIsolation, EnvironmentSpec, GvisorIsolation, NetworkPolicy, NetworkRule
from tests.support.pod_security import restricted_violations
from tests.unit.sandbox.kubernetes_backend.test_render import render_all, shape_for

WITH_EGRESS = EnvironmentSpec(
    isolation=[ContainerIsolation()],
    network=NetworkPolicy(
        default="deny", rules=[NetworkRule(destination="example.com", port=443, action="allow")]
    ),
)


def pods(spec: EnvironmentSpec, settings: KubernetesSettings) -> list[dict[str, Any]]:
    return [o for o in render_all(shape_for(spec, settings)) if o["kind"] == "Pod"]


def test_runc_pods_run_in_a_user_namespace_when_asked() -> None:
    found = pods(WITH_EGRESS, KubernetesSettings(user_namespaces=True))
    assert len(found) == 2  # the sandbox and its proxy
    for pod in found:
        assert pod["spec"]["hostUsers"] is False
        assert restricted_violations(pod) == []
        for version in ("1.25", str(kubernetes_validate.latest_version())):
            kubernetes_validate.validate(pod, version, strict=True)


def test_by_default_no_pod_asks_for_one() -> None:
    assert all("hostUsers" not in p["spec"] for p in pods(WITH_EGRESS, KubernetesSettings()))


def test_a_gvisor_sandbox_keeps_its_own_boundary() -> None:
    spec = EnvironmentSpec(isolation=[GvisorIsolation()])
    (sandbox,) = pods(spec, KubernetesSettings(user_namespaces=True))
    assert sandbox["spec"]["runtimeClassName"] == "gvisor" and "hostUsers" not in sandbox["spec"]
