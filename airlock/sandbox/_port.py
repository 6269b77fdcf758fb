"""The Sandbox port: what every backend implements, and the one request it runs.

A backend (Docker, a local process, Kubernetes) runs one turn per request in a fresh sandbox
and returns its ``TurnOutput``. The request carries everything the sandbox may know: the
agent as it will run (:class:`RunningAgent`: the runner rebuilds the turn inside from it),
the input, its environment's compiled :class:`~airlock.policy.SandboxPlan` (sidecar routes
included), the read-only state snapshot the turn reads, and the sink for its events. Nothing else crosses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, Self, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue

from airlock.policy import PolicyError, SandboxPlan, SidecarRoute, compile_plan
from airlock.spec import AgentSpec
from layer0 import EnvError, EnvironmentSpec, Scope, TurnInput, TurnOutput

from ._events import SandboxEventSink
from ._handle import TurnHandle
from ._placement import Placement
from ._running import RunningAgent

if TYPE_CHECKING:
    from ._session import LongLivedBox

__all__ = [
    "ClosableSandbox",
    "LongLivedSandbox",
    "ResumableSandbox",
    "Sandbox",
    "SandboxRequest",
    "StateEntry",
    "WarmableSandbox",
    "compile_sandbox_plan",
]


class StateEntry(NamedTuple):
    """One value of the read-only state snapshot: ``(scope, key, value)``."""

    scope: Scope
    key: str
    value: JsonValue


class SandboxRequest(BaseModel):
    """One turn to run in a fresh sandbox (build it with :meth:`of`, or :meth:`compile`)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    #: The agent as it will run (its last step, the sidecar routes, is the backend's; the
    #: runner inside the sandbox builds the turn from :meth:`RunningAgent.final`).
    agent: RunningAgent
    input: TurnInput
    #: ``agent``'s network and credential parts, compiled (sidecar routes included).
    plan: SandboxPlan
    #: The state the turn may read (e.g. its session's history); the sandbox writes none.
    state: tuple[StateEntry, ...] = ()
    #: Receives the turn's events and its proxies' decisions as they happen.
    events: SandboxEventSink | None = None
    #: The snapshot the turn resumes from, and its controls while it runs (None: a turn
    #: started anew that nobody controls).
    handle: TurnHandle | None = None
    #: The job the turn belongs to: its sandbox is labelled with it, so that before the job
    #: resumes its previous sandbox can be found and removed (None: no job).
    job: str | None = None
    #: Where the sandbox is scheduled, over the backend's own placement (only a backend with
    #: the ``placement`` capability honours one; any other refuses a non-empty one).
    placement: Placement = Placement()

    @property
    def environment(self) -> EnvironmentSpec:
        """What the sandbox must provide (isolation, resources, network, credentials)."""
        return self.agent.environment

    @classmethod
    def of(
        cls,
        agent: RunningAgent,
        input: TurnInput,
        *,
        state: Iterable[tuple[Scope, str, Any]] = (),
        events: SandboxEventSink | None = None,
        handle: TurnHandle | None = None,
        job: str | None = None,
        placement: Placement | None = None,
    ) -> Self:
        """A request to run ``agent``, its plan compiled from its environment and routes.

        Raises:
            EnvError: ``isolation_violation`` listing every invalid, unsafe or contradictory
                rule or credential of the environment.
        """
        return cls(
            agent=agent,
            input=input,
            plan=compile_sandbox_plan(agent.environment, agent.sidecar_routes),
            state=tuple(StateEntry(*entry) for entry in state),
            events=events,
            handle=handle,
            job=job,
            placement=placement or Placement(),
        )

    @classmethod
    def compile(
        cls,
        agent: AgentSpec,
        input: TurnInput,
        environment: EnvironmentSpec,
        *,
        sidecar_routes: Mapping[str, SidecarRoute] | None = None,
        state: Iterable[tuple[Scope, str, Any]] = (),
        events: SandboxEventSink | None = None,
        handle: TurnHandle | None = None,
        job: str | None = None,
        placement: Placement | None = None,
    ) -> Self:
        """:meth:`of` an agent that needs no controller step (as configured: no script file
        to inline, no local model).

        Raises:
            EnvError: ``isolation_violation`` listing every invalid, unsafe or contradictory
                rule or credential of the environment.
        """
        running = RunningAgent.of(agent, environment, sidecar_routes)
        return cls.of(running, input, state=state, events=events, handle=handle, job=job, placement=placement)


def compile_sandbox_plan(
    environment: EnvironmentSpec, sidecar_routes: Mapping[str, SidecarRoute] | None = None
) -> SandboxPlan:
    """:func:`~airlock.policy.compile_plan`, its refusal as the ``EnvError`` a sandbox raises.

    Raises:
        EnvError: ``isolation_violation`` naming every problem of the policy.
    """
    try:
        return compile_plan(environment, sidecar_routes=sidecar_routes)
    except PolicyError as e:
        raise EnvError.isolation_violation(f"the sandbox's network/credential policy is invalid: {e}") from e


@runtime_checkable
class Sandbox(Protocol):
    """A backend that runs each turn in a fresh sandbox of its own."""

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a fresh sandbox, removed before this returns.

        Raises:
            EnvError: ``isolation_violation``, ``credential_failed``, ``resource_exceeded`` for
                what the backend cannot provide (never downgraded); ``provision_failed`` when
                the sandbox cannot start; ``turn_error`` for the turn's own failure.
        """
        ...

    async def host_address(self) -> str:
        """Where a service on this host (e.g. the local model server) must listen to be
        reachable from this backend's sandboxes, through their allowed egress.

        Raises:
            EnvError: ``provision_failed`` when the backend has no such address.
        """
        ...


@runtime_checkable
class WarmableSandbox(Protocol):
    """A backend that can keep sandboxes started ahead of their jobs (a warm pool)."""

    async def warm(
        self, environment: EnvironmentSpec, plan: SandboxPlan, placement: Placement | None = None
    ) -> bool:
        """Keep sandboxes for ``environment`` (compiled to ``plan``) placed by ``placement``
        started, holding no secret and no agent, for later :meth:`Sandbox.run` calls to claim
        (only by a request of the same placement); False when this backend keeps none for it
        (no pool configured, or a shape it does not pool).

        Raises:
            EnvError: what a cold start of such a sandbox would raise.
        """
        ...


@runtime_checkable
class ResumableSandbox(Protocol):
    """A backend whose sandboxes may outlive their controller (a crash), so a job's previous
    sandbox must be found and removed before the job resumes in a new one."""

    async def ensure_gone(self, job: str) -> None:
        """Remove every sandbox labelled with ``job`` and confirm it is gone.

        Raises:
            EnvError: ``provision_failed`` when that cannot be confirmed: the job must not
                resume while its previous sandbox may still run its tools.
        """
        ...


@runtime_checkable
class ClosableSandbox(Protocol):
    """A backend holding background work while in use (e.g. a periodic sweep), ended by
    :meth:`aclose` when its owner stops using it."""

    async def aclose(self) -> None:
        """Stop the backend's background work."""
        ...


@runtime_checkable
class LongLivedSandbox(Protocol):
    """A backend that can keep one box for several jobs run one after another (a long-lived
    sandbox: :class:`~._session.LongLivedBox`)."""

    async def open(
        self, request: SandboxRequest, *, label: str, ttl: float | None = None
    ) -> LongLivedBox[Any]:
        """Provision a box for ``request``'s agent, environment and placement (its ``input``,
        ``state``, ``handle`` and ``job`` are not used: each job brings its own to
        :meth:`LongLivedBox.run`), labelled with the session's id ``label`` (never a job),
        started cold (never from a warm pool). ``ttl``: the longest the box may live, in
        seconds, where the backend can bound it (a pod's ``activeDeadlineSeconds``); None:
        until closed. Its proxies' events go to the job running at the time.

        Raises:
            EnvError: as :meth:`Sandbox.run` raises for a box that cannot be provided.
        """
        ...
