"""Proving that the cluster enforces the sandboxes' NetworkPolicies, before any job relies on it.

Rendering a NetworkPolicy proves nothing: a CNI that ignores them (EKS's VPC CNI without its
policy agent, GKE Standard without Dataplane V2, flannel, old kind) leaves every sandbox on
the open pod network. :class:`EnforcementProof` creates the canary, control and prober pods of
:mod:`._enforcement_pods` in the sandbox namespace, reads what each reached, deletes them
(pods first, then their policies) and judges (:func:`~._enforcement_result.judge`). Any
problem on the way (RBAC, a pod that cannot start, the deadline) is an ``unproven`` result
saying so, never an exception and never ``enforced``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from datetime import UTC, datetime
from typing import Any

from airlock.policy import SandboxPlan
from airlock.proxy import host_port_text
from layer0 import EnvironmentSpec

from .._limits import SandboxDefaults, resolve_limits
from ._api import ApiFailure, KubeApi
from ._diagnose import start_failure
from ._enforcement_pods import (
    REACH_PREFIX,
    ProofShape,
    ProofTarget,
    proof_name,
    render_canary,
    render_proof_policies,
    render_reacher,
    render_resolver,
)
from ._enforcement_result import (
    EnforcementCheck,
    EnforcementResult,
    Expectation,
    Outcome,
    ReachingPod,
    judge,
)
from ._names import Owner
from ._removal import delete_object, delete_pods
from ._settings import KubernetesSettings

__all__ = ["EnforcementProof"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
_POLL_S = 0.25
#: The outcomes a line may report, by what was expected (anything else reads ``error``).
_CONNECTS: dict[str, Outcome] = {o: o for o in ("connected", "refused", "timeout", "error")}
_RESOLVES: dict[str, Outcome] = {o: o for o in ("resolved", "unresolved")}
#: Seconds the pods' own deadline lies beyond the proof's (a backstop if the controller dies).
_DEADLINE_MARGIN_S = 60


class _Unproven(Exception):
    """The proof cannot conclude; the message says why."""


class EnforcementProof:
    """One proof in ``settings.namespace`` through ``api`` (pods run ``image``).

    Args:
        api: the cluster.
        settings: the backend's settings (namespace, image pull, enforcement timeouts).
        image: the image the pods run (the runner image: it has a Python).
        controller_namespace: where the controller's pods run (the sandbox policy names it).
    """

    def __init__(
        self, api: KubeApi, settings: KubernetesSettings, image: str, controller_namespace: str
    ) -> None:
        self.api = api
        self.settings = settings
        self.image = image
        self.controller_namespace = controller_namespace

    async def run(self, owner: Owner, targets: list[ProofTarget]) -> EnforcementResult:
        """Prove it: the prober must reach none of ``targets`` nor the canary; the control pod
        must reach the canary. Every object is deleted before this returns."""
        shape = self._shape(owner)
        created: list[tuple[str, str]] = []
        try:
            checks = await self._prove(shape, targets, created)
        except _Unproven as e:
            return EnforcementResult(
                status="unproven",
                namespace=self.settings.namespace,
                checked_at=datetime.now(UTC),
                reason=str(e),
            )
        finally:
            await asyncio.shield(self._delete_all(created))
        return judge(self.settings.namespace, checks, datetime.now(UTC))

    def _shape(self, owner: Owner) -> ProofShape:
        from ._render import SandboxShape

        enforcement = self.settings.enforcement
        sandbox = SandboxShape(
            sandbox_id=f"sb-{secrets.token_hex(8)}",
            namespace=self.settings.namespace,
            owner=owner,
            settings=self.settings,
            image=self.image,
            plan=SandboxPlan(),
            limits=resolve_limits(EnvironmentSpec(), SandboxDefaults()),
            runtime_class=None,
            active_deadline_s=int(enforcement.timeout_s) + _DEADLINE_MARGIN_S,
            controller_namespace=self.controller_namespace,
        )
        return ProofShape(sandbox, enforcement.canary_port, enforcement.connect_timeout_s)

    async def _prove(
        self, shape: ProofShape, targets: list[ProofTarget], created: list[tuple[str, str]]
    ) -> list[EnforcementCheck]:
        deadline = time.monotonic() + self.settings.enforcement.timeout_s
        for policy in render_proof_policies(shape):
            await self._create("networkpolicy", policy, created)
        await self._create("pod", render_canary(shape), created)
        canary = await self._wait(proof_name(shape, "canary"), deadline, running=True)
        canary_at = ProofTarget("canary", host_port_text(str(canary["status"]["podIP"]), shape.canary_port))
        await self._create("pod", render_reacher(shape, "prober", [canary_at, *targets]), created)
        await self._create("pod", render_reacher(shape, "control", [canary_at]), created)
        name = self._resolve_name()
        await self._create("pod", render_resolver(shape, name), created)
        runs: list[tuple[ReachingPod, str, Expectation, list[ProofTarget]]] = [
            ("prober", proof_name(shape), "blocked", [canary_at, *targets]),
            ("control", proof_name(shape, "control"), "reachable", [canary_at]),
            ("resolver", proof_name(shape, "resolver"), "resolves", [ProofTarget("cluster dns", name)]),
        ]
        found: list[EnforcementCheck] = []
        for pod, name, expect, tried in runs:
            await self._wait(name, deadline, running=False)
            lines = await self._reached(name)
            found += [_check(pod, expect, t, lines.get(t.name)) for t in tried]
        return found

    def _resolve_name(self) -> str:
        """The in-cluster name the resolver must resolve."""
        configured = self.settings.enforcement.resolve_name
        return configured or f"kubernetes.default.svc.{self.settings.cluster_domain}"

    async def _create(self, kind: str, body: dict[str, Any], created: list[tuple[str, str]]) -> None:
        fn = (
            self.api.core.create_namespaced_pod
            if kind == "pod"
            else self.api.networking.create_namespaced_network_policy
        )
        name = body["metadata"]["name"]
        try:
            await self.api.call(fn, self.settings.namespace, body)
        except ApiFailure as e:
            raise _Unproven(f"cannot create the proof's {kind} {name}: {e}") from e
        created.append((kind, name))

    async def _wait(self, name: str, deadline: float, *, running: bool) -> dict[str, Any]:
        """The pod once it runs with an IP (``running``) or has ended."""
        while True:
            try:
                pod: dict[str, Any] = await self.api.call(
                    self.api.core.read_namespaced_pod, name, self.settings.namespace
                )
            except ApiFailure as e:
                raise _Unproven(f"cannot read the proof's pod {name}: {e}") from e
            status = pod.get("status") or {}
            phase = status.get("phase")
            if running and phase == "Running" and status.get("podIP"):
                return pod
            if not running and phase in ("Succeeded", "Failed"):
                return pod
            failure = start_failure(pod)
            if failure is not None and not (phase == "Failed" and not running):
                raise _Unproven(f"the proof's pod {name} cannot run: {failure}")
            if time.monotonic() > deadline:
                raise _Unproven(
                    f"the proof's pod {name} was still {phase or 'Pending'} after "
                    f"{self.settings.enforcement.timeout_s:.0f} s (enforcement.timeout_s)"
                )
            await asyncio.sleep(_POLL_S)

    async def _reached(self, name: str) -> dict[str, dict[str, Any]]:
        """What the pod's log says it reached, by target name."""
        try:
            log = await self.api.call(self.api.core.read_namespaced_pod_log, name, self.settings.namespace)
        except ApiFailure as e:
            raise _Unproven(f"cannot read the log of the proof's pod {name}: {e}") from e
        text = str(log.get("text") or "") if isinstance(log, dict) else str(log)
        found: dict[str, dict[str, Any]] = {}
        for line in text.splitlines():
            if not line.startswith(REACH_PREFIX):
                continue
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                entry = json.loads(line[len(REACH_PREFIX) :])
                found[str(entry["target"])] = entry
        return found

    async def _delete_all(self, created: list[tuple[str, str]]) -> None:
        """The pods, and only once they are confirmed gone, their policies (what cannot be
        removed is left for the reaper: the owner Lease names it)."""
        ns, net = self.settings.namespace, self.api.networking
        stuck, problems = await delete_pods(self.api, ns, [n for kind, n in created if kind == "pod"])
        if stuck:
            _log.warning("the enforcement proof's pods are not gone (%s); their policies stay", problems)
            return
        policies = [name for kind, name in created if kind == "networkpolicy"]
        await asyncio.gather(
            *(delete_object(self.api, net.delete_namespaced_network_policy, ns, n) for n in policies)
        )


def _check(
    pod: ReachingPod, expect: Expectation, target: ProofTarget, line: dict[str, Any] | None
) -> EnforcementCheck:
    """The check for one target from the pod's line for it (none: ``not run``)."""
    if line is None:
        outcome: Outcome = "not run"
        detail = "the pod reported nothing for it"
    else:
        valid = _RESOLVES if expect == "resolves" else _CONNECTS
        outcome = valid.get(str(line.get("outcome")), "error")
        detail = str(line.get("detail") or "")
    return EnforcementCheck(
        pod=pod, target=target.name, address=target.address, expect=expect, outcome=outcome, detail=detail
    )
