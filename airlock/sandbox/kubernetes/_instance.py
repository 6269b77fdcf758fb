"""One Kubernetes sandbox's objects: :class:`KubernetesInstance`, torn down exactly once.

The running box of :class:`~._backend.KubernetesBackend`, a
:class:`~airlock.sandbox._instance.SandboxInstance`: ``provision`` (Secrets, policies, the
proxy pod when the plan needs one, the sandbox pod), ``wait_ready`` (the pod runs, the channel
is open, the runner answers SERVING: no agent is needed yet, so a warm pool member stops
here), ``bind`` (the job's agent, state snapshot and late-bound environment); the turn runs
through :mod:`airlock.sandbox._lifecycle`, then ``teardown`` (the pods deleted with a grace
period and confirmed gone, then their policies and Secrets: see :mod:`._removal`; then its
use of the owner Lease given up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airlock.policy import ResolvedCredentials
from layer0 import EnvError, Scope, TurnError

from .._events import SandboxEventSink
from .._lifecycle import SETTLE_S, oom_exceeded, settle, shielded
from ._api import ApiFailure, KubeApi
from ._channel import PortForward, pod_ip_target
from ._diagnose import describe_pod, oom_killed, start_failure
from ._names import LABEL_JOB, LABEL_SESSION, object_name
from ._owner import OwnerLease
from ._proxy_log import ProxyLog
from ._removal import delete_object, delete_pods
from ._render import (
    SandboxShape,
    needs_proxy,
    render_network_policies,
    render_pod,
    render_proxy_pod,
    render_proxy_secret,
    render_secret,
)
from ._runner_tls import RUNNER_NAME, RunnerCertificate

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from airlock.spec import AgentSpec

__all__ = ["DEADLINE_MARGIN_S", "KubernetesInstance", "api_step", "provision_error"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
_POLL_S = (0.05, 0.1, 0.2, 0.5)
#: Seconds the pod's own deadline lies beyond the controller's (a backstop, never the first to fire).
DEADLINE_MARGIN_S = 60


async def api_step(what: str, fn: Callable[[], Any]) -> Any:
    """``await fn()``; an API failure as ``provision_failed`` saying what could not be done."""
    try:
        return await fn()
    except ApiFailure as e:
        raise provision_error(f"cannot {what}", e) from e


def provision_error(what: str, e: ApiFailure) -> EnvError:
    """``provision_failed`` for an API failure (RBAC refusal and unreachable server named)."""
    if e.status == 403:
        return EnvError.provision_failed(f"{what}: the API server refused it (RBAC): {e.message}")
    if e.status == 0:
        return EnvError.provision_failed(f"{what}: the API server is unreachable ({e.message})")
    return EnvError.provision_failed(f"{what}: {e}")


class KubernetesInstance:
    """One sandbox's objects on the cluster; torn down exactly once (``lease``: the owner
    Lease whose use it holds, given up after its teardown)."""

    def __init__(
        self,
        api: KubeApi,
        shape: SandboxShape,
        credentials: ResolvedCredentials,
        events: SandboxEventSink | None,
        *,
        port_forward: bool,
        job: str | None = None,
        lease: OwnerLease | None = None,
        session: str | None = None,
    ) -> None:
        self.api = api
        self.lease = lease
        #: The job this sandbox runs for (every object it creates is labelled with it).
        self.job = job
        #: The long-lived sandbox it serves (every object it creates is labelled with it).
        self.session = session
        self.shape = shape
        self.id = shape.sandbox_id
        self.namespace = shape.namespace
        self.credentials = credentials
        self.events = events
        self.token = secrets.token_urlsafe(32)
        #: The runner's own certificate: the only one the controller trusts for this sandbox.
        self.certificate = RunnerCertificate.generate()
        self.pod = object_name(self.id)
        self.proxy_pod = object_name(self.id, "proxy")
        self.use_port_forward = port_forward
        self.proxy_ip: str | None = None
        self.proxy_log: ProxyLog | None = None
        self.forward: PortForward | None = None
        #: The runner's ``host:port`` once :meth:`wait_ready` returned.
        self.target: str | None = None
        self.remote: RemoteTurn | None = None
        self.created = 0.0
        self.deadline = 0.0
        self._inflight: asyncio.Future[None] | None = None
        #: The lowering of a claimed pod's deadline, under way (see :meth:`limit_lifetime`).
        self._backstop: asyncio.Future[None] | None = None
        self._torn_down = False

    # -- provisioning -------------------------------------------------------------------

    async def provision(self, timeout: float) -> None:  # noqa: ASYNC109
        """Create the Secrets, policies, proxy (when needed) and the sandbox pod."""
        self.created = time.monotonic()
        self.deadline = self.created + timeout
        # Shielded: if we are cancelled mid-create, teardown waits for it, then removes it all.
        self._inflight = asyncio.ensure_future(self._provision())
        await asyncio.shield(self._inflight)

    async def _provision(self) -> None:
        api, ns, shape = self.api, self.namespace, self.shape
        await self._create(
            "Secret",
            api.core.create_namespaced_secret,
            render_secret(shape, self.token, self.credentials, self.certificate),
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
        if self.job is not None:
            body["metadata"].setdefault("labels", {})[LABEL_JOB] = self.job
        if self.session is not None:
            body["metadata"].setdefault("labels", {})[LABEL_SESSION] = self.session
        try:
            await self.api.call(fn, self.namespace, body)
        except ApiFailure as e:
            name = body["metadata"]["name"]
            raise provision_error(f"cannot create {kind} {name} of sandbox {self.id}", e) from e

    async def _read_pod(self, name: str) -> dict[str, Any]:
        try:
            pod: dict[str, Any] = await self.api.call(self.api.core.read_namespaced_pod, name, self.namespace)
        except ApiFailure as e:
            raise provision_error(f"cannot read pod {name}", e) from e
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

    @property
    def name(self) -> str:
        """How errors and outputs name it."""
        return f"sandbox {self.id}"

    async def wait_ready(self) -> None:
        """Wait for the sandbox pod to run, open the channel, wait for health SERVING (no
        agent is needed yet).

        Raises:
            EnvError: ``provision_failed`` (with the pod's state) at the start deadline.
        """
        from airlock.runner import RunnerCallError, wait_until_serving

        pod = await self._wait_running(self.pod, "sandbox")
        if self.use_port_forward:
            self.forward = PortForward(self.api, self.namespace, self.pod)
            target = await self.forward.start()
        else:
            found = pod_ip_target(pod)
            assert found is not None  # _wait_running returns a pod with an IP
            target = found
        self.target = target
        try:
            await wait_until_serving(target, max(0.1, self.deadline - time.monotonic()), **self._pinned())
        except RunnerCallError as e:
            await self._fail(self.pod, "sandbox", f"the runner is not SERVING ({e})")

    def bind(
        self,
        agent: AgentSpec,
        state: Iterable[tuple[Scope, str, Any]] | None = None,
        environment: Mapping[str, str] | None = None,
    ) -> None:
        """The job's agent, state snapshot and late-bound environment, for :meth:`execute`."""
        from airlock.runner import RemoteTurn

        assert self.target is not None, "wait_ready() first"
        self.remote = RemoteTurn(
            self.target, self.token, agent, state=state, environment=environment, **self._pinned()
        )

    def _pinned(self) -> dict[str, Any]:
        """How the runner's channel is checked: this sandbox's certificate, for its name."""
        return {"root_certificates": self.certificate.cert_pem, "tls_server_name": RUNNER_NAME}

    async def healthy(self) -> bool:
        """Whether the runner still answers SERVING (a quick check over the channel)."""
        from airlock.runner import RunnerCallError, wait_until_serving

        if self.target is None or self._torn_down:
            return False
        try:
            await wait_until_serving(self.target, 0.5, **self._pinned())
        except RunnerCallError:
            return False
        return True

    async def limit_lifetime(self, turn_s: float) -> None:
        """Lower the pod's ``activeDeadlineSeconds`` to its age plus ``turn_s`` and the margin
        (a backstop for a pod started before its job; the API lets a running pod's deadline be
        set or lowered, never raised). A failure is only logged: the controller's own deadline
        still holds."""
        seconds = math.ceil(time.monotonic() - self.created + turn_s) + DEADLINE_MARGIN_S
        patch = {"spec": {"activeDeadlineSeconds": seconds}}
        try:
            await self.api.call(self.api.core.patch_namespaced_pod, self.pod, self.namespace, patch)
        except ApiFailure as e:
            if e.status != 404:
                _log.warning("cannot set the deadline of pod %s: %s", self.pod, e)

    def backstop(self, turn_s: float) -> None:
        """:meth:`limit_lifetime` in the background (its teardown waits for it)."""
        self._backstop = asyncio.ensure_future(self.limit_lifetime(turn_s))

    async def label_job(self, job: str) -> None:
        """Label the pod (a claimed warm member's) with the job it now runs for.

        Raises:
            EnvError: ``provision_failed`` when the pod cannot be labelled (a resume could
                not find it: the job does not run in it).
        """
        self.job = job
        patch = {"metadata": {"labels": {LABEL_JOB: job}}}
        await api_step(
            f"label pod {self.pod} with its job",
            lambda: self.api.call(self.api.core.patch_namespaced_pod, self.pod, self.namespace, patch),
        )

    # -- the turn -----------------------------------------------------------------------

    async def stop(self) -> None:
        """Delete the sandbox pod now (its turn ran past the deadline)."""
        await self._delete("Pod", self.api.core.delete_namespaced_pod, self.pod)

    async def failure(self, error: TurnError) -> EnvError:
        """An OOM kill, a pod that died, else the turn's own failure (a broken channel:
        judged once the pod settled)."""
        from airlock.runner import channel_lost

        pod = await (self._settled_pod() if channel_lost(error) else self._pod_or_empty())
        self._raise_if_oom(pod, error)
        if (pod.get("status") or {}).get("phase") not in (None, "Running"):
            detail = describe_pod(pod, await self._events_of(self.pod))
            return EnvError.other(f"sandbox {self.id} died during the turn: {error}\n{detail}")
        return EnvError.from_turn_error(error)

    async def after_turn(self) -> None:
        """Raise ``resource_exceeded`` if a container of the pod was OOM-killed meanwhile."""
        self._raise_if_oom(await self._pod_or_empty(), None)

    async def _pod_or_empty(self) -> dict[str, Any]:
        try:
            pod: dict[str, Any] = await self.api.call(
                self.api.core.read_namespaced_pod, self.pod, self.namespace
            )
        except ApiFailure:
            return {}
        return pod

    async def _settled_pod(self) -> dict[str, Any]:
        """The pod once it stopped running, or as it is after ``SETTLE_S``: its runner's channel
        broke, and the kubelet reports how a container ended (an OOM kill) only once it has."""
        deadline = time.monotonic() + SETTLE_S
        polls = 0
        while True:
            pod = await self._pod_or_empty()
            if (pod.get("status") or {}).get("phase") != "Running" or time.monotonic() > deadline:
                return pod
            await asyncio.sleep(_POLL_S[min(polls, len(_POLL_S) - 1)])
            polls += 1

    def _raise_if_oom(self, pod: dict[str, Any], cause: BaseException | None) -> None:
        if oom_killed(pod):
            raise oom_exceeded(self.id, self.shape.limits) from cause

    # -- teardown -----------------------------------------------------------------------

    async def teardown(self) -> None:
        """Delete its pods, then their policies and Secrets, then give up its use of the owner
        Lease; exactly once, even if we are cancelled (again) meanwhile."""
        await shielded(self._teardown)

    async def _teardown(self) -> None:
        if self._torn_down:
            return
        self._torn_down = True
        try:
            await self._remove()
        finally:
            if self.lease is not None:
                await self.lease.release()

    async def _remove(self) -> None:
        await settle(self._backstop)
        await settle(self._inflight)
        if self.remote is not None:
            await self.remote.close()
        if self.forward is not None:
            await self.forward.aclose()
        core, net = self.api.core, self.api.networking
        left, problems = await delete_pods(self.api, self.namespace, (self.pod, self.proxy_pod))
        if not left:  # only now: a pod that still runs keeps its policy and its Secret
            problems += [
                p
                for p in await asyncio.gather(
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
        failure = await delete_object(self.api, fn, self.namespace, name)
        return None if failure is None else f"{kind} {name}: {failure}"
