"""What the sandbox backends report to an observer (metrics, say): each sandbox provisioned,
how long it took, cold or warm; each isolation proof's verdict.

The default observer does nothing; :func:`set_sandbox_observer` installs another for the
process (the backends never import a metrics library).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from layer0 import EnvironmentSpec

__all__ = ["SandboxObserver", "isolation_of", "sandbox_observer", "set_sandbox_observer"]


class SandboxObserver:
    """Receives the backends' measurements; each method must be quick and must not raise."""

    def provisioned(self, backend: str, isolation: str, start: str, seconds: float) -> None:
        """A sandbox of ``backend`` with ``isolation`` was ready for its job after ``seconds``
        (``start``: ``cold``, started for it, or ``warm``, claimed from a pool)."""

    def isolation_proved(self, backend: str, status: str) -> None:
        """A proof of ``backend``'s network isolation ended ``status`` (at start, before a job,
        or in the background: Kubernetes' NetworkPolicy enforcement proof)."""


_observer = SandboxObserver()


def sandbox_observer() -> SandboxObserver:
    """The process's sandbox observer (a no-op one unless another was set)."""
    return _observer


def set_sandbox_observer(observer: SandboxObserver | None) -> SandboxObserver:
    """Install ``observer`` (None: the no-op one); returns the one it replaces."""
    global _observer
    previous, _observer = _observer, observer or SandboxObserver()
    return previous


def isolation_of(environment: EnvironmentSpec) -> str:
    """The isolation boundaries an environment asks for, as one label (``default``: none)."""
    return "+".join(sorted({b.type for b in environment.isolation})) or "default"
