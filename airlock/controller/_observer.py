"""What the controller reports to an observer where no job event says it (metrics, say): the
job store's operation latency, the sandboxes its reaper removed, each isolation proof's verdict.

The default observer does nothing; :func:`set_controller_observer` installs another for the
process (the controller never imports a metrics library).
"""

from __future__ import annotations

__all__ = ["ControllerObserver", "controller_observer", "set_controller_observer"]


class ControllerObserver:
    """Receives the controller's measurements; each method must be quick and must not raise."""

    def store_operation(self, store: str, engine: str, seconds: float) -> None:
        """One transaction of ``store`` (``jobs``) on ``engine`` (``sqlite``, ``postgresql``)."""

    def store_failed(self, store: str, engine: str) -> None:
        """A transaction of ``store`` on ``engine`` failed (the database refused or was gone)."""

    def reaped(self, backend: str, removed: int) -> None:
        """A sweep of ``backend``'s leftover sandboxes removed ``removed`` objects."""

    def isolation_proved(self, backend: str, status: str) -> None:
        """``backend``'s network isolation proof ended ``status`` (``enforced``, ``failed``…)."""


_observer = ControllerObserver()


def controller_observer() -> ControllerObserver:
    """The process's controller observer (a no-op one unless another was set)."""
    return _observer


def set_controller_observer(observer: ControllerObserver | None) -> ControllerObserver:
    """Install ``observer`` (None: the no-op one); returns the one it replaces."""
    global _observer
    previous, _observer = _observer, observer or ControllerObserver()
    return previous
