"""DockerBackend: each turn in its own hardened container on a real Docker engine.

Control channel (how the controller reaches a runner that has no network at all):

* The sandbox runs with ``network_mode="none"``: no interface but loopback, so nothing
  inside can reach the host, the LAN or the internet, and nothing outside can reach it.
* Per sandbox the controller creates a host directory ``<state_dir>/<sandbox-id>/``
  (``/run/airlock`` for root), mode 0700 and owned by the sandbox uid (65534), and
  bind-mounts it at ``/run/airlock``. It is the **only** host path the sandbox sees.
* The controller writes a fresh 256-bit token to ``token`` there (0400); the runner reads
  it and deletes it (``--token-file-delete``), then serves gRPC on the Unix socket
  ``/run/airlock/runner.sock``. Every Runner RPC needs the token; health does not.
* As soon as the socket appears, the controller verifies it (a real socket, not a symlink,
  owned by the sandbox uid) and **locks the directory**: ownership goes back to root, mode
  0700. The runner keeps its listening socket, but nothing in the sandbox can list,
  replace or add entries any more — so the sandbox cannot swap ``runner.sock`` for a
  symlink to some other host socket (e.g. Docker's) that the controller would then dial.
  The controller connects with :class:`~airlock.runner.RemoteTurn` to
  ``unix:<host dir>/runner.sock``.
* Why not TCP on an internal network: a network namespace with a route is more attack
  surface (the runner's port reachable from other containers on it, DNS, ARP), costs a
  network create/remove per sandbox (~100 ms) and still needs host-side access. A Unix
  socket gives the controller a channel with filesystem permissions and no routing at all.

Lifecycle of ``run``: check the spec (refuse what cannot be enforced), require the image
(naming ``airlock images build``), create the control dir + token, create and start the
container, wait for health SERVING (start timeout; on failure ``provision_failed`` with the
container's last log lines), run the turn streaming its events to the optional sink, and
**always** tear down (:mod:`airlock.sandbox._lifecycle`) — container force-removed, control
dir removed — also on cancellation and timeout. Teardown is shielded from a second
cancellation and waits for a create still in flight, so a cancel during provisioning leaves
nothing behind. Every object carries the labels of :mod:`._labels`; a startup sweep (and
``airlock gc``) removes objects whose owner process is gone.

Timeouts: a turn gets its ``max_duration`` (TurnConfig, else the AgentSpec defaults) plus
``timeout_grace`` for the runner to report its own ``timeout`` exit; the environment-level
``turn_timeout`` is a hard cap. Past the deadline the container is killed and ``run``
returns a TurnOutput with ``ExitReason.timeout()`` (not an error: the caller decides what a
timed-out turn means, as for the runner's own timeout) whose message says it was killed.
Out of memory: any OOM kill inside the sandbox during the turn (the engine's ``oom`` event,
or the container's ``OOMKilled`` state) → ``EnvError.resource_exceeded("memory …")``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from airlock.images import docker_client, require_image, runner_image_tag
from airlock.policy import (
    ResolvedCredentials,
    SandboxPlan,
    SecretResolver,
    env_var_values,
    resolve_credentials,
)
from airlock.sandbox._events import SandboxEventSink
from airlock.sandbox._lifecycle import run_turn, start
from airlock.sandbox._limits import SandboxDefaults, resolve_limits
from airlock.sandbox._observer import isolation_of, sandbox_observer
from airlock.sandbox._placement import Placement, refuse_placement
from airlock.sandbox._pool import WarmPool
from airlock.sandbox._port import SandboxRequest
from airlock.sandbox._redact import redacted_output, redacting_sink
from airlock.sandbox._session import EventRelay, LongLivedBox, proxied_box
from airlock.sandbox._turn import hard_timeout_s
from layer0 import EnvError, EnvironmentSpec, Scope, TurnOutput

from ._config import resolve_boundary
from ._egress import EGRESS_NETWORK, EgressWiring, ensure_egress_network, network_gateway, proxy_urls
from ._instance import DockerInstance, call_engine
from ._labels import LABEL_SESSION, owner_labels
from ._reaper import ReapReport, default_state_dir, reap_orphans
from ._resume import LABEL_JOB, ensure_job_gone
from ._settings import DockerSettings
from ._warm import LABEL_POOL, DockerShape, LateFiles, WarmMember, shape_of

__all__ = ["DockerBackend"]

_log = logging.getLogger("airlock.sandbox.docker")


class DockerBackend:
    """The Docker backend: each turn in a fresh hardened container (a :class:`~airlock.sandbox.Sandbox`).

    Args:
        image: the runner image (default ``airlock-runner:<version>``, built by
            ``airlock images build``); a ``container`` isolation boundary may name another.
        state_dir: parent of the per-sandbox control directories (default
            :func:`~._reaper.default_state_dir`); must be visible to dockerd at the same path.
        start_timeout: seconds from container start to health SERVING.
        turn_timeout: hard cap on a turn's wall-clock seconds (None: only max_duration).
        timeout_grace: extra seconds past ``max_duration`` before the container is killed.
        defaults: limits for what ``spec.resources`` leaves unset.
        sweep: remove orphaned sandboxes (owner process gone) before the first run.
        client: a ``docker.DockerClient`` (default: from the environment).
        secrets: resolves credential names to values (env_var, file and sidecar
            credentials); without one, a spec with credentials is refused.
        egress_networks: Docker networks the egress proxy uses to reach allowed destinations
            (default: the shared ``airlock-egress`` bridge, created on first use).
        settings: the ``backends.docker`` section (which engine runtime provides which
            isolation kind, and the weakest boundary any sandbox gets).
        pool: a warm pool (shared by every DockerBackend of one controller): a job whose
            sandbox shape is pooled (:meth:`warm`) claims a started sandbox instead of
            starting one; None or ``size: 0``: every sandbox starts cold.
    """

    def __init__(
        self,
        *,
        image: str | None = None,
        state_dir: Path | None = None,
        start_timeout: float = 30.0,
        turn_timeout: float | None = None,
        timeout_grace: float = 5.0,
        defaults: SandboxDefaults | None = None,
        sweep: bool = True,
        client: Any = None,
        secrets: SecretResolver | None = None,
        egress_networks: Sequence[str] | None = None,
        settings: DockerSettings | None = None,
        pool: WarmPool[WarmMember] | None = None,
    ) -> None:
        self.settings = settings or DockerSettings()
        self.image = image or runner_image_tag()
        self.state_dir = (state_dir or default_state_dir()).absolute()
        self.start_timeout = start_timeout
        self.turn_timeout = turn_timeout
        self.timeout_grace = timeout_grace
        self.defaults = defaults or SandboxDefaults()
        self._sweep = sweep
        self._client = client
        self._runtimes: frozenset[str] | None = None
        self.secrets = secrets
        self.egress_networks = tuple(egress_networks) if egress_networks is not None else None
        self._egress_ready = False
        self._ready = asyncio.Lock()
        self.pool = pool
        #: What the startup sweep removed (None until it ran).
        self.swept: ReapReport | None = None

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a fresh container, removed before this returns (a warm
        pool member's removal, after a turn that ended, finishes in the background instead:
        :meth:`WarmPool.settle <airlock.sandbox.WarmPool.settle>` and its close wait for it).

        The state snapshot travels with the turn's request, so the sandbox needs no path
        back to any store. ``request.events`` receives the turn's events and, when the
        sandbox has egress, every egress-proxy decision (:class:`~airlock.proxy.EgressEvent`)
        and credential-proxy request (:class:`~airlock.proxy.CredentialProxyEvent`).

        Raises:
            EnvError: ``isolation_violation`` for isolation the engine cannot provide;
                ``credential_failed`` for a secret that cannot be resolved;
                ``resource_exceeded`` for bad limits, missing GPU runtime, or an OOM kill;
                ``provision_failed`` for a missing image, an unreachable engine, or a runner
                or proxy that never became ready; ``turn_error`` for the turn's own failure.
        """
        agent, plan = request.agent.spec, request.plan
        refuse_placement(request.placement, "docker")
        client, runtimes = await self._prepare()
        shape = self._shape(request.environment, plan, runtimes)
        credentials = await resolve_credentials(plan, self.secrets)
        sink = request.events
        if sink is not None and credentials.values:
            sink = redacting_sink(sink, credentials.secrets)
        deadline = hard_timeout_s(agent, request.input, self.turn_timeout, self.timeout_grace)
        began = time.monotonic()
        member = await self.pool.claim(shape) if self.pool is not None else None
        if member is not None and self.pool is not None:
            sandbox = member.sandbox
            # After a turn that ended (every tool process was killed at the end of its call)
            # the job need not wait for the engine to remove the container (the pool's close does).
            retire = self.pool.retire
            bind = partial(self._bind_member, member, request, credentials, sink)
        else:
            sandbox = await self._start_cold(client, runtimes, shape, request, credentials, sink)
            retire, bind = None, partial(self._bind_cold, sandbox, request)
        observed = isolation_of(request.environment), "cold" if member is None else "warm"
        sandbox_observer().provisioned("docker", *observed, time.monotonic() - began)
        output = await run_turn(
            sandbox, request.input, sink, deadline, request.handle, bind=bind, retire=retire
        )
        if credentials.values:
            output = redacted_output(output, credentials.secrets)
        return output

    async def warm(
        self, environment: EnvironmentSpec, plan: SandboxPlan, placement: Placement | None = None
    ) -> bool:
        """Keep sandboxes of this environment's shape started in the pool, ahead of its jobs;
        False when none are kept (no pool, or ``size: 0``).

        Raises:
            EnvError: what a cold start would raise for this environment (isolation the engine
                cannot provide, bad limits, a ``placement``: Docker places nothing).
        """
        refuse_placement(placement or Placement(), "docker")
        if self.pool is None or not self.pool.enabled:
            return False
        client, runtimes = await self._prepare()
        shape = self._shape(environment, plan, runtimes)
        await asyncio.to_thread(require_image, client, shape.image)
        self.pool.declare(shape, lambda: self._start_member(client, runtimes, shape), label=shape.label)
        return True

    def _shape(
        self, environment: EnvironmentSpec, plan: SandboxPlan, runtimes: frozenset[str]
    ) -> DockerShape:
        """The job's sandbox shape.

        Raises:
            EnvError: isolation the engine cannot provide, or bad limits.
        """
        networked = plan.needs_egress_proxy or bool(plan.sidecars)
        boundary = resolve_boundary(
            environment,
            runtimes,
            self.settings.runtimes,
            networked=networked,
            floor=self.settings.isolation_floor,
        )
        limits = resolve_limits(environment, self.defaults)
        image = boundary.image or self.image
        return shape_of(plan, image, boundary, limits)

    async def _start_member(self, client: Any, runtimes: frozenset[str], shape: DockerShape) -> WarmMember:
        """A started, SERVING sandbox of ``shape`` holding no secret and no agent."""
        sandbox = DockerInstance(
            client, self.state_dir, labels={LABEL_POOL: shape.id}, start_timeout=self.start_timeout
        )
        files = LateFiles(self.state_dir / f"{sandbox.id}.files", shape.files, sandbox.user, sandbox.root)
        sandbox.extra, sandbox.dirs, sandbox.preload = files.settings(), (files.dir,), True
        if shape.network is not None:
            sandbox.wiring = EgressWiring(
                client=client,
                sandbox_id=sandbox.id,
                state_dir=self.state_dir,
                labels=sandbox.labels,
                user=sandbox.user,
                root=sandbox.root,
                image=self.image,
                plan=SandboxPlan(),
                credentials=ResolvedCredentials(),
                egress_networks=await self._egress_networks(client) if shape.network.egress else (),
                events=None,
                settings=self.settings,
                late=(shape.network.resolves_names,),
            )

        async def provision() -> None:
            await call_engine(files.create)
            await sandbox.provision(
                image=shape.image, limits=shape.limits, runtimes=runtimes, boundary=shape.boundary
            )

        await start(sandbox, provision)
        return WarmMember(sandbox, files)

    async def _bind_member(
        self,
        member: WarmMember,
        request: SandboxRequest,
        credentials: ResolvedCredentials,
        sink: SandboxEventSink | None,
    ) -> None:
        """A claimed member given its job: credentials, the proxy's rules, the agent."""
        sandbox, plan, agent = member.sandbox, request.plan, request.agent
        await asyncio.to_thread(member.files.fill, plan, credentials)
        wiring = sandbox.wiring
        if wiring is not None:
            await call_engine(wiring.bind, plan, credentials, sink)
            await wiring.wait_ready(self.start_timeout, poll=0.005)
            agent = agent.with_sidecar_routes(plan, proxy_urls(wiring.ports))
        sandbox.bind(agent.final(), request.state, env_var_values(plan, credentials))

    async def _bind_cold(self, sandbox: DockerInstance, request: SandboxRequest) -> None:
        """A sandbox started for this job given its agent (pointed at its proxy's sidecars)."""
        assert sandbox.wiring is not None, "a cold sandbox has its wiring"
        agent = request.agent.with_sidecar_routes(request.plan, proxy_urls(sandbox.wiring.ports))
        sandbox.bind(agent.final(), request.state)

    async def _start_cold(
        self,
        client: Any,
        runtimes: frozenset[str],
        shape: DockerShape,
        request: SandboxRequest,
        credentials: ResolvedCredentials,
        sink: SandboxEventSink | None,
        labels: Mapping[str, str] | None = None,
    ) -> DockerInstance:
        """A sandbox started for this job alone (``labels``: instead of the job's), its
        credentials in place, ready to execute."""
        plan = request.plan
        await asyncio.to_thread(require_image, client, shape.image)
        job = dict(labels) if labels is not None else {LABEL_JOB: request.job} if request.job else {}
        sandbox = DockerInstance(client, self.state_dir, labels=job, start_timeout=self.start_timeout)
        wiring = EgressWiring(
            client=client,
            sandbox_id=sandbox.id,
            state_dir=self.state_dir,
            labels={**owner_labels(sandbox.id), **job},
            user=sandbox.user,
            root=sandbox.root,
            image=self.image,
            plan=plan,
            credentials=credentials,
            egress_networks=await self._egress_networks(client) if plan.needs_egress_proxy else (),
            events=sink,
            settings=self.settings,
        )
        sandbox.wiring = wiring
        await start(
            sandbox,
            partial(
                sandbox.provision,
                image=shape.image,
                limits=shape.limits,
                runtimes=runtimes,
                boundary=shape.boundary,
            ),
        )
        return sandbox

    async def open(
        self, request: SandboxRequest, *, label: str, ttl: float | None = None
    ) -> LongLivedBox[DockerInstance]:
        """A container kept for the jobs of the long-lived sandbox ``label``, started cold and
        labelled with it (and its owner, for the reaper); ``ttl`` is not enforced by the
        engine (the controller removes an idle sandbox). Its egress proxy's events go to the
        job running at the time; credential values are kept out of every output and event.

        Raises:
            EnvError: as :meth:`run` for a sandbox that cannot be provided.
        """
        agent = request.agent.spec
        refuse_placement(request.placement, "docker")
        client, runtimes = await self._prepare()
        shape = self._shape(request.environment, request.plan, runtimes)
        credentials = await resolve_credentials(request.plan, self.secrets)
        relay = EventRelay()
        began = time.monotonic()
        labels = {LABEL_SESSION: label}
        sandbox = await self._start_cold(client, runtimes, shape, request, credentials, relay, labels)
        sandbox_observer().provisioned(
            "docker", isolation_of(request.environment), "cold", time.monotonic() - began
        )

        async def bind(state: tuple[tuple[Scope, str, Any], ...]) -> None:
            await self._bind_cold(sandbox, request.model_copy(update={"state": state}))

        try:
            await bind(())
        except BaseException:
            await sandbox.teardown()
            raise
        return proxied_box(
            sandbox,
            label=label,
            bind=bind,
            relay=relay,
            credentials=credentials,
            agent=agent,
            turn_timeout=self.turn_timeout,
            grace=self.timeout_grace,
        )

    async def ensure_gone(self, job: str) -> None:
        """Before ``job`` resumes: remove a dead controller's sandboxes and every container of
        ``job``, and confirm they are gone (see :mod:`._resume`).

        Raises:
            EnvError: ``provision_failed`` when that cannot be confirmed.
        """
        client, _ = await self._prepare()
        await asyncio.to_thread(ensure_job_gone, client, self.state_dir, job)

    async def host_address(self) -> str:
        """The host's address on the (first) egress network: where a service on this host
        (e.g. the local model server) is reachable from the egress proxy.

        Raises:
            EnvError: ``provision_failed`` when the egress network has no gateway address.
        """
        client, _ = await self._prepare()
        names = await self._egress_networks(client)

        def gateway() -> str | None:
            return network_gateway(client.networks.get(names[0]))

        address = await call_engine(gateway)
        if not address:
            raise EnvError.provision_failed(
                f"the egress network {names[0]} has no gateway address; a service on this host "
                "cannot be reached from the sandbox"
            )
        return address

    async def _egress_networks(self, client: Any) -> tuple[str, ...]:
        if self.egress_networks is not None:
            return self.egress_networks
        async with self._ready:
            if not self._egress_ready:
                await call_engine(ensure_egress_network, client, EGRESS_NETWORK)
                self._egress_ready = True
        return (EGRESS_NETWORK,)

    async def _prepare(self) -> tuple[Any, frozenset[str]]:
        async with self._ready:
            if self._client is None:
                self._client = await asyncio.to_thread(docker_client)
            if self._runtimes is None:
                info = await call_engine(self._client.info)
                self._runtimes = frozenset((info.get("Runtimes") or {}).keys())
            if self._sweep and self.swept is None:
                self.swept = await asyncio.to_thread(reap_orphans, self._client, self.state_dir)
                if self.swept.removed:
                    _log.info("removed orphaned sandboxes: %s", self.swept)
            return self._client, self._runtimes
