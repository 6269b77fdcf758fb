"""DNS peers beyond kube-dns pods: NodeLocal DNSCache addresses and OpenShift's 5353, in the
settings, on the proxy pod's policy (strictly valid), and what doctor concludes from the
cluster's resolver: pure findings, then the check against the stand-in API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from pydantic import ValidationError

from airlock.sandbox import DoctorCheck, backend
from airlock.sandbox.kubernetes import (
    ClusterResolver,
    DnsPeers,
    DnsSelector,
    KubernetesSettings,
    dns_egress_rule,
    dns_findings,
)
from airlock.sandbox.kubernetes._dns import OPENSHIFT_DNS, node_local_addresses
from airlock.sandbox.kubernetes._render import render_network_policies
from airlock.testing import KubeApiStandIn
from layer0 import EnvironmentSpec, NetworkAction, NetworkPolicy, NetworkRule
from tests.unit.sandbox.kubernetes_backend.test_render import shape_for
from tests.unit.sandbox.kubernetes_backend.test_render_schema import validate

KUBE_DNS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
}
NODE_LOCAL = DnsPeers(ip_blocks=("169.254.20.10", "10.96.0.10/32"))


def test_the_default_is_kube_dns_pods_on_53() -> None:
    assert dns_egress_rule(DnsPeers()) == {
        "to": [KUBE_DNS],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }


def test_address_peers_and_other_ports_are_rendered() -> None:
    dns = DnsPeers(selectors=(OPENSHIFT_DNS,), ip_blocks=("169.254.20.10",), ports=(53, 5353))
    rule = dns_egress_rule(dns)
    assert rule["to"][1:] == [{"ipBlock": {"cidr": "169.254.20.10/32"}}]
    assert rule["to"][0]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "openshift-dns"}
    }
    assert {(p["protocol"], p["port"]) for p in rule["ports"]} == {
        (proto, port) for proto in ("UDP", "TCP") for port in (53, 5353)
    }


def test_the_older_one_selector_form_still_loads() -> None:
    dns = KubernetesSettings.model_validate(
        {"dns": {"namespace": "dns", "pod_labels": {"app": "coredns"}}}
    ).dns
    assert dns.selectors == (DnsSelector(namespace="dns", pod_labels={"app": "coredns"}),)
    assert dns.ports == (53,) and dns.ip_blocks == ()


@pytest.mark.parametrize(
    ("dns", "problem"),
    [
        ({"ip_blocks": ["10.96.0.0/12"]}, "is a range"),
        ({"ip_blocks": ["nodelocal"]}, "is not an IP address"),
        ({"ports": []}, "one or more ports"),
        ({"ports": [70000]}, "one or more ports"),
        ({"selectors": [], "ip_blocks": []}, "no DNS peer"),
        ({"selectors": [{"namespace": "Kube_System"}]}, "not a valid namespace"),
        ({"namespace": "a", "selectors": []}, "not both"),
    ],
)
def test_bad_dns_settings_are_refused(dns: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValidationError) as e:
        KubernetesSettings.model_validate({"dns": dns})
    assert problem in str(e.value)


def test_the_proxy_policy_opens_dns_addresses_on_dns_ports_only() -> None:
    spec = EnvironmentSpec(
        network=NetworkPolicy(
            default=NetworkAction.DENY,
            rules=[NetworkRule(destination="api.github.com", port=443, action=NetworkAction.ALLOW)],
        )
    )
    shape = shape_for(spec, KubernetesSettings(dns=NODE_LOCAL))
    for policy in render_network_policies(shape):
        validate(policy)
    egress = render_network_policies(shape)[1]["spec"]["egress"]
    dns_rule = egress[0]
    assert {"ipBlock": {"cidr": "169.254.20.10/32"}} in dns_rule["to"]
    assert {p["port"] for p in dns_rule["ports"]} == {53}
    v4 = [p["ipBlock"] for r in egress[1:] for p in r["to"] if p["ipBlock"]["cidr"] == "0.0.0.0/0"]
    assert v4 and all("169.254.0.0/16" in block["except"] for block in v4)  # not beyond DNS


# --- what doctor concludes -----------------------------------------------------------------


def test_node_local_addresses_are_read_from_the_daemonsets_arguments() -> None:
    def daemonset(args: list[str]) -> dict[str, Any]:
        return {"spec": {"template": {"spec": {"containers": [{"name": "node-cache", "args": args}]}}}}

    listed = daemonset(["-localip", "169.254.25.10,10.233.0.3", "-conf", "/etc/Corefile"])
    assert node_local_addresses(listed, "10.233.0.3") == ("169.254.25.10", "10.233.0.3")
    assert node_local_addresses(daemonset(["-localip=169.254.20.10"]), None) == ("169.254.20.10",)
    assert node_local_addresses(daemonset([]), "10.96.0.10") == ("169.254.20.10", "10.96.0.10")


CORE_DNS = ClusterResolver(kube_dns_ip="10.96.0.10", kube_dns_selector={"k8s-app": "kube-dns"})


@pytest.mark.parametrize(
    ("resolver", "dns", "status", "named"),
    [
        (CORE_DNS, DnsPeers(), "ok", []),
        (
            ClusterResolver(kube_dns_ip="10.0.0.10", kube_dns_selector={"k8s-app": "coredns"}),
            DnsPeers(),
            "error",
            ["selector {namespace: kube-system, pod_labels: {'k8s-app': 'coredns'}}"],
        ),
        (
            ClusterResolver(kube_dns_ip="10.96.0.10", node_local=("169.254.20.10", "10.96.0.10")),
            DnsPeers(),
            "error",
            ["ip_block 169.254.20.10", "ip_block 10.96.0.10"],
        ),
        (
            ClusterResolver(kube_dns_ip="10.96.0.10", node_local=("169.254.20.10", "10.96.0.10")),
            NODE_LOCAL,
            "ok",
            [],
        ),
        (
            ClusterResolver(kube_dns_ip="172.30.0.10", openshift=True),
            DnsPeers(),
            "error",
            ["namespace: openshift-dns", "port 5353"],
        ),
        (
            ClusterResolver(kube_dns_ip="172.30.0.10", openshift=True),
            DnsPeers(selectors=(OPENSHIFT_DNS,), ports=(5353,)),
            "ok",
            [],
        ),
        (
            ClusterResolver(unreadable=("service kube-system/kube-dns: 403 Forbidden",)),
            DnsPeers(),
            "warning",
            ["403"],
        ),
    ],
)
def test_doctor_names_the_peers_the_settings_lack(
    resolver: ClusterResolver, dns: DnsPeers, status: str, named: list[str]
) -> None:
    check = dns_findings(resolver, dns)
    assert check.status == status, check.message
    assert all(text in check.message for text in named), check.message


def kube_system(api: KubeApiStandIn, *, node_local: bool) -> None:
    """A kube-system with CoreDNS's Service (and NodeLocal DNSCache's DaemonSet)."""
    api_client = client.ApiClient(api.configuration())
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system"},
        "spec": {
            "clusterIP": "10.96.0.10",
            "selector": {"k8s-app": "kube-dns"},
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53}],
        },
    }
    client.CoreV1Api(api_client).create_namespaced_service("kube-system", service)
    if node_local:
        labels = {"k8s-app": "node-local-dns"}
        container = {"name": "node-cache", "image": "dns/k8s-dns-node-cache:1.23.1"}
        container["args"] = ["-localip", "169.254.20.10,10.96.0.10"]
        daemonset = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "node-local-dns", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"hostNetwork": True, "containers": [container]},
                },
            },
        }
        client.AppsV1Api(api_client).create_namespaced_daemon_set("kube-system", daemonset)
    api_client.close()


async def _dns_check(api: KubeApiStandIn, tmp_path: Path, dns: DnsPeers) -> DoctorCheck:
    settings = KubernetesSettings(
        namespace="sandboxes", kubeconfig=str(api.write_kubeconfig(tmp_path / "kc")), dns=dns
    )
    checks = await backend("kubernetes").doctor(settings)
    (check,) = [c for c in checks if c.name == "kubernetes dns"]
    return check


async def test_doctor_detects_node_local_dns_in_thekube_system(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=("sandboxes", "kube-system")) as api:
        kube_system(api, node_local=True)
        missing = await _dns_check(api, tmp_path, DnsPeers())
        covered = await _dns_check(api, tmp_path, NODE_LOCAL)
    assert missing.status == "error" and "NodeLocal DNSCache" in missing.message
    assert "ip_block 169.254.20.10, ip_block 10.96.0.10" in missing.message
    assert covered.status == "ok", covered.message


async def test_doctor_passes_plain_kube_dns_and_reports_what_it_cannot_read(tmp_path: Path) -> None:
    with KubeApiStandIn(namespaces=("sandboxes", "kube-system")) as api:
        kube_system(api, node_local=False)
        plain = await _dns_check(api, tmp_path, DnsPeers())
        api.deny("get", "services", "kube-system")
        forbidden = await _dns_check(api, tmp_path, DnsPeers())
    assert plain.status == "ok" and "10.96.0.10" in plain.message
    assert forbidden.status == "warning" and "403" in forbidden.message
