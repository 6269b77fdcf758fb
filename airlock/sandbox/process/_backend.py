"""ProcessBackend: the runner as a local subprocess — the WEAKEST boundary.

What it isolates: the turn runs in its own OS process (own session / process group) with
its own private temporary workspace, reached over a Unix socket in a private 0700
directory with a one-time token, and is killed with its whole process group at the end,
on cancellation and on timeout.

What it does NOT isolate: the process runs as *your* user, with your filesystem, your
network and no resource limits. Any tool the agent runs (bash, files outside the
workspace via bash) can do what you can. Use it for trusted agents, development, and
machines without Docker; use DockerEnvironment for anything else. So that nothing is
silently weakened, specs asking for more than a process boundary (container/gvisor/micro_vm
isolation, a network policy, credentials or resource limits) are refused.
"""

from __future__ import annotations

import asyncio
import sys
import time
from functools import partial
from typing import Any

from airlock.policy import SecretResolver
from airlock.sandbox._lifecycle import run_turn, start
from airlock.sandbox._observer import isolation_of, sandbox_observer
from airlock.sandbox._placement import refuse_placement
from airlock.sandbox._port import SandboxRequest
from airlock.sandbox._session import LongLivedBox
from airlock.sandbox._turn import hard_timeout_s
from airlock.spec import AgentSpec
from layer0 import EnvError, EnvironmentSpec, ProcessIsolation, Scope, TurnInput, TurnOutput

from ._instance import ProcessInstance
from ._leftovers import stop_job_runners

__all__ = ["ProcessBackend"]

_LOOPBACK = "127.0.0.1"


class ProcessBackend:
    """The process backend: each turn in a fresh local runner process (a :class:`~airlock.sandbox.Sandbox`).

    Args:
        python: the interpreter that runs ``-m airlock.runner`` (default: this one).
        start_timeout: seconds from spawn to health SERVING.
        turn_timeout: hard cap on a turn's wall-clock seconds (None: only max_duration).
        timeout_grace: extra seconds past ``max_duration`` before the process is killed.
        secrets: accepted for the registry's uniform factory; this backend injects no
            credentials (a spec naming some is refused), so it is never asked.
    """

    def __init__(
        self,
        *,
        python: str | None = None,
        start_timeout: float = 30.0,
        turn_timeout: float | None = None,
        timeout_grace: float = 5.0,
        secrets: SecretResolver | None = None,
    ) -> None:
        self.python = python or sys.executable
        self.start_timeout = start_timeout
        self.turn_timeout = turn_timeout
        self.timeout_grace = timeout_grace

    async def run(self, request: SandboxRequest) -> TurnOutput:
        """Run ``request``'s turn in a local runner process, killed (with its process group)
        before this returns; the state snapshot is sent with the turn's request.

        Raises:
            EnvError: ``isolation_violation`` / ``credential_failed`` / ``resource_exceeded``
                for a spec this backend cannot enforce; ``provision_failed`` when the runner
                does not start; ``turn_error`` for the turn's own failure (chained).
        """
        agent, input = request.agent.final(), request.input
        _refuse_unenforceable(request.environment)
        refuse_placement(request.placement, "process")
        runner = ProcessInstance(self.python, request.job, start_timeout=self.start_timeout)
        began = time.monotonic()
        await start(runner, partial(runner.provision, agent, request.state))
        observed = ("process", isolation_of(request.environment), "cold", time.monotonic() - began)
        sandbox_observer().provisioned(*observed)
        deadline = hard_timeout_s(agent, input, self.turn_timeout, self.timeout_grace)
        return await run_turn(runner, input, request.events, deadline, request.handle, bind=runner.bound)

    async def open(
        self, request: SandboxRequest, *, label: str, ttl: float | None = None
    ) -> LongLivedBox[ProcessInstance]:
        """A runner process kept for the jobs of the long-lived sandbox ``label`` (its
        environment marks it with ``label``, never a job; ``ttl`` is not enforced here: the
        process lives until closed, or until its controller exits: ``--exit-with-parent``).

        Raises:
            EnvError: as :meth:`run` for a spec this backend cannot enforce or a runner that
                does not start.
        """
        agent = request.agent.final()
        _refuse_unenforceable(request.environment)
        refuse_placement(request.placement, "process")
        runner = ProcessInstance(self.python, start_timeout=self.start_timeout, session=label)
        began = time.monotonic()
        await start(runner, partial(runner.provision, agent))
        observed = ("process", isolation_of(request.environment), "cold", time.monotonic() - began)
        sandbox_observer().provisioned(*observed)

        async def bind(state: tuple[tuple[Scope, str, Any], ...]) -> None:
            runner.bind(agent, state)

        return LongLivedBox(
            runner,
            label=label,
            bind=bind,
            timeout_of=partial(self._timeout, agent),
        )

    def _timeout(self, agent: AgentSpec, input: TurnInput) -> float | None:
        return hard_timeout_s(agent, input, self.turn_timeout, self.timeout_grace)

    async def host_address(self) -> str:
        """Loopback: the runner is a process of this host."""
        return _LOOPBACK

    async def ensure_gone(self, job: str) -> None:
        """Before ``job`` resumes: stop every runner process still serving it and confirm it
        exited (see :mod:`._leftovers`). A runner whose controller died stops by itself
        (``--exit-with-parent``); this catches one that has not yet.

        Raises:
            EnvError: ``provision_failed`` when one is still running after the wait.
        """
        await asyncio.to_thread(stop_job_runners, job)


def _refuse_unenforceable(spec: EnvironmentSpec) -> None:
    stronger = [b.type for b in spec.isolation if not isinstance(b, ProcessIsolation)]
    if stronger:
        raise EnvError.isolation_violation(
            f"LocalProcessEnvironment provides only a process boundary, but the spec asks for "
            f"{', '.join(stronger)}; use DockerEnvironment"
        )
    if spec.network is not None:
        raise EnvError.isolation_violation(
            "LocalProcessEnvironment cannot enforce a network policy (the process has the host's "
            "network); use DockerEnvironment"
        )
    if spec.credentials:
        names = ", ".join(c.name for c in spec.credentials)
        raise EnvError.credential_failed(f"LocalProcessEnvironment does not inject credentials: {names}")
    r = spec.resources
    if r is not None and any(v is not None for v in (r.cpu, r.memory, r.disk, r.gpu)):
        raise EnvError.resource_exceeded(
            "LocalProcessEnvironment cannot enforce resource limits; use DockerEnvironment"
        )
