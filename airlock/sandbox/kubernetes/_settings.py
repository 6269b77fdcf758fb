"""The Kubernetes backend's settings: the ``backends.kubernetes`` section of ``airlock.yaml``."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from airlock.images import check_image_reference

from .._placement import Toleration, check_runtime_class

__all__ = [
    "DnsPeers",
    "DnsSelector",
    "EnforcementSettings",
    "KubernetesSettings",
    "ProxySettings",
    "RuntimeClassNames",
    "Toleration",
]

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RuntimeClassNames(_Settings):
    """The RuntimeClass each isolation kind runs under (``container`` uses the cluster's default)."""

    gvisor: str = "gvisor"
    micro_vm: str = "kata"


class DnsSelector(_Settings):
    """One set of the cluster's DNS pods: their namespace and pod labels."""

    namespace: str = "kube-system"
    pod_labels: dict[str, str] = Field(default_factory=lambda: {"k8s-app": "kube-dns"})

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a valid namespace name (RFC 1123 label)")
        return value


class DnsPeers(_Settings):
    """Where a proxy pod may send DNS queries (only when a name rule needs a lookup).

    ``selectors`` match DNS pods (CoreDNS: ``kube-system`` pods labelled ``k8s-app=kube-dns``;
    OpenShift: ``openshift-dns`` pods labelled ``dns.operator.openshift.io/daemonset-dns:
    default``). ``ip_blocks`` are resolver addresses no selector can match: NodeLocal
    DNSCache listens on the node (``169.254.20.10``, and the kube-dns ClusterIP it
    intercepts), where a NetworkPolicy sees no pod. ``ports`` are opened for UDP and TCP
    (53; OpenShift's DNS pods listen on 5353). The older form ``{namespace, pod_labels}``
    means one selector.
    """

    selectors: tuple[DnsSelector, ...] = (DnsSelector(),)
    #: Single addresses (``169.254.20.10`` or ``169.254.20.10/32``; IPv6 as ``/128``).
    ip_blocks: tuple[str, ...] = ()
    ports: tuple[int, ...] = (53,)

    @model_validator(mode="before")
    @classmethod
    def _one_selector(cls, data: Any) -> Any:
        """``{namespace, pod_labels}`` (the older form) as ``{selectors: [that]}``."""
        if isinstance(data, dict) and ({"namespace", "pod_labels"} & set(data)):
            rest = {k: v for k, v in data.items() if k not in ("namespace", "pod_labels")}
            if "selectors" in rest:
                raise ValueError("give `selectors`, or the older `namespace`/`pod_labels`, not both")
            one = {k: data[k] for k in ("namespace", "pod_labels") if k in data}
            return {**rest, "selectors": [one]}
        return data

    @field_validator("ip_blocks")
    @classmethod
    def _single_addresses(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for text in value:
            try:
                net = ipaddress.ip_network(text.strip(), strict=True)
            except ValueError as e:
                raise ValueError(f"ip_blocks: {text!r} is not an IP address ({e})") from None
            if net.num_addresses != 1:
                raise ValueError(
                    f"ip_blocks: {text!r} is a range; name each resolver address (/32 or /128): "
                    "DNS ports are opened to exactly these addresses"
                )
            out.append(str(net))
        return tuple(dict.fromkeys(out))

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or not all(1 <= p <= 65535 for p in value):
            raise ValueError("ports: one or more ports, each 1-65535 (53; OpenShift: 5353)")
        return tuple(dict.fromkeys(value))

    @model_validator(mode="after")
    def _some_peer(self) -> DnsPeers:
        if not self.selectors and not self.ip_blocks:
            raise ValueError("no DNS peer: give selectors or ip_blocks (no name rule could resolve)")
        return self


class ProxySettings(_Settings):
    """The per-sandbox egress/credential proxy pod."""

    #: Its image (None: the runner image, which ships ``airlock.proxy``); a tag or a digest reference.
    image: str | None = None
    #: Its CPU and memory (requests equal limits).
    cpu: str = "250m"
    memory: str = "256Mi"

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return None if value is None else check_image_reference(value)

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 250m, 0.5, 256Mi, 1Gi)")
        return value


class EnforcementSettings(_Settings):
    """How the controller proves that the cluster enforces the sandboxes' NetworkPolicies
    (:mod:`._enforcement`), and what a sandbox's runner checks before its first turn."""

    #: Seconds between two proofs while the controller runs (a failed one refuses every job
    #: until a later one passes).
    interval_s: float = Field(default=600.0, ge=30)
    #: Seconds the canary and prober pods get to start and finish (image pulls count).
    timeout_s: float = Field(default=120.0, gt=0)
    #: Seconds one connection attempt of the prober (and of a runner's fence) may take; an
    #: attempt that neither connects nor is refused by then counts as blocked.
    connect_timeout_s: float = Field(default=2.0, gt=0, le=30)
    #: The cloud metadata service a sandbox must never reach (``host:port``).
    metadata_address: str = "169.254.169.254:80"
    #: The API server as pods reach it (``host:port``; None: the address the controller's
    #: client uses, when it is an IP, else the in-cluster service's).
    api_server_address: str | None = None
    #: The controller's jobs API as pods would reach it (``host:port``; None: this pod's IP
    #: and :attr:`controller_port` in-cluster; outside a cluster there is none to check).
    controller_address: str | None = None
    #: The port the controller serves its jobs API on (the Helm chart sets its Service port).
    controller_port: int = Field(default=7878, ge=1, le=65535)
    #: The port the canary pod listens on.
    canary_port: int = Field(default=8080, ge=1024, le=65535)
    #: The in-cluster name a proxy-shaped pod must resolve through the DNS peers (None:
    #: ``kubernetes.default.svc.<cluster_domain>``, which every cluster's DNS answers itself).
    resolve_name: str | None = None

    @field_validator("resolve_name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not all(_DNS_LABEL.match(p) for p in value.rstrip(".").split(".")):
            raise ValueError(f"{value!r} is not a DNS name (lower-case RFC 1123 labels)")
        return value

    @field_validator("metadata_address", "api_server_address", "controller_address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None:
            host, sep, port = value.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{value!r} is not host:port (an IPv6 host in brackets: [fd00::1]:80)")
        return value


class KubernetesSettings(_Settings):
    """How airlock reaches a cluster and what its sandbox pods run with."""

    #: Where sandbox pods, their proxies, secrets and policies live.
    namespace: str = "airlock-sandboxes"
    #: A kubeconfig file (None: ``$KUBECONFIG`` or ``~/.kube/config``); ignored in-cluster.
    kubeconfig: str | None = None
    #: The kubeconfig context (None: its current context).
    context: str | None = None
    #: Use the pod's service account (None: when running inside a cluster).
    in_cluster: bool | None = None
    #: How the controller reaches a runner: by pod IP (inside the cluster), through the API
    #: server's port-forward (outside it), or ``auto`` (pod IP in-cluster, else port-forward).
    connect: Literal["auto", "pod_ip", "port_forward"] = "auto"
    #: The runner image (None: ``airlock-runner:<version>``): ``REGISTRY/airlock-runner:TAG`` or, pinned,
    #: ``REGISTRY/airlock-runner@sha256:...`` (what ``airlock images push`` prints). A name with no
    #: registry is only for images preloaded on every node, with ``image_pull_policy: Never``.
    image: str | None = None
    #: ``Never``: the image is preloaded on the nodes (kind load, k3s ctr import); doctor then
    #: accepts a name with no registry.
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    #: Secrets (in :attr:`namespace`) the kubelet uses to pull the image.
    image_pull_secrets: tuple[str, ...] = ()
    #: A namespace to copy :attr:`image_pull_secrets` from at start (the Helm release's, whose
    #: sandbox namespace starts empty); None: they must exist in :attr:`namespace` already.
    pull_secrets_from: str | None = None
    runtime_classes: RuntimeClassNames = Field(default_factory=RuntimeClassNames)
    #: Labels of the controller's pods: the only peers allowed into a runner's port.
    controller_pod_labels: dict[str, str] = Field(
        default_factory=lambda: {
            "app.kubernetes.io/name": "airlock",
            "app.kubernetes.io/component": "controller",
        }
    )
    #: The controller's namespace (None: its own in-cluster, else :attr:`namespace`).
    controller_namespace: str | None = None
    dns: DnsPeers = Field(default_factory=DnsPeers)
    #: The cluster's DNS domain: in-cluster Service rules allow ``NAME.NS.svc.<cluster_domain>``.
    cluster_domain: str = "cluster.local"
    node_selector: dict[str, str] = Field(default_factory=dict)
    #: Run the pods with no RuntimeClass (isolation ``container``: runc) in a user namespace
    #: (``hostUsers: false``): uid 0 inside is an unprivileged uid on the node. Needs Kubernetes
    #: 1.30+ with user namespaces on (the default from 1.33) and a runtime that supports them;
    #: a node that cannot refuses the pod (its events say so). gVisor and Kata pods have their own.
    user_namespaces: bool = False
    #: Tolerations of sandbox and proxy pods (e.g. a tainted gVisor node pool).
    tolerations: tuple[Toleration, ...] = ()
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    #: Where ``/workspace`` lives: ``Memory`` (a tmpfs, as on Docker; counts against the
    #: memory limit) or ``Disk`` (node storage, limited as ``ephemeral-storage``).
    workspace_medium: Literal["Memory", "Disk"] = "Memory"
    #: Seconds from pod creation to the runner SERVING (image pulls count).
    start_timeout: float = Field(default=120.0, gt=0)
    #: Where a service of the controller's host (the managed local model) is reachable from
    #: the proxy pods (None: the controller pod's IP in-cluster; outside a cluster there is none).
    host_address: str | None = None
    #: ``verify``: no job runs until the controller has proven, in this namespace, that the
    #: cluster enforces NetworkPolicy (:mod:`._enforcement`); ``assume_enforced``: trust the
    #: CNI without proof (logged as a warning at every start, shown by ``airlock doctor``).
    network_policy: Literal["verify", "assume_enforced"] = "verify"
    enforcement: EnforcementSettings = Field(default_factory=EnforcementSettings)
    #: Seconds an owner Lease lives without renewal before ``airlock gc`` treats its owner as gone.
    lease_seconds: int = Field(default=60, ge=15)
    #: The controller's stable identity: its owner Lease is named after it, so a restarted
    #: controller retires its predecessor's Lease and sandboxes at once (None: this host's
    #: name; the Helm chart sets the release's fullname). Two live controllers must never
    #: share one. One-shot commands (``airlock run``) hold a Lease of their own process.
    owner_identity: str | None = Field(default=None, min_length=1, max_length=253)
    #: RuntimeClasses agents name in their ``placement.runtime_class``, read by name before a
    #: pod names one (the access table's and the chart Role's ``resourceNames``). The
    #: configuration adds every kubernetes agent's; list here any other a caller may ask for.
    placement_runtime_classes: tuple[str, ...] = ()

    @field_validator("cluster_domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        labels = value.rstrip(".").split(".")
        if not all(_DNS_LABEL.match(label) for label in labels):
            raise ValueError(f"{value!r} is not a DNS domain (lower-case RFC 1123 labels)")
        return value.rstrip(".")

    @field_validator("image")
    @classmethod
    def _image(cls, value: str | None) -> str | None:
        return None if value is None else check_image_reference(value)

    @field_validator("namespace", "controller_namespace", "pull_secrets_from")
    @classmethod
    def _dns_label(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a valid namespace name (RFC 1123 label)")
        return value

    @field_validator("placement_runtime_classes")
    @classmethod
    def _runtime_classes(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(check_runtime_class(name) for name in value))
