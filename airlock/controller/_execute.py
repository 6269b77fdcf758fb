"""AgentRunner: one configured agent's turn in its own environment (the controller's and
``airlock run``'s shared path from an AgentConfig to a TurnOutput)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airlock.build import build_turn
from airlock.spec import AgentSpec
from layer0 import EnvError, Scope, TurnInput, TurnOutput

if TYPE_CHECKING:
    from airlock.config import AgentConfig, AirlockConfig
    from airlock.localmodel import LocalModelServer
    from airlock.policy.plan import SidecarRoute
    from airlock.policy.secrets import SecretResolver
    from airlock.sandbox._turn import EventSink
    from airlock.sandbox.docker import DockerEnvironment
    from airlock.sandbox.process import LocalProcessEnvironment

_log = logging.getLogger("airlock.jobs")

#: The name of the local model server's API key: a sidecar credential of the agent, so the
#: key is added by the credential proxy and never enters the sandbox.
LOCAL_MODEL_CREDENTIAL = "local-model-key"

#: A read-only state snapshot handed to a turn: ``(scope, key, value)``.
StateSnapshot = Iterable[tuple[Scope, str, Any]]


def inline_script(spec: AgentSpec) -> AgentSpec:
    """A scripted provider's script file read here, on the controller, and put into the spec.

    The runner rebuilds the turn inside the sandbox, where host paths do not exist.

    Raises:
        SpecError: the script file is missing or invalid.
    """
    p = spec.provider
    if p.kind != "scripted" or not isinstance(p.script, str) or p.script.lstrip().startswith(("[", "{")):
        return spec
    from airlock.providers import load_script

    script = load_script(Path(p.script)).model_dump(mode="json")
    return spec.model_copy(update={"provider": p.model_copy(update={"script": script})})


def make_environment(
    backend: str,
    *,
    secrets: SecretResolver | None = None,
    sidecar_routes: Mapping[str, SidecarRoute] | None = None,
    **options: Any,
) -> DockerEnvironment | LocalProcessEnvironment:
    """The Environment for an agent's ``backend`` (docker or process).

    ``secrets`` resolves the agent's credentials and ``sidecar_routes`` are its configured
    sidecar routes (docker only: the process backend injects no credentials and refuses a
    spec that names some). ``options`` go to DockerEnvironment (e.g. ``sweep``, ``state_dir``).

    Raises:
        EnvError: ``other`` for a backend this controller cannot run.
    """
    if backend == "docker":
        from airlock.sandbox.docker import DockerEnvironment

        return DockerEnvironment(secrets=secrets, sidecar_routes=sidecar_routes, **options)
    if backend == "process":
        from airlock.sandbox.process import LocalProcessEnvironment

        return LocalProcessEnvironment()
    raise EnvError.other(
        f"backend {backend!r} cannot be run by `airlock run` or `airlock serve` (they run docker "
        "and process agents); change the agent's backend"
    )


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

    One environment per agent is kept (its Docker client and runtime probe are reused); the
    managed local model server is started on first use by an agent that names ``local-model``
    and stopped by :meth:`aclose` if this runner started it.

    Args:
        config: the loaded configuration.
        state_dir: sandboxes' control directories (default: the DockerEnvironment's).
        image: the runner image (default: the current build's tag).
        workspace: the host-side workspace turns are built with (sandboxed turns use their
            own; default: a temporary directory removed by :meth:`aclose`).
    """

    def __init__(
        self,
        config: AirlockConfig,
        *,
        state_dir: Path | None = None,
        image: str | None = None,
        workspace: Path | None = None,
    ) -> None:
        self.config = config
        self.state_dir = state_dir
        self.image = image
        self._envs: dict[str, DockerEnvironment | LocalProcessEnvironment] = {}
        self._keys: dict[str, LocalModelKey] = {}
        self._local_model: LocalModelServer | None = None
        self._local_lock = asyncio.Lock()
        self._own_workspace = workspace is None
        self._workspace = (
            workspace if workspace is not None else Path(tempfile.mkdtemp(prefix="airlock-jobs-"))
        )

    def agent(self, name: str) -> AgentConfig:
        """The configured agent ``name``.

        Raises:
            ConfigError: no such agent (the message lists the defined ones).
        """
        return self.config.agent(name)

    def _environment(self, agent: AgentConfig) -> DockerEnvironment | LocalProcessEnvironment:
        env = self._envs.get(agent.name)
        if env is None:
            from airlock.config import ConfigSecretResolver
            from airlock.policy.secrets import ChainResolver

            key = self._keys.setdefault(agent.name, LocalModelKey())
            options: dict[str, Any] = {"sweep": False}
            if self.state_dir is not None:
                options["state_dir"] = self.state_dir
            if self.image is not None:
                options["image"] = self.image
            env = make_environment(
                agent.backend,
                secrets=ChainResolver(key, ConfigSecretResolver(agent.secrets)),
                sidecar_routes=agent.sidecar_routes,
                **options,
            )
            self._envs[agent.name] = env
        return env

    async def prepare(self, agent: AgentConfig) -> None:
        """Bring up what ``agent``'s jobs share before any of them runs: the managed local
        model (a download and a wheel compile the first time on a machine: minutes). Callers
        run this outside a job's ``max_duration``, which is the agent's own time.

        Raises:
            EnvError: the local model could not be prepared or started.
        """
        if agent.uses_local_model:
            await self._local_model_server(self._environment(agent))

    async def _local_model_server(self, env: object) -> LocalModelServer:
        from airlock.localmodel import DEFAULT_HOST, LocalModelServer
        from airlock.sandbox.docker import DockerEnvironment

        async with self._local_lock:
            if self._local_model is None:
                host = DEFAULT_HOST
                if isinstance(env, DockerEnvironment):
                    gateway = await env.egress_gateway()
                    if not gateway:
                        raise EnvError.provision_failed(
                            "the egress network has no gateway address; the local model server "
                            "cannot be reached from the sandbox"
                        )
                    host = gateway
                server = LocalModelServer(host=host)
                if await server.running() is None:
                    _log.info("local model: preparing the model and its runtime (may download once)")
                    await server.ensure_ready()
                await server.start()
                self._local_model = server
            return self._local_model

    async def _with_local_model(self, agent: AgentConfig, env: object) -> AgentConfig:
        from airlock.sandbox.docker import DockerEnvironment

        info = (await self._local_model_server(env)).info
        if info is None:  # pragma: no cover - start() sets it
            raise EnvError.provision_failed("the local model server did not report its address")
        if isinstance(env, DockerEnvironment) and info.api_key:
            self._keys[agent.name].key = info.api_key
            return agent.with_local_model(info.base_url, credential=LOCAL_MODEL_CREDENTIAL)
        return agent.with_local_model(info.base_url)

    async def run(
        self,
        agent: AgentConfig,
        input: TurnInput,
        *,
        events: EventSink | None = None,
        state: StateSnapshot | None = None,
    ) -> TurnOutput:
        """One turn of ``agent`` in a fresh sandbox; ``state`` is its read-only snapshot.

        Raises:
            EnvError: the sandbox could not be provisioned, or its turn failed.
            SpecError: the agent's scripted provider names an unreadable script.
        """
        from airlock.sandbox.docker import DockerEnvironment

        env = self._environment(agent)
        if agent.uses_local_model:
            agent = await self._with_local_model(agent, env)
        turn = build_turn(inline_script(agent.spec), workspace=self._workspace)
        if isinstance(env, DockerEnvironment):
            return await env.run(
                turn,
                input,
                agent.environment,
                events=events,
                sidecar_routes=agent.sidecar_routes,
                state=state,
            )
        return await env.run(turn, input, agent.environment, events=events, state=state)

    async def reap(self) -> Any:
        """Remove sandboxes whose controller process is gone; the ReapReport (None without Docker)."""
        from airlock.images._dockerapi import docker_client
        from airlock.sandbox.docker import reap_orphans

        try:
            client = await asyncio.to_thread(docker_client)
        except EnvError:
            return None
        return await asyncio.to_thread(reap_orphans, client, self.state_dir)

    async def aclose(self) -> None:
        """Stop the local model server if this runner started it."""
        server, self._local_model = self._local_model, None
        if server is not None and server.started_here:
            with contextlib.suppress(Exception):
                await server.stop()
        if self._own_workspace:
            await asyncio.to_thread(shutil.rmtree, self._workspace, True)
