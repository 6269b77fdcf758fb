"""In-cluster destinations: a Kubernetes Service by name, and the pods behind it.

A network rule may name a Service instead of a domain or CIDR::

    network:
      allow:
        - {service: search, namespace: tools, port: 8080, pods: {app: search}}

The Kubernetes backend renders it as a ``namespaceSelector``/``podSelector`` peer on the
proxy pod's NetworkPolicy (never an ipBlock: Cilium matches no ipBlock against pod IPs, and
pod CIDRs are unknown or stale on many clusters). ``pods`` are the labels of the Service's
pods (the policy's podSelector; without it, every pod of the namespace on that port).
``target_port`` is the pods' port when it differs from the Service's ``port``.

The egress proxy allows it by its in-cluster name only: ``NAME.NS.svc.<cluster domain>``
and the short forms ``NAME.NS.svc``, ``NAME.NS`` and, in the sandbox's own namespace,
``NAME``. It resolves the full name (never through the resolver's search list), and the
private addresses that name resolves to are granted for that name and port only.

In an ``EnvironmentSpec`` (a wire model whose rule destination is a string) the rule is
carried as the destination text :meth:`ClusterService.destination` writes, e.g.
``k8s-service:tools/search?pod.app=search&target_port=8080``.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Self
from urllib.parse import parse_qsl, urlencode

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .decision import IPNetwork, net_within

__all__ = ["CLUSTER_RANGES", "DEFAULT_CLUSTER_DOMAIN", "SERVICE_PREFIX", "ClusterService"]

#: The destination text prefix of a Service rule.
SERVICE_PREFIX = "k8s-service:"
#: The cluster domain when the backend names none.
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
_LABEL_PREFIX = "pod."

#: Special ranges a Service name may resolve into (cluster IPs and pod IPs live there):
#: private, shared (CGNAT) and IPv6 unique-local. Loopback, link-local (the metadata
#: address), multicast and the rest stay refused even for a Service name.
CLUSTER_RANGES: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)

_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")
_LABEL_PREFIX_PART = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)$")


class ClusterService(BaseModel):
    """A Service (by name and namespace) and the labels of its pods."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The Service's name (an RFC 1035 label).
    name: str
    #: Its namespace (an RFC 1123 label).
    namespace: str
    #: Labels of the Service's pods: the NetworkPolicy's podSelector ({}: every pod of the namespace).
    pods: dict[str, str] = Field(default_factory=dict)
    #: The pods' port when it differs from the Service's port (None: the same).
    target_port: int | None = Field(default=None, ge=1, le=65535)

    @field_validator("name")
    @classmethod
    def _service_name(cls, value: str) -> str:
        if not _DNS_1035.match(value):
            raise ValueError(f"service {value!r} is not a Service name (lower-case RFC 1035 label)")
        return value

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if not _DNS_1123.match(value):
            raise ValueError(f"namespace {value!r} is not a namespace name (RFC 1123 label)")
        return value

    @field_validator("pods")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            problem = label_problem(key, text)
            if problem is not None:
                raise ValueError(problem)
        return dict(sorted(value.items()))

    def destination(self) -> str:
        """The rule's destination text (what an ``EnvironmentSpec`` carries)."""
        query = [(f"{_LABEL_PREFIX}{k}", v) for k, v in sorted(self.pods.items())]
        if self.target_port is not None:
            query.append(("target_port", str(self.target_port)))
        tail = f"?{urlencode(query)}" if query else ""
        return f"{SERVICE_PREFIX}{self.namespace}/{self.name}{tail}"

    @classmethod
    def parse(cls, destination: str) -> Self:
        """The Service a destination text names.

        Raises:
            ValueError: the text is not a valid Service destination.
        """
        if not destination.startswith(SERVICE_PREFIX):
            raise ValueError(f"{destination!r} is not a Service destination")
        path, _, query = destination[len(SERVICE_PREFIX) :].partition("?")
        namespace, sep, name = path.partition("/")
        if not sep:
            raise ValueError(f"{destination!r}: a Service destination is {SERVICE_PREFIX}NAMESPACE/NAME")
        pods: dict[str, str] = {}
        target: int | None = None
        for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
            if key.startswith(_LABEL_PREFIX):
                pods[key[len(_LABEL_PREFIX) :]] = value
            elif key == "target_port" and value.isdigit():
                target = int(value)
            else:
                raise ValueError(f"{destination!r}: unknown part {key!r}")
        return cls(name=name, namespace=namespace, pods=pods, target_port=target)

    def fqdn(self, cluster_domain: str) -> str:
        """The Service's full name: ``NAME.NS.svc.<cluster domain>``."""
        return f"{self.name}.{self.namespace}.svc.{cluster_domain}"

    def names(self, cluster_domain: str, sandbox_namespace: str | None) -> frozenset[str]:
        """Every name the sandbox may use for it (the full one and its short forms)."""
        base = f"{self.name}.{self.namespace}"
        forms = {base, f"{base}.svc", self.fqdn(cluster_domain)}
        if sandbox_namespace == self.namespace:
            forms.add(self.name)
        return frozenset(forms)

    def display(self) -> str:
        """A short human form: ``service search.tools (pods app=search)``."""
        pods = ", ".join(f"{k}={v}" for k, v in self.pods.items()) or "any pod of the namespace"
        target = f", pod port {self.target_port}" if self.target_port is not None else ""
        return f"service {self.name}.{self.namespace} ({pods}{target})"


def grants_cluster_range(special: IPNetwork) -> bool:
    """Whether a Service name may resolve into special range ``special`` (private, CGNAT, ULA)."""
    return any(net_within(special, allowed) for allowed in CLUSTER_RANGES)


def label_problem(key: str, value: str) -> str | None:
    """What is wrong with one ``key: value`` pod label (None: valid)."""
    prefix, sep, name = key.rpartition("/")
    if (sep and not _LABEL_PREFIX_PART.match(prefix)) or not _LABEL_NAME.match(name):
        return f"pod label key {key!r} is not a valid label key ([prefix/]name)"
    if not _LABEL_VALUE.match(value):
        return f"pod label {key}={value!r}: the value is not a valid label value (63 characters at most)"
    return None
