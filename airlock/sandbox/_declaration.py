"""What a backend declares about itself: capabilities, doctor checks, its factory."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from airlock.policy import SandboxPlan, SecretResolver
from layer0 import EnvironmentSpec, IsolationBoundary

from ._placement import Placement
from ._pool import WarmPool
from ._port import Sandbox

__all__ = ["Backend", "Capabilities", "DoctorCheck", "Reaped", "Reaper"]


class Reaped(Protocol):
    """What a sweep of leftover sandboxes removed, and what it could not."""

    @property
    def removed(self) -> int:
        """How many objects were removed."""
        ...

    @property
    def errors(self) -> list[str]:
        """What could not be removed, and why."""
        ...

    def items(self) -> list[tuple[str, str]]:
        """``(kind, name)`` of each removed object (``("container", "sb-…")``)."""
        ...

    def summary(self) -> str:
        """One line: how many objects of each kind were removed."""
        ...


class Reaper(Protocol):
    """Removes the sandboxes a dead controller left behind (``include_live``: every one of
    ours); None when the backend's engine is unreachable."""

    def __call__(
        self, state_dir: Path | None = None, *, include_live: bool = False, settings: BaseModel | None = None
    ) -> Awaitable[Reaped | None]:
        """Sweep (``settings``: the backend's section of the configuration, None: its defaults)."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What a backend enforces; config refuses an agent asking a backend for more."""

    #: Egress is limited to the spec's network policy (else the sandbox has the host's network).
    network_policy: bool
    #: cpu / memory / disk / gpu limits are enforced.
    resource_limits: bool
    #: Credentials can be injected (env_var, file and sidecar).
    credentials: bool
    #: How a sandbox reaches a model endpoint on this host: through its egress proxy to the
    #: host's address on the egress network (a sidecar credential carries the key), or on
    #: loopback (the runner is a process of this host).
    model_endpoint: Literal["egress_proxy", "loopback"]
    #: In-cluster Service destinations (``{service, namespace, port}`` rules) are rendered.
    cluster_services: bool = False
    #: An agent's ``placement`` (node selector, tolerations, RuntimeClass) is honoured.
    placement: bool = False


@dataclass(frozen=True)
class DoctorCheck:
    """One finding of ``airlock doctor``."""

    name: str
    status: Literal["ok", "warning", "error"]
    message: str
    #: What to do about it (empty when ok).
    hint: str = ""


@dataclass(frozen=True)
class Backend:
    """One sandbox backend as the rest of airlock sees it."""

    name: str
    #: One line for listings (``airlock doctor``, config errors).
    summary: str
    #: Isolation boundary types it can provide (``EnvironmentSpec.isolation[].type``).
    isolations: frozenset[str]
    #: The boundaries an agent gets when its config names none.
    default_isolation: tuple[IsolationBoundary, ...]
    capabilities: Capabilities
    #: Builds a sandbox: ``factory(secrets=, state_dir=, image=, sweep=, settings=, pool=)``
    #: (see :meth:`create`).
    factory: Callable[..., Sandbox] = field(repr=False)
    #: This machine's readiness for the backend (engine or cluster reachable, image, runtimes),
    #: given its settings (None: its defaults).
    doctor: Callable[[BaseModel | None], Awaitable[list[DoctorCheck]]] = field(repr=False)
    #: Removes sandboxes a dead controller left behind (None: it leaves none outside a run).
    reap: Reaper | None = field(default=None, repr=False)
    #: The model of its ``backends.<name>`` section in ``airlock.yaml`` (None: it takes no settings).
    settings: type[BaseModel] | None = None
    #: The objects a compiled plan becomes on this backend, as the cluster would receive them
    #: (``airlock agents show``; e.g. Kubernetes NetworkPolicies). None: nothing beyond the plan.
    policy_objects: Callable[[SandboxPlan, BaseModel | None], list[dict[str, Any]]] | None = field(
        default=None, repr=False
    )

    #: The image an agent's sandboxes run from, given its environment, when this machine's Docker
    #: engine runs them (the image a custom-tool check can ask here). None: they run elsewhere.
    #: Raises ``EnvError`` for an isolation the backend refuses.
    local_image: Callable[[EnvironmentSpec], str] | None = field(default=None, repr=False)

    #: An install-time proof of isolation against a live deployment, named by a backend-specific
    #: target (Kubernetes: a Helm release, ``namespace/name``): ``airlock doctor --probe``.
    #: None: the backend has none.
    probe: Callable[[BaseModel | None, str], Coroutine[Any, Any, list[DoctorCheck]]] | None = field(
        default=None, repr=False
    )

    #: Its settings given the placements of the agents that run on it (None: it needs none of
    #: them; Kubernetes: their RuntimeClasses become readable by name).
    placed_settings: Callable[[BaseModel | None, Sequence[Placement]], BaseModel] | None = field(
        default=None, repr=False
    )

    def create(
        self,
        *,
        secrets: SecretResolver | None = None,
        state_dir: Path | None = None,
        image: str | None = None,
        sweep: bool = False,
        settings: BaseModel | None = None,
        pool: WarmPool[Any] | None = None,
    ) -> Sandbox:
        """A sandbox of this backend: ``secrets`` resolves the agents' credentials; ``state_dir``
        (its control directories) and ``image`` (the runner image) apply where the backend
        has such things (None: its defaults); ``sweep`` removes what dead owners left behind
        before its first run (a one-shot command's start-up sweep); ``settings`` is its
        section of the configuration (an instance of :attr:`settings`; None: its defaults);
        ``pool`` is the warm pool its sandboxes share, where the backend keeps one (one per
        backend and controller: see :class:`~._pool.WarmPool`)."""
        return self.factory(
            secrets=secrets, state_dir=state_dir, image=image, sweep=sweep, settings=settings, pool=pool
        )
