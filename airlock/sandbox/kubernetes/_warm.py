"""The Kubernetes backend's warm pool members: which sandboxes are pooled, their shape, the member.

A member is a sandbox pod started ahead of its job, its runner SERVING, holding no secret and
no agent: its Secret holds only the runner token. What is pooled (:func:`poolable`):

* sandboxes with **no network** (no egress allowed, no sidecar credential: no proxy pod),
* whose credentials are all ``env_var``: they are bound when a job claims the member, sent
  with its Execute (``ExecuteRequest.environment``); the runner sets them before it builds
  the turn, so they are never in the member's Secret or pod spec.

Not pooled (they start cold, as without a pool): a sandbox with a **proxy pod** (its Secret,
bundle configuration and NetworkPolicies are per job), and one with a **file credential**
(a Secret volume's content is fixed once mounted: the kubelet syncs a changed Secret only
lazily, so a value could not be bound at claim time).

The shape (:class:`KubeShape`) is what a pod fixes when it starts: image, RuntimeClass,
resource limits, the backend's settings (cluster, namespace, placement, channel) and the
agent's placement (so a pod placed for one agent never serves an agent placed elsewhere).

Ownership: a member holds a use of its creator's owner Lease from its start until it is
destroyed (claimed or not), so the Lease is renewed while any member exists, and a crashed
controller's members go with its expired Lease (reaper, garbage collector). A member's pod has
no ``activeDeadlineSeconds`` while it waits; a claim lowers it to the pod's age plus the job's
deadline and the margin (a backstop: the controller enforces the job's deadline itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airlock.policy import SandboxPlan

from .._limits import Limits
from .._placement import Placement
from .._pool import shape_id
from ._instance import KubernetesInstance
from ._render import needs_proxy

__all__ = ["KubeShape", "WarmPod", "poolable"]


def poolable(plan: SandboxPlan) -> bool:
    """Whether a sandbox for ``plan`` can come from the pool: no proxy pod, no file credential."""
    return not needs_proxy(plan) and all(c.kind == "env_var" for c in plan.credentials)


@dataclass(frozen=True)
class KubeShape:
    """Everything a pooled sandbox pod fixes when it starts (a warm pool's key)."""

    image: str
    #: None: the cluster's default runtime.
    runtime_class: str | None
    limits: Limits
    #: The backend's settings as JSON (cluster, namespace, placement, channel, timeouts).
    settings: str
    controller_namespace: str
    #: The agent's placement (its nodes, tolerations, RuntimeClass): a pod warmed for one
    #: placement never serves an agent of another.
    placement: Placement = field(default_factory=Placement)

    @property
    def id(self) -> str:
        """A short stable id (the members' ``airlock.dev/pool`` label)."""
        return shape_id(self)

    @property
    def label(self) -> str:
        """One line for logs and statistics."""
        runtime = self.runtime_class or self.placement.runtime_class or "default runtime"
        return f"{self.image} {runtime} {self.limits.describe()} [{self.id}]"


class WarmPod:
    """A started sandbox pod in the pool (a :class:`~airlock.sandbox.PoolMember`)."""

    def __init__(self, sandbox: KubernetesInstance) -> None:
        self.sandbox = sandbox

    async def healthy(self) -> bool:
        """Whether its runner still answers SERVING."""
        return await self.sandbox.healthy()

    async def destroy(self) -> None:
        """Delete its pod, policy and Secret, then give up its use of the owner Lease (both
        run to their end even if the caller is cancelled meanwhile)."""
        await self.sandbox.teardown()
