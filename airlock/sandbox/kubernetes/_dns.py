"""The cluster's resolver, as pure functions: the DNS peers a proxy pod's policy opens, and what
``airlock doctor`` concludes from what it found in the cluster.

:func:`dns_egress_rule` is the one NetworkPolicy egress rule that lets a pod resolve names
under the settings (the proxy pod's, and any pod that must resolve as a proxy does).
:func:`dns_findings` compares a :class:`ClusterResolver` (the kube-dns Service, a
``node-local-dns`` DaemonSet, OpenShift's ``openshift-dns`` namespace) with the settings and
names the peers they must add.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._declaration import DoctorCheck
from ._settings import DnsPeers, DnsSelector

__all__ = [
    "NAMESPACE_LABEL",
    "NODE_LOCAL_DEFAULT",
    "OPENSHIFT_DNS",
    "ClusterResolver",
    "dns_egress_rule",
    "dns_findings",
    "node_local_addresses",
]

#: The label Kubernetes sets on every namespace: its name.
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
#: NodeLocal DNSCache's usual link-local address (``-localip``), when its DaemonSet names none.
NODE_LOCAL_DEFAULT = "169.254.20.10"
#: OpenShift's DNS pods (the DNS operator's DaemonSet), listening on 5353.
OPENSHIFT_DNS = DnsSelector(
    namespace="openshift-dns", pod_labels={"dns.operator.openshift.io/daemonset-dns": "default"}
)
OPENSHIFT_DNS_PORT = 5353


def dns_egress_rule(dns: DnsPeers) -> dict[str, Any]:
    """The NetworkPolicy egress rule to the cluster's resolvers: every selector and address
    of ``dns``, on each of its ports over UDP and TCP."""
    peers: list[dict[str, Any]] = [
        {
            "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: s.namespace}},
            "podSelector": {"matchLabels": dict(s.pod_labels)},
        }
        for s in dns.selectors
    ]
    peers += [{"ipBlock": {"cidr": block}} for block in dns.ip_blocks]
    ports = [{"protocol": proto, "port": port} for port in dns.ports for proto in ("UDP", "TCP")]
    return {"to": peers, "ports": ports}


@dataclass(frozen=True)
class ClusterResolver:
    """What doctor found of the cluster's resolver (None / empty: absent or unreadable)."""

    #: The kube-dns Service's ClusterIP (in ``kube-system``).
    kube_dns_ip: str | None = None
    #: The kube-dns Service's pod selector.
    kube_dns_selector: Mapping[str, str] = field(default_factory=dict)
    #: The addresses a ``node-local-dns`` DaemonSet listens on (empty: no such DaemonSet).
    node_local: tuple[str, ...] = ()
    #: Whether the ``openshift-dns`` namespace exists.
    openshift: bool = False
    #: What could not be read (e.g. ``"services in kube-system (403 Forbidden)"``).
    unreadable: tuple[str, ...] = ()


def node_local_addresses(daemonset: Mapping[str, Any], kube_dns_ip: str | None) -> tuple[str, ...]:
    """The addresses a ``node-local-dns`` DaemonSet binds: its ``-localip`` list, else the
    usual link-local address and the kube-dns ClusterIP it intercepts."""
    for container in (daemonset.get("spec") or {}).get("template", {}).get("spec", {}).get(
        "containers"
    ) or []:
        args = [str(a) for a in (container.get("args") or []) + (container.get("command") or [])]
        found = _localip(args)
        if found:
            return found
    return tuple(a for a in (NODE_LOCAL_DEFAULT, kube_dns_ip) if a)


def _localip(args: Sequence[str]) -> tuple[str, ...]:
    for i, arg in enumerate(args):
        value = None
        if arg.lstrip("-") == "localip" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.lstrip("-").startswith("localip="):
            value = arg.split("=", 1)[1]
        if value:
            return tuple(_addresses(value.split(",")))
    return ()


def _addresses(texts: Sequence[str]) -> list[str]:
    out = []
    for text in texts:
        try:
            out.append(str(ipaddress.ip_address(text.strip())))
        except ValueError:
            continue
    return out


def _covered(address: str, dns: DnsPeers) -> bool:
    ip = ipaddress.ip_address(address)
    return any(ip in ipaddress.ip_network(block) for block in dns.ip_blocks)


def _selects(dns: DnsPeers, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether a selector of ``dns`` matches pods of ``namespace`` carrying ``labels``."""
    return any(s.namespace == namespace and s.pod_labels.items() <= labels.items() for s in dns.selectors)


def _needed(resolver: ClusterResolver, dns: DnsPeers) -> tuple[str, list[str]]:
    """The resolver's description, and each peer or port the settings lack for it."""
    missing: list[str] = []
    if resolver.openshift:
        labels = OPENSHIFT_DNS.pod_labels
        if not _selects(dns, OPENSHIFT_DNS.namespace, labels):
            missing.append(f"selector {{namespace: {OPENSHIFT_DNS.namespace}, pod_labels: {dict(labels)}}}")
        if OPENSHIFT_DNS_PORT not in dns.ports:
            missing.append(f"port {OPENSHIFT_DNS_PORT}")
        return "OpenShift DNS (openshift-dns pods on 5353)", missing
    if resolver.node_local:
        missing += [f"ip_block {a}" for a in resolver.node_local if not _covered(a, dns)]
        listed = ", ".join(resolver.node_local)
        return f"NodeLocal DNSCache on every node ({listed})", missing
    labels = dict(resolver.kube_dns_selector)
    if labels and not _selects(dns, "kube-system", labels):
        missing.append(f"selector {{namespace: kube-system, pod_labels: {labels}}}")
    return f"kube-dns Service {resolver.kube_dns_ip} (pods {labels or 'unknown'})", missing


def dns_findings(resolver: ClusterResolver, dns: DnsPeers) -> DoctorCheck:
    """Whether the settings' DNS peers reach the resolver doctor found; which to add if not.

    An error when a peer is missing (every agent with a name rule would fail to resolve); a
    warning when the resolver could not be told.
    """
    name = "kubernetes dns"
    if resolver.kube_dns_ip is None and not resolver.openshift and not resolver.node_local:
        why = "; ".join(resolver.unreadable) or "no kube-dns Service in kube-system, no openshift-dns"
        return DoctorCheck(
            name,
            "warning",
            f"cannot tell the cluster's resolver ({why})",
            "check that backends.kubernetes.dns names it (selectors, ip_blocks, ports)",
        )
    what, missing = _needed(resolver, dns)
    if missing:
        return DoctorCheck(
            name,
            "error",
            f"the resolver is {what}; proxy pods cannot reach it: backends.kubernetes.dns lacks "
            f"{', '.join(missing)}",
            "add them to backends.kubernetes.dns (chart: sandbox.dns); until then every agent "
            "with a name rule fails to resolve",
        )
    return DoctorCheck(name, "ok", f"the resolver is {what}; backends.kubernetes.dns reaches it")
