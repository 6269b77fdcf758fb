"""The Kubernetes backend: each turn in a fresh hardened pod, the same policy as on Docker.

The renderers (:mod:`._render`) turn a compiled plan into the pod, its proxy pod, Secrets and
NetworkPolicies as plain objects; :class:`KubernetesBackend` creates them through the official
client, waits for the runner, runs the turn and deletes them all; with a warm pool, sandboxes
without a network or file credential come from pods started ahead of their jobs
(:mod:`._warm`). Settings come from the ``backends.kubernetes`` section of ``airlock.yaml``
(:class:`KubernetesSettings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from airlock.policy import SandboxPlan, SecretResolver
from layer0 import ContainerIsolation

from .._declaration import Backend, Capabilities
from .._limits import SandboxDefaults, resolve_limits
from .._placement import Placement
from .._pool import WarmPool
from ._access import DOCTOR_ACCESS, SANDBOX_ACCESS, Access, AccessTable
from ._addresses import SandboxAddress, sandbox_addresses
from ._backend import KubernetesBackend
from ._dns import ClusterResolver, dns_egress_rule, dns_findings
from ._doctor import doctor_checks
from ._names import CREDENTIAL_PORT_BASE, EGRESS_PORT, RUNNER_PORT, Owner
from ._reaper import KubeReapReport, reap
from ._release_probe import probe_release
from ._render import SandboxShape, render_default_deny, render_network_policies
from ._settings import (
    DnsPeers,
    DnsSelector,
    EnforcementSettings,
    KubernetesSettings,
    ProxySettings,
    RuntimeClassNames,
    Toleration,
)

__all__ = [
    "BACKEND",
    "CREDENTIAL_PORT_BASE",
    "DOCTOR_ACCESS",
    "EGRESS_PORT",
    "RUNNER_PORT",
    "SANDBOX_ACCESS",
    "Access",
    "AccessTable",
    "ClusterResolver",
    "DnsPeers",
    "DnsSelector",
    "EnforcementSettings",
    "KubeReapReport",
    "KubernetesBackend",
    "KubernetesSettings",
    "ProxySettings",
    "RuntimeClassNames",
    "SandboxAddress",
    "Toleration",
    "dns_egress_rule",
    "dns_findings",
    "placed_settings",
    "policy_objects",
    "sandbox_addresses",
]


def _settings(settings: BaseModel | None) -> KubernetesSettings:
    return settings if isinstance(settings, KubernetesSettings) else KubernetesSettings()


def policy_objects(plan: SandboxPlan, settings: BaseModel | None = None) -> list[dict[str, Any]]:
    """The NetworkPolicies a sandbox with ``plan`` gets (for an example sandbox id), after the
    namespace's default-deny policy."""
    chosen = _settings(settings)
    from layer0 import EnvironmentSpec

    shape = SandboxShape(
        sandbox_id="sb-0000000000000000",
        namespace=chosen.namespace,
        owner=Owner(name="airlock-owner-example", uid="00000000-0000-0000-0000-000000000000"),
        settings=chosen,
        image=chosen.image or "airlock-runner",
        plan=plan,
        limits=resolve_limits(EnvironmentSpec(), SandboxDefaults()),
        runtime_class=None,
        active_deadline_s=None,
        controller_namespace=chosen.controller_namespace or chosen.namespace,
    )
    return [render_default_deny(chosen.namespace), *render_network_policies(shape)]


def placed_settings(settings: BaseModel | None, placements: Sequence[Placement]) -> KubernetesSettings:
    """``settings`` (None: the defaults) with the RuntimeClasses ``placements`` name added to
    :attr:`~KubernetesSettings.placement_runtime_classes` (the ones the backend may read)."""
    chosen = _settings(settings)
    named = [p.runtime_class for p in placements if p.runtime_class is not None]
    if not named:
        return chosen
    names = tuple(dict.fromkeys((*chosen.placement_runtime_classes, *named)))
    return chosen.model_copy(update={"placement_runtime_classes": names})


def _create(
    *,
    secrets: SecretResolver | None,
    state_dir: Path | None,
    image: str | None,
    sweep: bool,
    settings: BaseModel | None,
    pool: WarmPool[Any] | None = None,
) -> KubernetesBackend:
    """A Kubernetes sandbox (it has no control directories: ``state_dir`` does not apply);
    ``pool`` keeps warm pods of the shapes it pools (no network, no file credential)."""
    return KubernetesBackend(
        settings=_settings(settings), secrets=secrets, image=image, sweep=sweep, pool=pool
    )


BACKEND = Backend(
    name="kubernetes",
    summary="a fresh hardened pod per turn on a Kubernetes cluster (gVisor/Kata by RuntimeClass)",
    isolations=frozenset({"container", "gvisor", "micro_vm"}),
    default_isolation=(ContainerIsolation(),),
    capabilities=Capabilities(
        network_policy=True,
        resource_limits=True,
        credentials=True,
        model_endpoint="egress_proxy",
        cluster_services=True,
        placement=True,
    ),
    factory=_create,
    doctor=doctor_checks,
    probe=probe_release,
    reap=reap,
    settings=KubernetesSettings,
    policy_objects=policy_objects,
    placed_settings=placed_settings,
)
