"""The pods and policies of the enforcement proof (:mod:`._enforcement`), as pure functions.

One proof creates, in the sandbox namespace and owned by the controller's Lease:

* a **canary** pod listening on a TCP port, whose policy admits only the control pod;
* a **control** pod whose policy lets it reach the canary: it must connect, which shows the
  canary listens and the pod network carries what a policy allows (without it, a canary that
  never listened would look like enforcement);
* a **prober** pod shaped like a deny-all sandbox: the sandbox's labels (``airlock.dev/role:
  sandbox``) and the very NetworkPolicy a deny-all sandbox gets (:func:`render_network_policies`
  of an empty plan), under the namespace's default deny. It tries the canary, the cloud
  metadata address, the API server and the controller, and must reach none of them;
* a **resolver** pod shaped like a proxy that resolves names: the cluster's resolver
  (``dnsPolicy: ClusterFirst``) and only the DNS egress rule a proxy pod gets
  (:func:`dns_egress_rule` of ``backends.kubernetes.dns``). It must resolve an in-cluster name
  (``kubernetes.default.svc.<cluster_domain>``): with NodeLocal DNSCache or OpenShift's DNS
  and the wrong DNS peers, every agent with a name rule would fail to resolve.

The probes are stdlib Python run by the runner image's interpreter (no airlock code, so an
image of another version proves the same thing). Each attempt prints one ``reach {json}`` line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from airlock.policy import SandboxPlan

from ._dns import dns_egress_rule
from ._names import (
    LABEL_MANAGED,
    LABEL_OWNER,
    LABEL_ROLE,
    LABEL_SANDBOX,
    MANAGED_BY,
    Owner,
    object_name,
    sandbox_labels,
)
from ._render import (
    PYTHON,
    SandboxShape,
    hardened_container_security,
    hardened_pod_spec,
    no_dns,
    render_network_policies,
)

__all__ = [
    "REACH_PREFIX",
    "ProofShape",
    "ProofTarget",
    "proof_name",
    "render_canary",
    "render_proof_policies",
    "render_reacher",
    "render_resolver",
]

#: The prefix of each line a reaching pod prints (the rest is one JSON object).
REACH_PREFIX = "reach "
ProofRole = Literal["canary", "control", "resolver"]

#: Tries each ``name=host:port`` of argv (after the timeout) at once; prints one line each.
_REACH = """\
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
timeout = float(sys.argv[1])
def attempt(arg):
    name, address = arg.split("=", 1)
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return name, address, "connected", ""
    except TimeoutError:
        return name, address, "timeout", ""
    except ConnectionRefusedError:
        return name, address, "refused", ""
    except OSError as e:
        return name, address, "error", f"{type(e).__name__}: {e}"
targets = sys.argv[2:]
with ThreadPoolExecutor(max(1, len(targets))) as pool:
    for name, address, outcome, detail in pool.map(attempt, targets):
        line = {"target": name, "address": address, "outcome": outcome, "detail": detail}
        print("reach " + json.dumps(line), flush=True)
"""

#: Resolves argv[1] with the pod's resolver; prints one line.
_RESOLVE = """\
import json, socket, sys
name = sys.argv[1]
try:
    found = sorted({info[4][0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)})
    outcome, detail = "resolved", ", ".join(found)
except OSError as e:
    outcome, detail = "unresolved", f"{type(e).__name__}: {e}"
line = {"target": "cluster dns", "address": name, "outcome": outcome, "detail": detail}
print("reach " + json.dumps(line), flush=True)
"""

#: Accepts connections on argv[1] (every address family it can) and closes each at once.
_CANARY = """\
import socket, sys
port = int(sys.argv[1])
if socket.has_dualstack_ipv6():
    server = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
else:
    server = socket.create_server(("0.0.0.0", port))
print("canary listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.close()
"""


@dataclass(frozen=True)
class ProofTarget:
    """One destination the prober must not reach: its check name and ``host:port``."""

    name: str
    address: str

    def arg(self) -> str:
        """The probe's argument for it."""
        return f"{self.name}={self.address}"


@dataclass(frozen=True)
class ProofShape:
    """Everything the proof's objects depend on (a sandbox id, like a sandbox's)."""

    sandbox: SandboxShape
    canary_port: int
    connect_timeout_s: float

    @property
    def sandbox_id(self) -> str:
        """The proof's sandbox id (the prober's)."""
        return self.sandbox.sandbox_id

    @property
    def owner(self) -> Owner:
        """The owner Lease its objects name."""
        return self.sandbox.owner


def proof_name(shape: ProofShape, role: ProofRole | None = None) -> str:
    """The prober's name (a sandbox pod's), or ``airlock-<id>-canary`` / ``-control``."""
    base = object_name(shape.sandbox_id)
    return base if role is None else f"{base}-{role}"


def _labels(shape: ProofShape, role: ProofRole) -> dict[str, str]:
    return {
        LABEL_MANAGED: MANAGED_BY,
        LABEL_SANDBOX: shape.sandbox_id,
        LABEL_ROLE: role,
        LABEL_OWNER: shape.owner.name,
    }


def _selector(shape: ProofShape, role: ProofRole) -> dict[str, Any]:
    return {"matchLabels": {LABEL_SANDBOX: shape.sandbox_id, LABEL_ROLE: role}}


def _pod(
    shape: ProofShape, role: ProofRole | None, command: list[str], *, cluster_dns: bool = False
) -> dict[str, Any]:
    sandbox = shape.sandbox
    metadata: dict[str, Any] = {
        "name": proof_name(shape, role),
        "namespace": sandbox.namespace,
        "labels": _labels(shape, role) if role else sandbox_labels(shape.sandbox_id, "sandbox", shape.owner),
        "ownerReferences": [shape.owner.reference()],
    }
    resources = {"cpu": "100m", "memory": "64Mi"}
    container = {
        "name": role or "prober",
        "image": sandbox.image,
        "imagePullPolicy": sandbox.settings.image_pull_policy,
        "command": command,
        "env": [{"name": "HOME", "value": "/tmp"}, {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
        "securityContext": hardened_container_security(),
    }
    spec = hardened_pod_spec(sandbox, runtime_class=sandbox.runtime_class)
    spec["containers"] = [container]
    if not cluster_dns:
        no_dns(spec)  # every target is an address
    if role == "canary":
        container["ports"] = [{"containerPort": shape.canary_port, "name": "canary", "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def render_canary(shape: ProofShape) -> dict[str, Any]:
    """The canary pod: a listener on :attr:`ProofShape.canary_port`."""
    return _pod(shape, "canary", [PYTHON, "-c", _CANARY, str(shape.canary_port)])


def render_reacher(
    shape: ProofShape, role: Literal["prober", "control"], targets: list[ProofTarget]
) -> dict[str, Any]:
    """The prober (a deny-all sandbox's labels) or the control pod, trying ``targets`` once."""
    command = [PYTHON, "-c", _REACH, str(shape.connect_timeout_s), *(t.arg() for t in targets)]
    return _pod(shape, None if role == "prober" else "control", command)


def render_resolver(shape: ProofShape, name: str) -> dict[str, Any]:
    """The resolver: the cluster's resolver (as a proxy pod that resolves names), resolving ``name``."""
    return _pod(shape, "resolver", [PYTHON, "-c", _RESOLVE, name], cluster_dns=True)


def render_proof_policies(shape: ProofShape) -> list[dict[str, Any]]:
    """The prober's policy (a deny-all sandbox's, rendered by the sandbox renderer itself), the
    canary's (in: the control pod on its port; out: nothing), the control pod's (out: the
    canary on its port; in: nothing) and the resolver's (out: a proxy pod's DNS rule only)."""
    port = [{"protocol": "TCP", "port": shape.canary_port}]

    def policy(
        role: ProofRole, ingress: list[dict[str, Any]], egress: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {
                "name": proof_name(shape, role),
                "namespace": shape.sandbox.namespace,
                "labels": _labels(shape, role),
                "ownerReferences": [shape.owner.reference()],
            },
            "spec": {
                "podSelector": _selector(shape, role),
                "policyTypes": ["Ingress", "Egress"],
                "ingress": ingress,
                "egress": egress,
            },
        }

    assert shape.sandbox.plan == SandboxPlan(), "the prober is a deny-all sandbox"
    return [
        *render_network_policies(shape.sandbox),
        policy("canary", [{"from": [{"podSelector": _selector(shape, "control")}], "ports": port}], []),
        policy("control", [], [{"to": [{"podSelector": _selector(shape, "canary")}], "ports": port}]),
        policy("resolver", [], [dns_egress_rule(shape.sandbox.settings.dns)]),
    ]
