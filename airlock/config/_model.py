"""The compiled configuration: one AgentConfig per agent, ready for an Environment."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from airlock.errors import ConfigError
from airlock.policy.approval import ApprovalPolicy
from airlock.policy.durability import DurabilityPolicy
from airlock.policy.effects import EffectPolicy
from airlock.policy.input_files import InputFilesPolicy
from airlock.policy.plan import SandboxPlan, SidecarRoute, compile_plan
from airlock.sandbox import Placement, PoolSettings, backend_names
from airlock.spec import AgentSpec
from layer0 import (
    CredentialInjection,
    CredentialRef,
    EnvironmentSpec,
    NetworkPolicy,
    NetworkRule,
    TurnConfig,
)

from ._schema import LOCAL_MODEL, Backend, SecretSource

if TYPE_CHECKING:
    from airlock.sandbox import Backend as SandboxBackend


class AgentConfig(BaseModel):
    """One agent: its AgentSpec, its sandbox (EnvironmentSpec + backend) and its turn defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    #: The turn blueprint (its ``defaults`` equal :attr:`defaults`).
    spec: AgentSpec
    #: Isolation, network allow-list, credentials (by name) and resource limits.
    environment: EnvironmentSpec
    backend: Backend
    #: max_turns / max_cost / max_duration after merging the top-level defaults.
    defaults: TurnConfig
    #: Routes for sidecar credentials written in the configuration (by secret name).
    sidecar_routes: dict[str, SidecarRoute] = Field(default_factory=dict)
    #: The effects its turns may declare; the controller refuses any other.
    effects: EffectPolicy = Field(default_factory=EffectPolicy)
    #: Who approves its gated tool calls (None: no call waits); the gate is ``spec.approval``.
    approval: ApprovalPolicy | None = None
    #: What becomes of its jobs when their sandbox or controller is lost mid-turn.
    durability: DurabilityPolicy = Field(default_factory=DurabilityPolicy)
    #: What its jobs' messages say of their input files.
    input_files: InputFilesPolicy = Field(default_factory=InputFilesPolicy)
    #: Where its sandboxes are scheduled, over the backend's placement: its node selector
    #: merged over the backend's (it wins per key), its tolerations after the backend's; its
    #: RuntimeClass only with ``container`` isolation.
    placement: Placement = Field(default_factory=Placement)
    #: Sources of the secrets this agent's credentials name (a subset of ``secrets:``).
    secrets: dict[str, SecretSource] = Field(default_factory=dict)
    #: The file and 1-based line the agent is defined at.
    source: Path
    line: int

    @property
    def uses_local_model(self) -> bool:
        """Whether ``base_url`` or a network rule names the ``local-model`` placeholder."""
        rules = self.environment.network.rules if self.environment.network else []
        return self.spec.provider.base_url == LOCAL_MODEL or any(r.destination == LOCAL_MODEL for r in rules)

    def plan(self) -> SandboxPlan:
        """The compiled network/credential plan (what ``airlock agents show`` prints).

        Raises:
            PolicyError: never for a loaded configuration (it was compiled at load time),
                but possible after :meth:`with_local_model` names a disallowed address.
        """
        return compile_plan(self.environment, sidecar_routes=self.sidecar_routes)

    def with_local_model(
        self,
        base_url: str,
        *,
        credential: str | None = None,
        header: str = "authorization",
        value_prefix: str = "Bearer ",
    ) -> AgentConfig:
        """This agent with the ``local-model`` placeholder resolved to a running server.

        ``provider.base_url: local-model`` becomes ``base_url``; each network rule whose
        destination is ``local-model`` becomes the URL's host (an IP literal as a one-address
        CIDR, so a private or bridge address is granted explicitly) with the rule's port, or
        else the URL's port.

        With ``credential`` (the server's API key, by name) the key reaches the server only
        through the credential proxy: the environment gains a sidecar credential of that name,
        and :attr:`sidecar_routes` a route to the server's origin (``scheme://host[:port]``)
        sending ``header: value_prefix + key``. ``base_url`` lies below that origin, so the
        environment points the provider at the proxy; the sandbox never holds the key.

        Raises:
            ConfigError: ``base_url`` is not an http(s) URL with a host, or ``credential``
                is already used by the agent for something else.
        """
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"local model URL {base_url!r} must be an http(s) URL with a host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname
        try:
            ip = ipaddress.ip_address(host)
            destination = f"{ip}/{ip.max_prefixlen}"
        except ValueError:
            destination = host
        spec = self.spec
        if spec.provider.base_url == LOCAL_MODEL:
            provider = spec.provider.model_copy(update={"base_url": base_url})
            spec = spec.model_copy(update={"provider": provider})
        environment = self.environment
        if environment.network is not None:
            rules = [
                NetworkRule(destination=destination, port=r.port or port, action=r.action)
                if r.destination == LOCAL_MODEL
                else r
                for r in environment.network.rules
            ]
            network = NetworkPolicy(default=environment.network.default, rules=rules)
            environment = environment.model_copy(update={"network": network})
        routes = self.sidecar_routes
        if credential is not None:
            if any(c.name == credential for c in environment.credentials) or credential in routes:
                raise ConfigError(
                    f"agent {self.name!r}: credential {credential!r} is reserved for the local model's key"
                )
            # The origin exactly as base_url spells it, so base_url lies below the upstream.
            netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
            route = SidecarRoute(
                upstream=f"{parts.scheme}://{netloc}", header=header, value_prefix=value_prefix
            )
            ref = CredentialRef(name=credential, injection=CredentialInjection.sidecar())
            environment = environment.model_copy(update={"credentials": [*environment.credentials, ref]})
            routes = {**routes, credential: route}
        return self.model_copy(update={"spec": spec, "environment": environment, "sidecar_routes": routes})


class AirlockConfig(BaseModel):
    """Every agent defined by the loaded files, plus the declared secret sources."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: The files read, in order.
    files: tuple[Path, ...]
    agents: dict[str, AgentConfig]
    secrets: dict[str, SecretSource] = Field(default_factory=dict)
    #: Each backend's ``backends.<name>`` section (an instance of ``Backend.settings``).
    backend_settings: dict[str, SerializeAsAny[BaseModel]] = Field(default_factory=dict)
    #: Warm sandboxes kept per sandbox shape (the ``pool`` section; ``size: 0``: none).
    pool: PoolSettings = Field(default_factory=PoolSettings)

    def settings_of(self, backend: str) -> BaseModel | None:
        """The configured settings of ``backend`` (None: its defaults)."""
        return self.backend_settings.get(backend)

    def on_backend(self, name: str) -> AirlockConfig:
        """This configuration with every agent on backend ``name`` (``airlock serve --backend``).

        Raises:
            ConfigError: an unknown backend, or one that cannot provide an agent's isolation or
                placement, or enforce its network policy, credentials or resource limits (every
                such agent named).
        """
        from airlock.sandbox import backend

        target = backend(name) if name in backend_names() else None
        if target is None:
            raise ConfigError(f"unknown backend {name!r}; valid backends: {', '.join(backend_names())}")
        problems = [
            f"agent {agent.name!r}: {problem}"
            for agent in self.agents.values()
            for problem in _unprovidable(agent.environment, target, agent.placement)
        ]
        if problems:
            raise ConfigError(f"cannot run every agent on backend {name!r}:\n  " + "\n  ".join(problems))
        agents = {n: a.model_copy(update={"backend": name}) for n, a in self.agents.items()}
        return self.model_copy(update={"agents": agents})

    def agent(self, name: str) -> AgentConfig:
        """The agent called ``name``.

        Raises:
            ConfigError: no such agent (the message lists the defined ones).
        """
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none"
            raise ConfigError(f"unknown agent {name!r}; defined agents: {known}") from None


def _unprovidable(
    environment: EnvironmentSpec, target: SandboxBackend, placement: Placement | None = None
) -> list[str]:
    """What ``environment`` (placed by ``placement``) asks that backend ``target`` cannot
    provide or enforce."""
    problems = [
        f"isolation {b.type} is not provided by {target.name} ({target.summary})"
        for b in environment.isolation
        if b.type not in target.isolations and b.type != "network_policy"
    ]
    wants = {
        "network_policy": environment.network is not None
        or any(b.type == "network_policy" for b in environment.isolation),
        "credentials": bool(environment.credentials),
        "resource_limits": environment.resources is not None,
    }
    problems += [
        f"{target.name} cannot enforce its {capability.replace('_', ' ')}"
        for capability, wanted in wants.items()
        if wanted and not getattr(target.capabilities, capability)
    ]
    if placement is not None and not placement.empty and not target.capabilities.placement:
        problems.append(f"{target.name} cannot place its sandboxes (its placement)")
    return problems
