"""The compiled configuration: one AgentConfig per agent, ready for an Environment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from airlock.behaviour.approval import ApprovalPolicy
from airlock.behaviour.durability import DurabilityPolicy
from airlock.behaviour.input_files import InputFilesPolicy
from airlock.errors import ConfigError
from airlock.identity import AuthSettings, RetentionSettings
from airlock.policy.effects import EffectPolicy
from airlock.policy.plan import SandboxPlan, SidecarRoute, compile_plan
from airlock.sandbox import Placement, PoolSettings, RunningAgent, backend_names, names_local_model
from airlock.spec import AgentSpec
from layer0 import (
    EnvironmentSpec,
)

from ._schema import Backend, SecretSource
from ._tree_budget import TreeBudget

if TYPE_CHECKING:
    from airlock.sandbox import Backend as SandboxBackend


class AgentConfig(BaseModel):
    """One agent: its AgentSpec, its sandbox (EnvironmentSpec + backend) and its turn defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    #: The turn blueprint (its ``defaults``: max_turns / max_cost / max_duration after
    #: merging the top-level defaults).
    spec: AgentSpec
    #: Isolation, network allow-list, credentials (by name) and resource limits.
    environment: EnvironmentSpec
    backend: Backend
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
    #: What a delegation tree rooted at this agent may spend in total (None: no tree limit).
    tree_budget: TreeBudget | None = None
    #: Sources of the secrets this agent's credentials name (a subset of ``secrets:``).
    secrets: dict[str, SecretSource] = Field(default_factory=dict)
    #: The file and 1-based line the agent is defined at.
    source: Path
    line: int

    @property
    def uses_local_model(self) -> bool:
        """Whether ``base_url`` or a network rule names the ``local-model`` placeholder."""
        return names_local_model(self.spec, self.environment)

    def plan(self) -> SandboxPlan:
        """The compiled network/credential plan (what ``airlock agents show`` prints).

        Raises:
            PolicyError: never for a loaded configuration (it was compiled at load time),
                but possible for a running agent whose local model has a disallowed address.
        """
        return compile_plan(self.environment, sidecar_routes=self.sidecar_routes)

    def running(self) -> RunningAgent:
        """The start of the agent as it will run (its steps: :class:`~airlock.sandbox.RunningAgent`)."""
        return RunningAgent.of(self.spec, self.environment, self.sidecar_routes)


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
    #: Who may call the controller (the ``auth`` section; unset: the bootstrap token only).
    auth: AuthSettings = Field(default_factory=AuthSettings)
    #: How long finished jobs and audit records are kept (the ``retention`` section).
    retention: RetentionSettings = Field(default_factory=RetentionSettings)

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
