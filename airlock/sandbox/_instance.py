"""SandboxInstance: one running box of a backend (a container, a pod, a process).

A backend provisions its instances its own way; from then on every backend's box goes
through the same lifecycle (:mod:`._lifecycle`): wait until ready, run the turn over its
channel with a deadline, then tear it down. The instance answers the lifecycle's questions
for its engine: how to stop it at the deadline, what a failed turn means on it (an OOM kill,
a dead box), what it went through during a turn that ended, how it is removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from airlock.runner import RemoteTurn
    from layer0 import EnvError, TurnError

__all__ = ["SandboxInstance"]


class SandboxInstance(Protocol):
    """One provisioned box of a backend, driven by :mod:`._lifecycle`."""

    @property
    def name(self) -> str:
        """How errors and outputs name it (``sandbox sb-…``, ``runner process 1234``)."""
        ...

    @property
    def remote(self) -> RemoteTurn | None:
        """The channel to its runner, once a job's agent is bound (None before)."""
        ...

    async def wait_ready(self) -> None:
        """Return once its runner answers SERVING (no agent is needed yet).

        Raises:
            EnvError: ``provision_failed`` (with what the box showed) when it does not in time;
                ``isolation_violation`` for a channel it tampered with.
        """
        ...

    async def stop(self) -> None:
        """Kill it now: its turn ran past the deadline (it is torn down afterwards)."""
        ...

    async def failure(self, error: TurnError) -> EnvError:
        """What a turn that failed with ``error`` means on this box: ``resource_exceeded``
        for an OOM kill, ``other`` for a box that died, else the turn's own failure."""
        ...

    async def after_turn(self) -> None:
        """Raise what the box went through during a turn that ended (an OOM kill).

        Raises:
            EnvError: ``resource_exceeded`` for a process inside OOM-killed meanwhile.
        """
        ...

    async def teardown(self) -> None:
        """Remove everything it created, exactly once, to the end even if cancelled meanwhile."""
        ...
