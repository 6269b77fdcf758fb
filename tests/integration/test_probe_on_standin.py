"""The isolation probe end to end, where nothing enforces NetworkPolicy: it must say so.

A real controller, served by the probe itself in this process (``run_served_probe``: what
``airlock probe --serve-config`` runs in the chart's test pod), runs the probe agents on the
Kubernetes backend; the stand-in API server's pods run on the local Docker engine
(``DockerPods``), so each job gets a real sandbox pod, a real proxy pod with the sidecar
credential, and the runner reached by pod IP. The probe serves its destinations on the pod
network's gateway, this machine's address on the bridge the test created.

The stand-in does not enforce NetworkPolicies, like a cluster whose CNI ignores them. So the
probe must report the holes (the deny-all sandbox reaches the other sandbox and the
forbidden port), which is what it tells an operator on such a cluster; and the rows the
proxies themselves guarantee must still pass (the proxy refuses the forbidden URL, the
sidecar secret reaches the upstream and is visible nowhere in either sandbox).
"""

from __future__ import annotations

import asyncio
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from airlock.probe.client import ProbeOptions, Row
from airlock.probe.served import run_served_probe
from airlock.testing import DockerPods, KubeApiStandIn
from tests.support.kube import docker_pod_network

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
NAMESPACE = "airlock-sandboxes"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def pods() -> Iterator[tuple[DockerPods, str]]:
    with docker_pod_network() as found:
        yield found


def probe_agent(**extra: Any) -> dict[str, Any]:
    return {
        "provider": {"kind": "command"},
        "tools": ["bash"],
        "tool_options": {"bash": {"timeout_s": 240}},
        "backend": "kubernetes",
        "resources": {"cpu": "500m", "memory": "256Mi"},
        "defaults": {"max_turns": 2, "max_duration": "180s"},
        **extra,
    }


def by_check(rows: list[Row], agent: str) -> dict[str, Row]:
    return {r.check.split(" ", 2)[1] if r.check.startswith(("tcp ", "http ")) else r.check: r
            for r in rows if r.agent in (agent, "any")}  # fmt: skip


def test_the_probe_reports_the_holes_of_a_cluster_that_ignores_network_policy(
    pods: tuple[DockerPods, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime, gateway = pods
    allowed_port, forbidden_port = free_port(), free_port()
    canary = "probe-" + secrets.token_urlsafe(24)
    (tmp_path / "canary").write_text(canary)
    with KubeApiStandIn(pods=runtime, namespaces=(NAMESPACE,)) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        upstream = f"http://{gateway}:{allowed_port}"
        sidecar = {"upstream": upstream, "header": "x-airlock-probe"}
        config = {
            "version": 1,
            "secrets": {"probe-canary": {"file": str(tmp_path / "canary")}},
            # Docker enforces no NetworkPolicy, so the controller's own proof would refuse every
            # job (tests/integration/test_enforcement_on_standin.py); this test is about what the
            # helm test probe reports on such a cluster, so it opts out as an operator could.
            # The runner's fence tries the pod's own loopback: nothing leaves the machine.
            "backends": {"kubernetes": {"kubeconfig": str(kubeconfig), "namespace": NAMESPACE,
                                        "connect": "pod_ip", "image_pull_policy": "Never",
                                        "network_policy": "assume_enforced",
                                        "enforcement": {"metadata_address": "127.0.0.1:9"}}},
            "agents": {
                "probe-deny": probe_agent(),
                "probe-allow": probe_agent(
                    network={"allow": [{"destination": f"{gateway}/32", "port": allowed_port}]},
                    credentials=[{"secret": "probe-canary", "inject": {"sidecar": sidecar}}],
                ),
            },
        }  # fmt: skip
        path = tmp_path / "airlock.yaml"
        path.write_text(yaml.safe_dump(config))

        opts = ProbeOptions(
            controller="",  # served by the probe itself, as in the chart's test pod
            token="",
            deny_agent="probe-deny",
            allow_agent="probe-allow",
            allowed_url=f"{upstream}/",
            canary=canary,
            canary_header="x-airlock-probe",
            self_ip=gateway,
            allowed_port=allowed_port,
            forbidden_port=forbidden_port,
            sandbox_namespace=NAMESPACE,
            timeout_s=240,
        )
        rows = asyncio.run(run_served_probe(opts, path))
    table = "\n".join(f"{r.agent:12} {r.check:60} {r.observed:30} {r.mark}" for r in rows)
    print(table)
    deny, allow = by_check(rows, "probe-deny"), by_check(rows, "probe-allow")
    # The holes a non-enforcing CNI leaves, each named.
    assert deny["other"].passed is False or any(
        r.agent == "probe-deny" and "other sandbox's listener" in r.check and r.passed is False for r in rows
    ), table
    assert any(
        r.agent == "probe-deny" and "outside the allow-list" in r.check and not r.passed for r in rows
    ), table
    assert any("outside the allow-list) connected to" in r.check and not r.passed for r in rows), table
    assert any(r.agent == "probe-allow" and "listener" in r.check and not r.passed for r in rows), table
    # What the proxies guarantee on their own still holds.
    assert allow["allowed"].passed, table
    assert allow["forbidden"].passed, table
    assert allow["sidecar secret reaches the upstream"].passed, table
    assert allow["sidecar secret visible in the sandbox"].passed, table
    assert deny["sidecar secret visible in the sandbox"].passed, table
    # The probe's own controller listens on loopback only: unreachable from any pod.
    own = [r for r in rows if "probe's own controller" in r.check]
    assert own and all(r.passed for r in own), table
    assert not api.objects("pods", NAMESPACE), "every sandbox pod was deleted"
