"""AgentRunner: one configured agent's turn in its own sandbox (the controller's and
``airlock run``'s shared path from an AgentConfig to a TurnOutput)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.config import ConfigSecretResolver
from airlock.policy import ChainResolver
from airlock.sandbox import (
    ClosableSandbox,
    IsolationProof,
    LongLivedBox,
    LongLivedSandbox,
    PoolStats,
    ProvingSandbox,
    ResumableSandbox,
    RunningAgent,
    Sandbox,
    SandboxEvent,
    SandboxEventSink,
    SandboxRequest,
    TurnHandle,
    WarmableSandbox,
    WarmPool,
    backend,
    backends,
    compile_sandbox_plan,
)
from layer0 import EnvError, Scope, TurnInput, TurnOutput

from ._observer import controller_observer

if TYPE_CHECKING:
    from airlock.config import AgentConfig, AirlockConfig
    from airlock.localmodel import LocalModelServer, ProgressCallback

_log = logging.getLogger("airlock.jobs")

#: The name of the local model server's API key: a sidecar credential of the agent, so the
#: key is added by the credential proxy and never enters the sandbox.
LOCAL_MODEL_CREDENTIAL = "local-model-key"


class LocalModelKey:
    """A SecretResolver holding the local model server's API key under one name.

    Created before the server starts (the environment needs its resolver first) and given
    the key once the server is up; the key never leaves the controller.
    """

    def __init__(self, name: str = LOCAL_MODEL_CREDENTIAL) -> None:
        self.name = name
        self.key: str | None = None

    async def get(self, name: str) -> str | None:
        """The server's key for :attr:`name` (None before the server started, or another name)."""
        return self.key if name == self.name else None

    def describe(self, name: str) -> str:
        """Where the key comes from."""
        return "the local model server's state" if name == self.name else f"not the local model key ({name})"


class AgentRunner:
    """Runs turns of a configuration's agents, each in a fresh sandbox with its own policy.

    The one path from an AgentConfig to a TurnOutput, shared by ``airlock serve`` and
    ``airlock run``: the agent's backend from the registry, the agent as it will run built
    (:meth:`running`: its script inlined, the managed local model brought up where that
    backend's sandboxes reach it), the state snapshot and the sink handed over in one
    :class:`~airlock.sandbox.SandboxRequest`.

    One sandbox backend instance per agent is kept (its engine client and runtime probe are
    reused); the managed local model server is started on first use by an agent that names
    ``local-model`` and stopped by :meth:`aclose` if this runner started it. With a ``pool``
    configured, each backend gets one warm pool shared by all its agents (:meth:`warm` fills
    it; :meth:`aclose` empties it).

    Args:
        config: the loaded configuration.
        state_dir: sandboxes' control directories (default: the backend's).
        image: the runner image (default: the current build's tag).
        sweep: each backend removes the sandboxes dead owners left behind before its first
            run (``airlock run``; ``airlock serve`` sweeps when it recovers at start-up).
        progress: receives the local model's one-time set-up progress (download, build).
        observe: also receives every sandbox event of every turn this runner runs (e.g. a
            live view), before the job's own sink.
    """

    def __init__(
        self,
        config: AirlockConfig,
        *,
        state_dir: Path | None = None,
        image: str | None = None,
        sweep: bool = False,
        progress: ProgressCallback | None = None,
        observe: SandboxEventSink | None = None,
    ) -> None:
        self.config = config
        self.state_dir = state_dir
        self.image = image
        self.sweep = sweep
        self.progress = progress
        self.observe = observe
        self._sandboxes: dict[str, Sandbox] = {}
        self._keys: dict[str, LocalModelKey] = {}
        self._local_model: LocalModelServer | None = None
        self._local_lock = asyncio.Lock()
        self._pools: dict[str, WarmPool[Any]] = {}

    def agent(self, name: str) -> AgentConfig:
        """The configured agent ``name``.

        Raises:
            ConfigError: no such agent (the message lists the defined ones).
        """
        return self.config.agent(name)

    @property
    def local_model(self) -> LocalModelServer | None:
        """The managed local model server in use (None until an agent needed it)."""
        return self._local_model

    def _sandbox(self, agent: AgentConfig) -> Sandbox:
        sandbox = self._sandboxes.get(agent.name)
        if sandbox is None:
            key = self._keys.setdefault(agent.name, LocalModelKey())
            sandbox = backend(agent.backend).create(
                secrets=ChainResolver(key, ConfigSecretResolver(agent.secrets)),
                state_dir=self.state_dir,
                image=self.image,
                sweep=self.sweep,
                settings=self.config.settings_of(agent.backend),
                pool=self._pool(agent.backend),
            )
            self._sandboxes[agent.name] = sandbox
        return sandbox

    def _pool(self, backend_name: str) -> WarmPool[Any] | None:
        if self.config.pool.size == 0:
            return None
        pool = self._pools.get(backend_name)
        if pool is None:
            pool = self._pools[backend_name] = WarmPool(self.config.pool, name=backend_name)
        return pool

    async def warm(self) -> list[str]:
        """Keep sandboxes for every agent's sandbox shape started in its backend's pool (none
        when ``pool.size`` is 0); one line per agent whose sandboxes are not pooled, and why."""
        skipped: list[str] = []
        if self.config.pool.size == 0:
            return skipped
        for agent in self.config.agents.values():
            sandbox = self._sandbox(agent)
            if agent.uses_local_model or not isinstance(sandbox, WarmableSandbox):
                why = "its model endpoint needs a network" if agent.uses_local_model else "no warm pool"
                skipped.append(f"{agent.name}: {agent.backend}: {why}")
                continue
            try:
                plan = compile_sandbox_plan(agent.environment, agent.sidecar_routes)
                if not await sandbox.warm(agent.environment, plan, agent.placement):
                    skipped.append(f"{agent.name}: {agent.backend} keeps no pool for it")
            except EnvError as e:
                skipped.append(f"{agent.name}: {e}")
        return skipped

    async def pools_ready(self, timeout: float = 60.0) -> bool:  # noqa: ASYNC109
        """Wait until every pool holds its ``size`` of each declared shape; False on timeout."""
        results = await asyncio.gather(*(p.wait_ready(timeout) for p in self._pools.values()))
        return all(results)

    def pool_stats(self) -> dict[str, PoolStats]:
        """Each backend's warm pool statistics (empty without a pool)."""
        return {name: pool.stats() for name, pool in self._pools.items()}

    async def prepare(self, agent: AgentConfig) -> None:
        """Bring up what ``agent``'s jobs share before any of them runs: the managed local
        model (a download and a wheel compile the first time on a machine: minutes). Callers
        run this outside a job's ``max_duration``, which is the agent's own time.

        Raises:
            EnvError: the local model could not be prepared or started.
        """
        if agent.uses_local_model:
            await self._local_model_server(self._sandbox(agent))

    async def _local_model_server(self, sandbox: Sandbox) -> LocalModelServer:
        """Start (or reuse) the managed local model where ``sandbox``'s sandboxes reach it.

        A server of ours already listening there is reused (and left running); when something
        else holds the default port there, the server picks a free one.
        """
        from airlock.localmodel import DEFAULT_PORT, LocalModelServer  # ~0.3 s: only when used

        async with self._local_lock:
            if self._local_model is None:
                host = await sandbox.host_address()
                server = LocalModelServer(host=host)
                running = await server.running()
                if running is None:
                    _log.info("local model: preparing the model and its runtime (may download once)")
                    await server.ensure_ready(self.progress)
                port = None if running is not None or await _bindable(host, DEFAULT_PORT) else 0
                await server.start(port=port)
                self._local_model = server
            return self._local_model

    async def running(self, agent: AgentConfig) -> RunningAgent:
        """``agent`` as it will run, built once per execution: its script inlined, then its
        local model resolved (started first if need be); the last step, the sidecar routes,
        is the backend's.

        Raises:
            SpecError: the agent's scripted provider names an unreadable script.
            EnvError: the local model could not be started.
        """
        running = agent.running().with_inline_script()
        if not agent.uses_local_model:
            return running
        info = (await self._local_model_server(self._sandbox(agent))).info
        if info is None:  # pragma: no cover - start() sets it
            raise EnvError.provision_failed("the local model server did not report its address")
        through_proxy = backend(agent.backend).capabilities.model_endpoint == "egress_proxy"
        if through_proxy and info.api_key:
            self._keys[agent.name].key = info.api_key
            return running.with_local_model(info.base_url, credential=LOCAL_MODEL_CREDENTIAL)
        return running.with_local_model(info.base_url)

    async def run(
        self,
        agent: AgentConfig,
        input: TurnInput,
        *,
        events: SandboxEventSink | None = None,
        state: Iterable[tuple[Scope, str, Any]] = (),
        handle: TurnHandle | None = None,
        job: str | None = None,
    ) -> TurnOutput:
        """One turn of ``agent`` (as it will run: :meth:`running`) in a fresh sandbox;
        ``state`` is its read-only snapshot; ``handle`` the snapshot it resumes from and its
        controls while it runs; ``job`` the job it belongs to (its sandbox is labelled with
        it: see :meth:`ensure_gone`).

        Raises:
            EnvError: the sandbox could not be provisioned, or its turn failed.
            SpecError: the agent's scripted provider names an unreadable script.
        """
        sandbox = self._sandbox(agent)
        request = SandboxRequest.of(
            await self.running(agent),
            input,
            state=state,
            events=_both(self.observe, events),
            handle=handle,
            job=job,
            placement=agent.placement,
        )
        return await sandbox.run(request)

    async def open_box(self, agent: AgentConfig, *, label: str, ttl: float | None) -> LongLivedBox[Any]:
        """A box of ``agent`` (as it will run: :meth:`running`) kept for jobs run one after
        another (a long-lived sandbox ``label``); ``ttl``: the longest it may live, where its
        backend bounds it.

        Raises:
            EnvError: ``provision_failed`` when the agent's backend cannot keep a box; else as
                :meth:`run`.
        """
        sandbox = self._sandbox(agent)
        if not isinstance(sandbox, LongLivedSandbox):
            raise EnvError.provision_failed(
                f"agent {agent.name}: backend {agent.backend} cannot keep a sandbox for several jobs"
            )
        request = SandboxRequest.of(
            await self.running(agent),
            TurnInput.new(f"sandbox {label} opened"),
            events=self.observe,
            placement=agent.placement,
        )
        return await sandbox.open(request, label=label, ttl=ttl)

    async def ensure_gone(self, agent: AgentConfig, job: str) -> None:
        """Before ``job`` resumes: make sure its previous sandbox is gone (removed and
        confirmed), on backends whose sandboxes can outlive a controller and can find them
        by job (Docker, Kubernetes, process); other backends are not checked.

        Raises:
            EnvError: ``provision_failed`` when it cannot be confirmed gone.
        """
        sandbox = self._sandbox(agent)
        if isinstance(sandbox, ResumableSandbox):
            await sandbox.ensure_gone(job)

    async def reap(self) -> list[str]:
        """Remove sandboxes whose controller process is gone, on every backend the agents use
        that leaves some behind: one line per backend on what was removed."""
        used = {agent.backend for agent in self.config.agents.values()}
        lines = []
        for b in backends():
            if b.reap is None or b.name not in used:
                continue
            report = await b.reap(self.state_dir, settings=self.config.settings_of(b.name))
            lines.append(f"{b.name}: {report.summary() if report is not None else 'engine unreachable'}")
            controller_observer().reaped(b.name, report.removed if report is not None else 0)
        return lines

    async def isolation_proofs(self) -> list[IsolationProof]:
        """Each backend's proof of its network isolation where this configuration's agents run,
        once per backend and place (made now where none was yet; one that cannot be made at
        all, e.g. an unreachable cluster, is an ``unproven`` proof saying why)."""
        found: dict[tuple[str, str], IsolationProof] = {}
        for agent in self.config.agents.values():
            sandbox = self._sandbox(agent)
            if not isinstance(sandbox, ProvingSandbox):
                continue
            try:
                proof = await sandbox.isolation_proof()
            except EnvError as e:
                proof = IsolationProof(
                    backend=agent.backend,
                    scope="",
                    status="unproven",
                    checked_at=datetime.now(UTC),
                    reason=f"cannot prove it: {e}",
                )
            found.setdefault((proof.backend, proof.scope), proof)
        return list(found.values())

    async def aclose(self) -> None:
        """Empty the warm pools; stop the backends' background work (their sweeps); stop the
        local model server if this runner started it."""
        pools, self._pools = list(self._pools.values()), {}
        await asyncio.gather(*(p.aclose() for p in pools), return_exceptions=True)
        closable = [s for s in self._sandboxes.values() if isinstance(s, ClosableSandbox)]
        await asyncio.gather(*(s.aclose() for s in closable), return_exceptions=True)
        server, self._local_model = self._local_model, None
        if server is not None and server.started_here:
            with contextlib.suppress(Exception):
                await server.stop()


def _both(first: SandboxEventSink | None, second: SandboxEventSink | None) -> SandboxEventSink | None:
    """A sink handing each event to ``first`` and then ``second`` (either may be None)."""
    if first is None or second is None:
        return first or second
    observe, sink = first, second

    async def both(event: SandboxEvent) -> None:
        await observe(event)
        await sink(event)

    return both


async def _bindable(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (a quick probe in a thread)."""

    def probe() -> bool:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                return False
        return True

    return await asyncio.to_thread(probe)
