"""Names, labels and ports of the objects one Kubernetes sandbox consists of.

Per sandbox ``sb-<16 hex>`` in the configured namespace:

=================  ==========================  =============================================
object             name                        holds
=================  ==========================  =============================================
Pod                ``airlock-<id>``            the runner (role ``sandbox``)
Pod                ``airlock-<id>-proxy``      the egress/credential proxy bundle (role ``proxy``)
Secret             ``airlock-<id>``            the runner token, env_var/file credentials
Secret             ``airlock-<id>-proxy``      the bundle's config, sidecar credentials
NetworkPolicy      ``airlock-<id>``            the sandbox pod's ingress/egress
NetworkPolicy      ``airlock-<id>-proxy``      the proxy pod's ingress/egress
=================  ==========================  =============================================

Every object carries :data:`LABEL_MANAGED` (``airlock``), :data:`LABEL_SANDBOX`,
:data:`LABEL_ROLE` and :data:`LABEL_OWNER` (a warm pool member's also :data:`LABEL_POOL`),
(a job's sandbox also :data:`LABEL_JOB`), and an ownerReference to its controller's
owner :class:`Owner` (a Lease the controller renews), so a cluster's garbage collector
removes them once the owner is gone, and ``airlock gc`` finds them by label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CREDENTIAL_PORT_BASE",
    "DEFAULT_DENY_POLICY",
    "EGRESS_PORT",
    "LABEL_JOB",
    "LABEL_MANAGED",
    "LABEL_OWNER",
    "LABEL_POOL",
    "LABEL_ROLE",
    "LABEL_SANDBOX",
    "LABEL_SESSION",
    "MANAGED_BY",
    "RUNNER_PORT",
    "Owner",
    "Role",
    "object_name",
    "sandbox_labels",
    "sandbox_selector",
]

Role = Literal["sandbox", "proxy"]

#: The runner's gRPC port inside the sandbox pod.
RUNNER_PORT = 50051
#: The egress proxy's port in the proxy pod; credential proxies listen from CREDENTIAL_PORT_BASE up.
EGRESS_PORT = 3128
CREDENTIAL_PORT_BASE = 8081

LABEL_MANAGED = "app.kubernetes.io/managed-by"
MANAGED_BY = "airlock"
LABEL_SANDBOX = "airlock.dev/sandbox"
LABEL_ROLE = "airlock.dev/role"
LABEL_OWNER = "airlock.dev/owner"
#: A warm pool member's shape id (its objects keep it once a job claimed it).
LABEL_POOL = "airlock.dev/pool"
#: The job a sandbox runs for (a resume first makes sure no sandbox of the job is left).
LABEL_JOB = "airlock.dev/job"
#: The long-lived sandbox (session) a box serves instead of a job (its objects keep their
#: owner label and Lease reference, so a dead controller's are swept as any other).
LABEL_SESSION = "airlock.dev/session"
#: The namespace-wide default-deny NetworkPolicy.
DEFAULT_DENY_POLICY = "airlock-default-deny"


@dataclass(frozen=True)
class Owner:
    """The controller-owned object every sandbox object names in its ownerReferences."""

    name: str
    uid: str
    api_version: str = "coordination.k8s.io/v1"
    kind: str = "Lease"

    def reference(self) -> dict[str, Any]:
        """The ``metadata.ownerReferences`` entry."""
        return {"apiVersion": self.api_version, "kind": self.kind, "name": self.name, "uid": self.uid}


def object_name(sandbox_id: str, role: Role = "sandbox") -> str:
    """``airlock-<id>`` (the sandbox's pod, secret and policy) or ``airlock-<id>-proxy``."""
    return f"airlock-{sandbox_id}" if role == "sandbox" else f"airlock-{sandbox_id}-proxy"


def sandbox_selector(sandbox_id: str, role: Role) -> dict[str, str]:
    """The labels that select one sandbox's pod of ``role``."""
    return {LABEL_SANDBOX: sandbox_id, LABEL_ROLE: role}


def sandbox_labels(sandbox_id: str, role: Role, owner: Owner) -> dict[str, str]:
    """Every label an object of the sandbox carries."""
    return {LABEL_MANAGED: MANAGED_BY, **sandbox_selector(sandbox_id, role), LABEL_OWNER: owner.name}
