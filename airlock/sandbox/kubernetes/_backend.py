"""KubernetesBackend: each turn in its own hardened pod, with the same policy as on Docker.

Lifecycle of ``run`` (one sandbox ``sb-<16 hex>``; objects named in :mod:`._names`):

0. **Proven enforcement:** no job runs until the controller proved that the cluster enforces
   NetworkPolicy in the namespace (:mod:`._guard`, :mod:`._enforcement`); while that is failed
   or unproven every job is ``isolation_violation`` (``network_policy: assume_enforced``
   opts out, with a warning).
1. **Refuse what cannot be provided, before creating anything:** the isolation asked for
   (``gvisor``/``micro_vm`` need their RuntimeClass in the cluster: ``isolation_violation``
   otherwise, never a downgrade), the agent's placement (its RuntimeClass only with
   ``container`` isolation, and present in the cluster), the limits, the credentials' values.
2. **Claim** a warm pod of the sandbox's shape (its placement included) when a pool keeps
   them (:mod:`._warm`: no network, no file credential); it skips steps 3 and 4, and its
   env_var credentials travel with the job's Execute. Otherwise (and when none is ready)
   the sandbox starts cold:
3. **Owner:** the controller's Lease (:mod:`._owner`) is acquired; every object names it.
4. **Provision:** the sandbox's Secret (runner token, the runner's own TLS certificate and key,
   env_var/file credentials) and its NetworkPolicies; when the plan allows any egress or uses a
   sidecar credential, the proxy pod's Secret (bundle config, sidecar secrets) and the proxy
   pod, followed until its bundle is ready; then the sandbox pod, pointed at the proxy pod's
   IP. Deny-all sandboxes get no proxy and no egress at all. The pod runs and the runner
   answers health SERVING within ``start_timeout`` (from the first create); otherwise
   ``provision_failed`` with the pod's phase, conditions, container states and last events
   (ImagePullBackOff, Unschedulable, OOMKilled, DeadlineExceeded, …). Hopeless states fail at
   once.
5. **Turn:** through :class:`~airlock.runner.RemoteTurn` (pod IP or port-forward:
   :mod:`._channel`), with the same deadline as Docker (``max_duration`` + grace, capped by
   ``turn_timeout``; the pod's ``activeDeadlineSeconds`` is a backstop beyond it). Past the
   deadline the pod is deleted and the output says ``timeout``; an OOM kill is
   ``resource_exceeded``.
6. **Teardown** (shielded; waits for a create still in flight, so a cancel mid-provision
   leaves nothing): pods deleted with a grace period and confirmed gone, then their policies
   and Secrets (:mod:`._removal`), before ``run`` returns; a claimed pod's, after a turn that
   ended, in the background (the pool's ``settle``/close wait for it). What a crash leaves is
   removed by a restarted controller of the same identity at once (:mod:`._owner`), else by
   any controller's sweep (every lease period: :mod:`._upkeep`) once its Lease expired.

Every object of a job's sandbox is labelled with the job, so :meth:`KubernetesBackend.ensure_gone`
can remove a previous sandbox of it before the job resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from airlock.images import runner_image_tag
from airlock.policy import (
    ResolvedCredentials,
    SandboxPlan,
    SecretResolver,
    env_var_values,
    resolve_credentials,
)
from layer0 import EnvError, EnvironmentSpec, Scope, TurnOutput

from .._events import SandboxEventSink
from .._isolation import IsolationKind, requested_isolation
from .._lifecycle import run_turn, start
from .._limits import Limits, SandboxDefaults, resolve_limits
from .._observer import isolation_of, sandbox_observer
from .._placement import Placement
from .._pool import WarmPool
from .._port import SandboxRequest
from .._proof import IsolationProof
from .._redact import redacted_output, redacting_sink
from .._session import EventRelay, LongLivedBox, proxied_box
from .._turn import hard_timeout_s
from ._access import SANDBOX_ACCESS
from ._api import ApiFailure, KubeApi, connect_mode, in_cluster, own_namespace
from ._enforcement_result import isolation_proof
from ._enforcement_setup import make_guard, proof_targets
from ._guard import EnforcementGuard, shared_guard
from ._instance import DEADLINE_MARGIN_S, KubernetesInstance, api_step, provision_error
from ._names import DEFAULT_DENY_POLICY, Owner
from ._owner import OwnerLease, default_identity
from ._pull_secrets import copy_pull_secrets
from ._removal import ensure_job_gone
from ._render import SandboxShape, proxy_urls, render_default_deny, render_pod
from ._settings import KubernetesSettings
from ._upkeep import Upkeep
from ._warm import KubeShape, WarmPod, poolable

__all__ = ["KubernetesBackend"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
#: The owner a member's pod is rendered with when ``warm`` only checks that it can be.
_EXAMPLE_OWNER = Owner(name="airlock-owner-example", uid="00000000-0000-0000-0000-000000000000")


class KubernetesBackend:
    """The Kubernetes backend: each turn in a fresh hardened pod (a :class:`~airlock.sandbox.Sandbox`).

    Args:
        settings: the cluster, namespace, RuntimeClasses, image and channel (``backends.kubernetes``).
        secrets: resolves credential names to values; without one, a spec with credentials is refused.
        image: the runner image (over ``settings.image``; default ``airlock-runner:<version>``).
        sweep: remove what dead controllers left (expired owner Leases) before the first run.
        turn_timeout: hard cap on a turn's wall-clock seconds (None: only max_duration).
        timeout_grace: extra seconds past ``max_duration`` before the pod is deleted.
        defaults: limits for what ``spec.resources`` leaves unset.
        api: a connected :class:`KubeApi` (default: from ``settings``).
        pool: a warm pool (shared by every KubernetesBackend of one controller): a job whose
            sandbox is pooled (:meth:`warm`: no network, no file credential) claims a started
            pod instead of starting one; None or ``size: 0``: every pod starts cold.
        guard: decides whether the namespace's NetworkPolicies are enforced (default: the one
            this controller shares for the cluster and namespace, proving it on the cluster).
        reap_every: seconds between sweeps for dead controllers' leftovers while in use
            (default: ``settings.lease_seconds``); :meth:`aclose` stops them.
    """

    def __init__(
        self,
        *,
        settings: KubernetesSettings | None = None,
        secrets: SecretResolver | None = None,
        image: str | None = None,
        sweep: bool = True,
        turn_timeout: float | None = None,
        timeout_grace: float = 5.0,
        defaults: SandboxDefaults | None = None,
        api: KubeApi | None = None,
        pool: WarmPool[WarmPod] | None = None,
        guard: EnforcementGuard | None = None,
        reap_every: float | None = None,
    ) -> None:
        self.settings = settings or KubernetesSettings()
        self.secrets = secrets
        self.image = image or self.settings.image or runner_image_tag()
        self.turn_timeout = turn_timeout
        self.timeout_grace = timeout_grace
        self.defaults = defaults or SandboxDefaults()
        self.pool = pool
        self._sweep = sweep
        self._api = api
        self._lease: OwnerLease | None = None
        self._reap_every = reap_every or float(self.settings.lease_seconds)
        self._upkeep: Upkeep | None = None
        self._ready = asyncio.Lock()
        self._policy_ready = False
        self._controller_ns: str | None = None
        self._guard = guard
        #: What each runner must not reach (:attr:`SandboxShape.fence`), found once.
        self._fence: tuple[str, ...] | None = None
        #: What the start-up sweep removed (None until it ran).
        self.swept: Any = None

    @property
    def namespace(self) -> str:
        """Where the sandboxes live."""
        return self.settings.namespace

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a fresh pod, removed (with its proxy, policies and
        Secrets) before this returns; a warm pod claimed from the pool is removed in the
        background once its turn has ended (the pool's ``settle`` and close wait for it).

        Raises:
            EnvError: ``isolation_violation`` for a RuntimeClass the cluster lacks;
                ``credential_failed`` for a secret that cannot be resolved;
                ``resource_exceeded`` for bad limits or an OOM kill; ``provision_failed`` for
                an unreachable or refusing API server, or a pod or proxy that never became
                ready; ``turn_error`` for the turn's own failure.
        """
        agent, spec, plan = request.agent.spec, request.environment, request.plan
        api, lease = await self._prepare()
        await self._require_enforcement()
        kind = requested_isolation(spec, "kubernetes").kind
        runtime_class = await self._runtime_class(api, kind)
        await self._check_placement(api, kind, request.placement)
        limits = resolve_limits(spec, self.defaults)
        credentials = await resolve_credentials(plan, self.secrets)
        sink = request.events
        if sink is not None and credentials.values:
            sink = redacting_sink(sink, credentials.secrets)
        deadline = hard_timeout_s(agent, request.input, self.turn_timeout, self.timeout_grace)
        member: WarmPod | None = None
        began = time.monotonic()
        if self.pool is not None and poolable(plan):
            member = await self.pool.claim(self._shape_key(runtime_class, limits, request.placement))
        if member is not None:
            observed = isolation_of(request.environment), "warm", time.monotonic() - began
            sandbox_observer().provisioned("kubernetes", *observed)
            output = await self._run_member(member, request, credentials, sink, deadline)
        else:
            output = await self._run_cold(
                api, lease, request, credentials, sink, deadline, limits, runtime_class
            )
        if credentials.values:
            output = redacted_output(output, credentials.secrets)
        return output

    async def _run_cold(
        self,
        api: KubeApi,
        lease: OwnerLease,
        request: SandboxRequest,
        credentials: ResolvedCredentials,
        sink: SandboxEventSink | None,
        deadline: float | None,
        limits: Limits,
        runtime_class: str | None,
    ) -> TurnOutput:
        """The turn in a pod started for this job alone, removed before this returns."""
        lifetime = (
            math.ceil(self.settings.start_timeout + deadline) + DEADLINE_MARGIN_S
            if deadline is not None
            else None
        )
        sandbox = await self._start_cold(
            api, lease, request, credentials, sink, limits, runtime_class, lifetime
        )

        async def bind() -> None:
            self._bind_cold(sandbox, request, request.state)

        return await run_turn(sandbox, request.input, sink, deadline, request.handle, bind=bind)

    async def _start_cold(
        self,
        api: KubeApi,
        lease: OwnerLease,
        request: SandboxRequest,
        credentials: ResolvedCredentials,
        sink: SandboxEventSink | None,
        limits: Limits,
        runtime_class: str | None,
        lifetime: int | None,
        session: str | None = None,
    ) -> KubernetesInstance:
        """A pod started for one job (or the long-lived sandbox ``session``), ready, living at
        most ``lifetime`` seconds (its ``activeDeadlineSeconds``; None: no bound)."""
        began = time.monotonic()
        owner = await api_step("acquire the owner Lease", lease.acquire)
        try:
            shape = SandboxShape(
                sandbox_id=f"sb-{secrets.token_hex(8)}",
                namespace=self.namespace,
                owner=owner,
                settings=self.settings,
                image=self.image,
                plan=request.plan,
                limits=limits,
                runtime_class=runtime_class,
                active_deadline_s=lifetime,
                controller_namespace=self._controller_namespace(),
                fence=self._fence or (),
                placement=request.placement,
            )
        except BaseException:
            await lease.release()
            raise
        sandbox = KubernetesInstance(
            api,
            shape,
            credentials,
            sink,
            port_forward=self._port_forward(),
            job=request.job if session is None else None,
            lease=lease,
            session=session,
        )
        await start(sandbox, partial(sandbox.provision, self.settings.start_timeout))
        observed = isolation_of(request.environment), "cold", time.monotonic() - began
        sandbox_observer().provisioned("kubernetes", *observed)
        return sandbox

    @staticmethod
    def _bind_cold(
        sandbox: KubernetesInstance, request: SandboxRequest, state: Iterable[tuple[Scope, str, Any]]
    ) -> None:
        """A cold pod given its agent (pointed at its proxy's sidecars) and a job's state."""
        agent = request.agent
        if sandbox.proxy_ip is not None:
            agent = agent.with_sidecar_routes(request.plan, proxy_urls(request.plan, sandbox.proxy_ip))
        sandbox.bind(agent.final(), state)

    async def open(
        self, request: SandboxRequest, *, label: str, ttl: float | None = None
    ) -> LongLivedBox[KubernetesInstance]:
        """A pod kept for the jobs of the long-lived sandbox ``label``, started cold (never a
        warm pod), its objects labelled with it; the pod's ``activeDeadlineSeconds`` comes
        from ``ttl`` (plus the start timeout and margin; None: none), not from a turn's
        deadline. Its proxy's events go to the job running at the time; credential values
        are kept out of every output and event.

        Raises:
            EnvError: as :meth:`run` for a sandbox that cannot be provided.
        """
        api, lease = await self._prepare()
        await self._require_enforcement()
        kind = requested_isolation(request.environment, "kubernetes").kind
        runtime_class = await self._runtime_class(api, kind)
        await self._check_placement(api, kind, request.placement)
        limits = resolve_limits(request.environment, self.defaults)
        credentials = await resolve_credentials(request.plan, self.secrets)
        relay = EventRelay()
        lifetime = (
            math.ceil(self.settings.start_timeout + ttl) + DEADLINE_MARGIN_S if ttl is not None else None
        )
        args = (credentials, relay, limits, runtime_class, lifetime)
        sandbox = await self._start_cold(api, lease, request, *args, session=label)

        async def bind(state: tuple[tuple[Scope, str, Any], ...]) -> None:
            self._bind_cold(sandbox, request, state)

        await bind(())
        return proxied_box(
            sandbox,
            label=label,
            bind=bind,
            relay=relay,
            credentials=credentials,
            agent=request.agent.spec,
            turn_timeout=self.turn_timeout,
            grace=self.timeout_grace,
        )

    async def _run_member(
        self,
        member: WarmPod,
        request: SandboxRequest,
        credentials: ResolvedCredentials,
        sink: SandboxEventSink | None,
        deadline: float | None,
    ) -> TurnOutput:
        """The turn in a claimed warm pod: its env_var credentials travel with the Execute;
        its deadline backstop is lowered alongside; the pod is never handed out again."""
        assert self.pool is not None
        sandbox = member.sandbox

        async def bind() -> None:
            if request.job is not None:
                await sandbox.label_job(request.job)
            sandbox.bind(request.agent.final(), request.state, env_var_values(request.plan, credentials))
            if deadline is not None:
                sandbox.backstop(deadline)

        # After a turn that ended (every tool process was killed at the end of its call) the
        # job need not wait for the pod's deletion (the pool's close does).
        return await run_turn(
            sandbox, request.input, sink, deadline, request.handle, bind=bind, retire=self.pool.retire
        )

    async def warm(
        self, environment: EnvironmentSpec, plan: SandboxPlan, placement: Placement | None = None
    ) -> bool:
        """Keep pods of this environment's shape, placed by ``placement``, started in the pool
        ahead of its jobs (claimed only by jobs of the same placement); False when none are
        kept: no pool (or ``size: 0``), or a sandbox that needs a proxy pod (egress, sidecar
        credentials) or has a file credential: those always start cold (see :mod:`._warm`).

        Raises:
            EnvError: what a cold start would raise for this environment (a RuntimeClass the
                cluster lacks, bad limits); ``provision_failed`` for an unreachable cluster.
        """
        if self.pool is None or not self.pool.enabled or not poolable(plan):
            return False
        placement = placement or Placement()
        api, lease = await self._prepare()
        await self._require_enforcement()
        kind = requested_isolation(environment, "kubernetes").kind
        runtime_class = await self._runtime_class(api, kind)
        await self._check_placement(api, kind, placement)
        key = self._shape_key(runtime_class, resolve_limits(environment, self.defaults), placement)
        render_pod(self._member_shape(key, _EXAMPLE_OWNER), proxy_ip=None)  # what a pod cannot ask for
        self.pool.declare(key, lambda: self._start_member(api, lease, key), label=key.label)
        return True

    def _shape_key(self, runtime_class: str | None, limits: Limits, placement: Placement) -> KubeShape:
        return KubeShape(
            image=self.image,
            runtime_class=runtime_class,
            limits=limits,
            settings=self.settings.model_dump_json(),
            controller_namespace=self._controller_namespace(),
            placement=placement,
        )

    def _member_shape(self, key: KubeShape, owner: Owner) -> SandboxShape:
        """A member's objects: no credential, no network, no deadline while it waits."""
        return SandboxShape(
            sandbox_id=f"sb-{secrets.token_hex(8)}",
            namespace=self.namespace,
            owner=owner,
            settings=self.settings,
            image=key.image,
            plan=SandboxPlan(),
            limits=key.limits,
            runtime_class=key.runtime_class,
            active_deadline_s=None,
            controller_namespace=key.controller_namespace,
            pool=key.id,
            fence=self._fence or (),
            placement=key.placement,
        )

    async def _start_member(self, api: KubeApi, lease: OwnerLease, key: KubeShape) -> WarmPod:
        """A started pod of shape ``key``, its runner SERVING, holding no secret and no agent;
        it holds a use of the owner Lease until it is destroyed."""
        owner = await api_step("acquire the owner Lease", lease.acquire)
        sandbox = KubernetesInstance(
            api,
            self._member_shape(key, owner),
            ResolvedCredentials(),
            None,
            port_forward=self._port_forward(),
            lease=lease,
        )
        await start(sandbox, partial(sandbox.provision, self.settings.start_timeout))
        return WarmPod(sandbox)

    def _controller_namespace(self) -> str:
        assert self._controller_ns is not None, "_prepare() first"
        return self._controller_ns

    async def host_address(self) -> str:
        """Where a service of the controller's host is reachable from the proxy pods:
        ``settings.host_address``, else this pod's IP in-cluster (IPv4 or IPv6, in the
        cluster's primary family: :mod:`._own_address`).

        Raises:
            EnvError: ``provision_failed`` outside a cluster with no ``host_address`` configured,
                or in a pod whose hostname resolves to no usable address.
        """
        if self.settings.host_address:
            return self.settings.host_address
        if in_cluster():
            from ._own_address import own_pod_address

            found = await asyncio.to_thread(own_pod_address)
            if found is None:
                raise EnvError.provision_failed(
                    "the kubernetes backend cannot find this pod's IP (its hostname resolves to no "
                    "usable address); set backends.kubernetes.host_address"
                )
            return found
        raise EnvError.provision_failed(
            "the kubernetes backend has no address of this host that its pods reach; set "
            "backends.kubernetes.host_address, or point the provider at a model service in the cluster"
        )

    def _port_forward(self) -> bool:
        return connect_mode(self.settings) == "port_forward"

    async def _prepare(self) -> tuple[KubeApi, OwnerLease]:
        async with self._ready:
            if self._api is None:
                self._api = await KubeApi.connect(self.settings, SANDBOX_ACCESS)
            api = self._api
            if self._lease is None:
                self._lease = self._owner_lease(api)
            if self._sweep and self.swept is None:
                from ._reaper import reap_with

                self.swept = await reap_with(api, self.settings, keep=frozenset({self._lease.name}))
                if self.swept.removed:
                    _log.info("removed leftovers of dead controllers: %s", self.swept.summary())
            if self._upkeep is None:
                self._upkeep = Upkeep(api, self.settings, self._lease, self._reap_every)
                self._upkeep.start()
            if self._controller_ns is None:
                found = self.settings.controller_namespace or await asyncio.to_thread(own_namespace)
                self._controller_ns = found or self.namespace
            if not self._policy_ready:
                await self._ensure_default_deny(api)
                await copy_pull_secrets(api, self.settings)
                self._policy_ready = True
            if self._fence is None:
                self._fence = tuple(
                    t.address for t in await proof_targets(api, self.settings) if t.name != "controller"
                )
            if self._guard is None:
                lease, ns, image = self._lease, self._controller_ns, self.image
                self._guard = shared_guard(
                    str(api.api_client.configuration.host),
                    self.namespace,
                    lambda: make_guard(api, self.settings, image, ns, lease),
                )
            return api, self._lease

    async def _require_enforcement(self) -> None:
        """Return when the namespace's NetworkPolicies are proven enforced (or assumed).

        Raises:
            EnvError: ``isolation_violation`` naming the failed checks, before any object exists.
        """
        assert self._guard is not None, "_prepare() first"
        await self._guard.require()

    async def isolation_proof(self) -> IsolationProof:
        """The namespace's NetworkPolicy enforcement: proven now when no proof was made yet
        (``airlock serve`` asks at start, before it serves any job).

        Raises:
            EnvError: ``provision_failed`` when the cluster cannot be reached.
        """
        await self._prepare()
        assert self._guard is not None
        with contextlib.suppress(EnvError):
            await self._guard.require()
        latest = self._guard.latest
        assert latest is not None, "require() proves or assumes"
        return isolation_proof(latest)

    def _owner_lease(self, api: KubeApi) -> OwnerLease:
        """This controller's owner Lease: of its stable identity, or (a one-shot command,
        which sweeps at start) of this process alone."""
        identity = None if self._sweep else self.settings.owner_identity or default_identity()
        return OwnerLease(api, self.namespace, self.settings.lease_seconds, identity)

    async def aclose(self) -> None:
        """Stop the periodic sweep (the backend is no longer in use)."""
        upkeep, self._upkeep = self._upkeep, None
        if upkeep is not None:
            await upkeep.aclose()

    async def ensure_gone(self, job: str) -> None:
        """Make sure no sandbox of ``job`` (a previous run's, before the job resumes) exists:
        its pods deleted and confirmed gone (read back 404), then its policies and Secrets.

        Raises:
            EnvError: ``provision_failed`` when that cannot be confirmed (the cluster is
                unreachable, or a pod is still there): the job must not resume meanwhile.
        """
        api, _ = await self._prepare()
        await ensure_job_gone(api, self.namespace, job)

    async def _ensure_default_deny(self, api: KubeApi) -> None:
        """The namespace-wide default-deny policy (created when missing)."""
        try:
            await api.call(
                api.networking.create_namespaced_network_policy,
                self.namespace,
                render_default_deny(self.namespace),
            )
        except ApiFailure as e:
            if e.status == 409:
                return
            raise provision_error(f"cannot create NetworkPolicy {DEFAULT_DENY_POLICY}", e) from e

    async def _runtime_class(self, api: KubeApi, kind: IsolationKind) -> str | None:
        """The RuntimeClass ``kind`` runs under, checked to exist (None: the default runtime).

        Raises:
            EnvError: ``isolation_violation`` when the cluster lacks it — before any pod exists.
        """
        if kind == "container":
            return None
        name = (
            self.settings.runtime_classes.gvisor
            if kind == "gvisor"
            else self.settings.runtime_classes.micro_vm
        )
        await _require_runtime_class(
            api,
            name,
            f"{kind} isolation needs the RuntimeClass {name!r}, which this cluster does not have; "
            "install it (or name the one you have in backends.kubernetes.runtime_classes) — "
            "airlock never falls back to a weaker boundary",
        )
        return name

    async def _check_placement(self, api: KubeApi, kind: IsolationKind, placement: Placement) -> None:
        """The placement's RuntimeClass (if any) checked: only with ``container`` isolation,
        one the backend may read (:attr:`KubernetesSettings.placement_runtime_classes`), and
        existing in the cluster.

        Raises:
            EnvError: ``isolation_violation`` for any of those — before any pod exists.
        """
        name = placement.runtime_class
        if name is None:
            return
        if kind != "container":
            raise EnvError.isolation_violation(
                f"placement.runtime_class {name!r} is refused with {kind} isolation: its sandbox runs "
                f"under the {kind} RuntimeClass (backends.kubernetes.runtime_classes), never replaced"
            )
        if name not in self.settings.placement_runtime_classes:
            raise EnvError.isolation_violation(
                f"placement.runtime_class {name!r} is not in backends.kubernetes.placement_runtime_classes "
                "(the RuntimeClasses this controller may read; the configuration adds its agents')"
            )
        await _require_runtime_class(
            api,
            name,
            f"the agent's placement.runtime_class {name!r} names a RuntimeClass this cluster does not "
            "have; install it (e.g. the NVIDIA runtime's) or correct the agent's placement",
        )


async def _require_runtime_class(api: KubeApi, name: str, missing: str) -> None:
    """Return when the cluster has RuntimeClass ``name``.

    Raises:
        EnvError: ``isolation_violation`` saying ``missing`` when it has none of that name;
            ``provision_failed`` when it cannot be read.
    """
    try:
        await api.call(api.node.read_runtime_class, name)
    except ApiFailure as e:
        if e.status == 404:
            raise EnvError.isolation_violation(missing) from e
        raise provision_error(f"cannot read RuntimeClass {name!r}", e) from e
