"""What a backend proved about its isolation, as the controller and its clients see it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol, get_args, runtime_checkable

__all__ = ["ISOLATION_STATUSES", "IsolationProof", "IsolationStatus", "ProvingSandbox"]

IsolationStatus = Literal["enforced", "failed", "unproven", "assumed"]
#: Every status, in order.
ISOLATION_STATUSES: tuple[IsolationStatus, ...] = get_args(IsolationStatus)


@dataclass(frozen=True)
class IsolationProof:
    """The latest proof of one backend's network isolation in one place (a namespace)."""

    backend: str
    #: Where it holds (Kubernetes: the sandbox namespace).
    scope: str
    #: ``enforced`` (proven), ``failed`` (a check reached what it must not), ``unproven``
    #: (nothing could be concluded), ``assumed`` (the operator opted out of the proof).
    status: IsolationStatus
    checked_at: datetime
    #: One line: what the status rests on.
    reason: str
    #: Each check, one line (who tried what, what happened, what was expected).
    evidence: tuple[str, ...] = ()

    @property
    def allows_jobs(self) -> bool:
        """Whether jobs run on it."""
        return self.status in ("enforced", "assumed")


@runtime_checkable
class ProvingSandbox(Protocol):
    """A sandbox backend whose isolation depends on its environment and is proven before use."""

    async def isolation_proof(self) -> IsolationProof:
        """The latest proof, made now when none was made yet."""
        ...
