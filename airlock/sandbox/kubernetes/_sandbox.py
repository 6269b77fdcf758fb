"""KubernetesSandbox: each turn in its own hardened pod, with the same policy as on Docker.

Lifecycle of ``run`` (one sandbox ``sb-<16 hex>``; objects named in :mod:`._names`):

1. **Refuse what cannot be provided, before creating anything:** the isolation asked for
   (``gvisor``/``micro_vm`` need their RuntimeClass in the cluster: ``isolation_violation``
   otherwise, never a downgrade), the limits, the credentials' values.
2. **Owner:** the controller's Lease (:mod:`._owner`) is acquired; every object names it.
3. **Provision:** the sandbox's Secret (runner token, env_var/file credentials) and its
   NetworkPolicies; when the plan allows any egress or uses a sidecar credential, the proxy
   pod's Secret (bundle config, sidecar secrets) and the proxy pod, followed until its bundle
   is ready; then the sandbox pod, pointed at the proxy pod's IP. Deny-all sandboxes get no
   proxy and no egress at all.
4. **Ready:** the pod runs and the runner answers health SERVING within ``start_timeout``
   (from the first create); otherwise ``provision_failed`` with the pod's phase,
   conditions, container states and last events (ImagePullBackOff, Unschedulable, OOMKilled,
   DeadlineExceeded, …). Hopeless states fail at once.
5. **Turn:** through :class:`~airlock.runner.RemoteTurn` (pod IP or port-forward:
   :mod:`._channel`), with the same deadline as Docker (``max_duration`` + grace, capped by
   ``turn_timeout``; the pod's ``activeDeadlineSeconds`` is a backstop beyond it). Past the
   deadline the pod is deleted and the output says ``timeout``; an OOM kill is
   ``resource_exceeded``.
6. **Teardown** in ``finally`` (shielded; waits for a create still in flight, so a cancel
   mid-provision leaves nothing): pods, policies and Secrets deleted. What a crash leaves is
   removed by the cluster's garbage collector once the reaper deletes the expired Lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from airlock.images import runner_image_tag
from airlock.policy import ResolvedCredentials, SecretResolver, resolve_credentials, sidecar_agent
from layer0 import EnvError, Scope, TurnError, TurnInput, TurnOutput

from .._events import EventSink
from .._isolation import IsolationKind, requested_isolation
from .._lifecycle import oom_exceeded, settle, shielded
from .._limits import Limits, SandboxDefaults, resolve_limits
from .._port import SandboxRequest
from .._redact import redacted_output, redacting_sink
from .._turn import hard_timeout_s, timeout_output
from ._api import ApiFailure, KubeApi, in_cluster, own_namespace
from ._channel import PortForward, pod_ip_target
from ._diagnose import describe_pod, oom_killed, start_failure
from ._names import DEFAULT_DENY_POLICY, object_name
from ._owner import OwnerLease
from ._proxy_log import ProxyLog
from ._render import (
    SandboxShape,
    needs_proxy,
    proxy_urls,
    render_default_deny,
    render_network_policies,
    render_pod,
    render_proxy_pod,
    render_proxy_secret,
    render_secret,
)
from ._settings import KubernetesSettings

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.spec import AgentSpec

__all__ = ["KubernetesSandbox"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
_POLL_S = (0.05, 0.1, 0.2, 0.5)
#: Seconds the pod's own deadline lies beyond the controller's (a backstop, never the first to fire).
_DEADLINE_MARGIN_S = 60


class KubernetesSandbox:
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
    ) -> None:
        self.settings = settings or KubernetesSettings()
        self.secrets = secrets
        self.image = image or self.settings.image or runner_image_tag()
        self.turn_timeout = turn_timeout
        self.timeout_grace = timeout_grace
        self.defaults = defaults or SandboxDefaults()
        self._sweep = sweep
        self._api = api
        self._lease: OwnerLease | None = None
        self._ready = asyncio.Lock()
        self._policy_ready = False
        #: What the start-up sweep removed (None until it ran).
        self.swept: Any = None

    @property
    def namespace(self) -> str:
        """Where the sandboxes live."""
        return self.settings.namespace

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a fresh pod, removed (with its proxy, policies and
        Secrets) before this returns.

        Raises:
            EnvError: ``isolation_violation`` for a RuntimeClass the cluster lacks;
                ``credential_failed`` for a secret that cannot be resolved;
                ``resource_exceeded`` for bad limits or an OOM kill; ``provision_failed`` for
                an unreachable or refusing API server, or a pod or proxy that never became
                ready; ``turn_error`` for the turn's own failure.
        """
        agent, spec, plan = request.agent, request.environment, request.plan
        api, lease = await self._prepare()
        runtime_class = await self._runtime_class(api, requested_isolation(spec, "kubernetes").kind)
        limits = resolve_limits(spec, self.defaults)
        credentials = await resolve_credentials(plan, self.secrets)
        sink = request.events
        if sink is not None and credentials.values:
            sink = redacting_sink(sink, credentials.secrets)
        deadline = hard_timeout_s(agent, request.input, self.turn_timeout, self.timeout_grace)
        owner = await _api_step("acquire the owner Lease", lease.acquire)
        try:
            shape = SandboxShape(
                sandbox_id=f"sb-{secrets.token_hex(8)}",
                namespace=self.namespace,
                owner=owner,
                settings=self.settings,
                image=self.image,
                plan=plan,
                limits=limits,
                runtime_class=runtime_class,
                active_deadline_s=(
                    math.ceil(self.settings.start_timeout + deadline) + _DEADLINE_MARGIN_S
                    if deadline is not None
                    else None
                ),
                controller_namespace=self.settings.controller_namespace or own_namespace() or self.namespace,
            )
            sandbox = _PodSandbox(api, shape, credentials, sink, port_forward=self._port_forward())
            try:
                await sandbox.provision(self.settings.start_timeout)
                if sandbox.proxy_ip is not None:
                    agent = sidecar_agent(agent, plan, proxy_urls(plan, sandbox.proxy_ip))
                await sandbox.wait_serving(agent, request.state)
                output = await sandbox.execute(request.input, sink, deadline, limits)
            finally:
                await sandbox.teardown_shielded()
        finally:
            await lease.release()
        if credentials.values:
            output = redacted_output(output, credentials.secrets)
        return output

    async def host_address(self) -> str:
        """Where a service of the controller's host is reachable from the proxy pods:
        ``settings.host_address``, else this pod's IP in-cluster.

        Raises:
            EnvError: ``provision_failed`` outside a cluster with no ``host_address`` configured.
        """
        if self.settings.host_address:
            return self.settings.host_address
        if in_cluster():
            import socket

            return await asyncio.to_thread(lambda: socket.gethostbyname(socket.gethostname()))
        raise EnvError.provision_failed(
            "the kubernetes backend has no address of this host that its pods reach; set "
            "backends.kubernetes.host_address, or point the provider at a model service in the cluster"
        )

    def _port_forward(self) -> bool:
        mode = self.settings.connect
        if mode == "auto":
            use_cluster = self.settings.in_cluster if self.settings.in_cluster is not None else in_cluster()
            return not use_cluster
        return mode == "port_forward"

    async def _prepare(self) -> tuple[KubeApi, OwnerLease]:
        async with self._ready:
            if self._api is None:
                self._api = await KubeApi.connect(self.settings)
            api = self._api
            if self._lease is None:
                self._lease = OwnerLease(api, self.namespace, self.settings.lease_seconds)
            if self._sweep and self.swept is None:
                from ._reaper import reap_with

                self.swept = await reap_with(api, self.settings)
                if self.swept.removed:
                    _log.info("removed leftovers of dead controllers: %s", self.swept.summary())
            if not self._policy_ready:
                await self._ensure_default_deny(api)
                self._policy_ready = True
            return api, self._lease

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
            raise _provision_error(f"cannot create NetworkPolicy {DEFAULT_DENY_POLICY}", e) from e

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
        try:
            await api.call(api.node.read_runtime_class, name)
        except ApiFailure as e:
            if e.status == 404:
                raise EnvError.isolation_violation(
                    f"{kind} isolation needs the RuntimeClass {name!r}, which this cluster does not have; "
                    "install it (or name the one you have in backends.kubernetes.runtime_classes) — "
                    "airlock never falls back to a weaker boundary"
                ) from e
            raise _provision_error(f"cannot read RuntimeClass {name!r}", e) from e
        return name


async def _api_step(what: str, fn: Callable[[], Any]) -> Any:
    try:
        return await fn()
    except ApiFailure as e:
        raise _provision_error(f"cannot {what}", e) from e


def _provision_error(what: str, e: ApiFailure) -> EnvError:
    if e.status == 403:
        return EnvError.provision_failed(f"{what}: the API server refused it (RBAC): {e.message}")
    if e.status == 0:
        return EnvError.provision_failed(f"{what}: the API server is unreachable ({e.message})")
    return EnvError.provision_failed(f"{what}: {e}")


class _PodSandbox:
    """One sandbox's objects on the cluster; torn down exactly once."""

    def __init__(
        self,
        api: KubeApi,
        shape: SandboxShape,
        credentials: ResolvedCredentials,
        events: EventSink | None,
        *,
        port_forward: bool,
    ) -> None:
        self.api = api
        self.shape = shape
        self.id = shape.sandbox_id
        self.namespace = shape.namespace
        self.credentials = credentials
        self.events = events
        self.token = secrets.token_urlsafe(32)
        self.pod = object_name(self.id)
        self.proxy_pod = object_name(self.id, "proxy")
        self.use_port_forward = port_forward
        self.proxy_ip: str | None = None
        self.proxy_log: ProxyLog | None = None
        self.forward: PortForward | None = None
        self.remote: RemoteTurn | None = None
        self.deadline = 0.0
        self._inflight: asyncio.Future[None] | None = None
        self._torn_down = False

    # -- provisioning -------------------------------------------------------------------

    async def provision(self, timeout: float) -> None:  # noqa: ASYNC109
        """Create the Secrets, policies, proxy (when needed) and the sandbox pod."""
        self.deadline = time.monotonic() + timeout
        # Shielded: if we are cancelled mid-create, teardown waits for it, then removes it all.
        self._inflight = asyncio.ensure_future(self._provision())
        await asyncio.shield(self._inflight)

    async def _provision(self) -> None:
        api, ns, shape = self.api, self.namespace, self.shape
        await self._create(
            "Secret", api.core.create_namespaced_secret, render_secret(shape, self.token, self.credentials)
        )
        for policy in render_network_policies(shape):
            await self._create("NetworkPolicy", api.networking.create_namespaced_network_policy, policy)
        if needs_proxy(shape.plan):
            await self._create(
                "Secret", api.core.create_namespaced_secret, render_proxy_secret(shape, self.credentials)
            )
            await self._create("Pod", api.core.create_namespaced_pod, render_proxy_pod(shape))
            proxy = await self._wait_running(self.proxy_pod, "egress proxy")
            self.proxy_ip = str(proxy["status"]["podIP"])
            self.proxy_log = ProxyLog(
                api, ns, self.proxy_pod, secrets=self.credentials.secrets, events=self.events
            )
            self.proxy_log.start()
            await self.proxy_log.wait_ready(max(0.1, self.deadline - time.monotonic()))
        await self._create("Pod", api.core.create_namespaced_pod, render_pod(shape, proxy_ip=self.proxy_ip))

    async def _create(self, kind: str, fn: Callable[..., Any], body: dict[str, Any]) -> None:
        try:
            await self.api.call(fn, self.namespace, body)
        except ApiFailure as e:
            name = body["metadata"]["name"]
            raise _provision_error(f"cannot create {kind} {name} of sandbox {self.id}", e) from e

    async def _read_pod(self, name: str) -> dict[str, Any]:
        try:
            pod: dict[str, Any] = await self.api.call(self.api.core.read_namespaced_pod, name, self.namespace)
        except ApiFailure as e:
            raise _provision_error(f"cannot read pod {name}", e) from e
        return pod

    async def _events_of(self, name: str) -> list[dict[str, Any]]:
        try:
            found = await self.api.call(
                self.api.core.list_namespaced_event,
                self.namespace,
                field_selector=f"involvedObject.name={name}",
            )
        except ApiFailure:
            return []
        return list(found.get("items") or [])

    async def _wait_running(self, name: str, what: str) -> dict[str, Any]:
        """The pod once it runs with an IP.

        Raises:
            EnvError: ``provision_failed`` once it cannot start, or at the start deadline.
        """
        polls = 0
        while True:
            pod = await self._read_pod(name)
            failure = start_failure(pod)
            status = pod.get("status") or {}
            if failure is None and status.get("phase") == "Running" and status.get("podIP"):
                return pod
            late = time.monotonic() > self.deadline
            if failure is not None or late:
                why = failure or "not running before the start timeout"
                await self._fail(name, what, why, pod)
            await asyncio.sleep(_POLL_S[min(polls, len(_POLL_S) - 1)])
            polls += 1

    async def _fail(self, name: str, what: str, why: str, pod: dict[str, Any] | None = None) -> None:
        if pod is None:
            with contextlib.suppress(EnvError):
                pod = await self._read_pod(name)
        detail = describe_pod(pod or {}, await self._events_of(name))
        raise EnvError.provision_failed(
            f"sandbox {self.id}: the {what} pod {name} cannot start: {why}\n{detail}"
        )

    async def wait_serving(
        self, agent: AgentSpec, state: Iterable[tuple[Scope, str, Any]] | None = None
    ) -> None:
        """Wait for the sandbox pod to run, open the channel, wait for health SERVING."""
        from airlock.runner import RemoteTurn, RunnerCallError

        pod = await self._wait_running(self.pod, "sandbox")
        if self.use_port_forward:
            self.forward = PortForward(self.api, self.namespace, self.pod)
            target = await self.forward.start()
        else:
            found = pod_ip_target(pod)
            assert found is not None  # _wait_running returns a pod with an IP
            target = found
        self.remote = RemoteTurn(target, self.token, agent, state=state)
        try:
            await self.remote.wait_until_serving(max(0.1, self.deadline - time.monotonic()))
        except RunnerCallError as e:
            await self._fail(self.pod, "sandbox", f"the runner is not SERVING ({e})")

    # -- the turn -----------------------------------------------------------------------

    async def execute(
        self,
        input: TurnInput,
        events: EventSink | None,
        timeout: float | None,  # noqa: ASYNC109
        limits: Limits,
    ) -> TurnOutput:
        remote = self.remote
        assert remote is not None, "wait_serving() first"
        began = time.monotonic()
        try:
            try:
                output = await asyncio.wait_for(remote.execute(input, events=events), timeout)
            except TimeoutError:
                await self._delete("Pod", self.api.core.delete_namespaced_pod, self.pod)
                elapsed = time.monotonic() - began
                return timeout_output(f"sandbox {self.id}", timeout or elapsed, elapsed)
            except TurnError as e:
                pod = await self._pod_or_empty()
                self._raise_if_oom(pod, limits, e)
                if (pod.get("status") or {}).get("phase") not in (None, "Running"):
                    detail = describe_pod(pod, await self._events_of(self.pod))
                    raise EnvError.other(f"sandbox {self.id} died during the turn: {e}\n{detail}") from e
                raise EnvError.from_turn_error(e) from e
        finally:
            await remote.close()
        self._raise_if_oom(await self._pod_or_empty(), limits, None)
        return output

    async def _pod_or_empty(self) -> dict[str, Any]:
        try:
            pod: dict[str, Any] = await self.api.call(
                self.api.core.read_namespaced_pod, self.pod, self.namespace
            )
        except ApiFailure:
            return {}
        return pod

    def _raise_if_oom(self, pod: dict[str, Any], limits: Limits, cause: BaseException | None) -> None:
        if oom_killed(pod):
            raise oom_exceeded(self.id, limits) from cause

    # -- teardown -----------------------------------------------------------------------

    async def teardown_shielded(self) -> None:
        """Tear down even if we are cancelled (again) meanwhile."""
        await shielded(self._teardown)

    async def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        await settle(self._inflight)
        if self.remote is not None:
            await self.remote.close()
        if self.forward is not None:
            await self.forward.aclose()
        core, net = self.api.core, self.api.networking
        problems = [
            p
            for p in await asyncio.gather(
                self._delete("Pod", core.delete_namespaced_pod, self.pod),
                self._delete("Pod", core.delete_namespaced_pod, self.proxy_pod),
                self._delete("NetworkPolicy", net.delete_namespaced_network_policy, self.pod),
                self._delete("NetworkPolicy", net.delete_namespaced_network_policy, self.proxy_pod),
                self._delete("Secret", core.delete_namespaced_secret, self.pod),
                self._delete("Secret", core.delete_namespaced_secret, self.proxy_pod),
            )
            if p
        ]
        if self.proxy_log is not None:
            await self.proxy_log.close()
        if problems:
            # Left for the reaper: their owner Lease expires once this controller is gone.
            _log.warning("teardown of sandbox %s incomplete: %s", self.id, "; ".join(problems))

    async def _delete(self, kind: str, fn: Callable[..., Any], name: str) -> str | None:
        """Delete one object now (no grace); a problem as text (an absent object is none)."""
        try:
            await self.api.call(
                fn, name, self.namespace, grace_period_seconds=0, propagation_policy="Background"
            )
        except ApiFailure as e:
            return None if e.status == 404 else f"{kind} {name}: {e}"
        return None
