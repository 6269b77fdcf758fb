"""The Kubernetes backend's settings: the ``backends.kubernetes`` section of ``airlock.yaml``."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

__all__ = ["DnsSelector", "KubernetesSettings", "ProxySettings", "RuntimeClassNames", "Toleration"]

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RuntimeClassNames(_Settings):
    """The RuntimeClass each isolation kind runs under (``container`` uses the cluster's default)."""

    gvisor: str = "gvisor"
    micro_vm: str = "kata"


class DnsSelector(_Settings):
    """Where the cluster's DNS pods are (the proxy pod may reach them only when a name rule needs it)."""

    namespace: str = "kube-system"
    pod_labels: dict[str, str] = Field(default_factory=lambda: {"k8s-app": "kube-dns"})


class Toleration(_Settings):
    """A pod toleration (``spec.tolerations[]``), e.g. for a tainted gVisor or Kata node pool."""

    key: str | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    #: Also spelled ``tolerationSeconds``, as in a pod spec (the Helm chart passes them verbatim).
    toleration_seconds: int | None = Field(
        default=None, ge=0, validation_alias=AliasChoices("toleration_seconds", "tolerationSeconds")
    )

    def manifest(self) -> dict[str, object]:
        """The toleration as the API spells it (unset fields omitted)."""
        fields = {
            "key": self.key,
            "operator": self.operator,
            "value": self.value,
            "effect": self.effect,
            "tolerationSeconds": self.toleration_seconds,
        }
        return {k: v for k, v in fields.items() if v is not None}


class ProxySettings(_Settings):
    """The per-sandbox egress/credential proxy pod."""

    #: Its image (None: the runner image, which ships ``airlock.proxy``).
    image: str | None = None
    #: Its CPU and memory (requests equal limits).
    cpu: str = "250m"
    memory: str = "256Mi"

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        if not _QUANTITY.match(value):
            raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 250m, 0.5, 256Mi, 1Gi)")
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
    #: The runner image (None: ``airlock-runner:<version>``, pushed to a registry the nodes pull from).
    image: str | None = None
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = "IfNotPresent"
    #: Secrets (in :attr:`namespace`) the kubelet uses to pull the image.
    image_pull_secrets: tuple[str, ...] = ()
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
    dns: DnsSelector = Field(default_factory=DnsSelector)
    #: The cluster's DNS domain: in-cluster Service rules allow ``NAME.NS.svc.<cluster_domain>``.
    cluster_domain: str = "cluster.local"
    node_selector: dict[str, str] = Field(default_factory=dict)
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
    #: Seconds an owner Lease lives without renewal before ``airlock gc`` treats its owner as gone.
    lease_seconds: int = Field(default=60, ge=15)

    @field_validator("cluster_domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        labels = value.rstrip(".").split(".")
        if not all(_DNS_LABEL.match(label) for label in labels):
            raise ValueError(f"{value!r} is not a DNS domain (lower-case RFC 1123 labels)")
        return value.rstrip(".")

    @field_validator("namespace", "controller_namespace")
    @classmethod
    def _dns_label(cls, value: str | None) -> str | None:
        if value is not None and not _DNS_LABEL.match(value):
            raise ValueError(f"{value!r} is not a valid namespace name (RFC 1123 label)")
        return value
