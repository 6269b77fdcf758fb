"""The chart labels the sandbox namespace Pod Security ``restricted``: every pod the
Kubernetes backend creates there (sandbox and proxy, for every rendering case) must be
admitted by that profile, and so must the chart's own controller and probe pods.
A violation would fail every job on a real cluster, so it is checked here, offline."""

from __future__ import annotations

from typing import Any

import pytest

from airlock.sandbox.kubernetes._render import needs_proxy, render_pod, render_proxy_pod
from tests.support.helm import objects, render
from tests.support.pod_security import restricted_violations
from tests.unit.sandbox.kubernetes_backend.test_render import CASES, PROXY_IP, case_shape


@pytest.mark.parametrize("case", list(CASES))
def test_every_backend_pod_meets_restricted(case: str) -> None:
    shape = case_shape(case)
    proxied = needs_proxy(shape.plan)
    pods = [render_pod(shape, proxy_ip=PROXY_IP if proxied else None)]
    if proxied:
        pods.append(render_proxy_pod(shape))
    for pod in pods:
        assert restricted_violations(pod) == [], pod["metadata"]["name"]


def test_the_charts_own_pods_meet_restricted() -> None:
    rendered = objects(render())
    pods: list[dict[str, Any]] = [o for o in rendered if o["kind"] == "Pod"]
    pods += [
        {"metadata": o["metadata"], "spec": o["spec"]["template"]["spec"]}
        for o in rendered
        if o["kind"] == "Deployment"
    ]
    assert len(pods) == 2
    for pod in pods:
        assert restricted_violations(pod) == [], pod["metadata"]["name"]


def test_the_check_catches_what_admission_refuses() -> None:
    pod = render_pod(case_shape("deny_all"), proxy_ip=None)
    runner = pod["spec"]["containers"][0]
    runner["securityContext"]["capabilities"] = {"add": ["NET_ADMIN"]}
    runner["securityContext"]["allowPrivilegeEscalation"] = True
    pod["spec"]["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    pod["spec"]["hostNetwork"] = True
    found = "\n".join(restricted_violations(pod))
    for expected in ("do not drop ALL", "adds capabilities ['NET_ADMIN']", "allowPrivilegeEscalation",
                     "type ['hostPath']", "hostNetwork"):  # fmt: skip
        assert expected in found
