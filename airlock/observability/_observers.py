"""The core's observer interfaces, implemented on the metric families: store latency, reaper
removals and isolation verdicts (the controller), sandbox provisioning (the backends)."""

from __future__ import annotations

from airlock.controller import ControllerObserver
from airlock.sandbox import ISOLATION_STATUSES, SandboxObserver

from ._families import Families

__all__ = ["ControllerMetrics", "SandboxMetrics"]


class ControllerMetrics(ControllerObserver):
    """The controller's measurements as metrics."""

    def __init__(self, families: Families) -> None:
        self.families = families

    def store_operation(self, store: str, engine: str, seconds: float) -> None:
        self.families.store.labels(store, engine).observe(seconds)

    def store_failed(self, store: str, engine: str) -> None:
        self.families.store_errors.labels(store, engine).inc()

    def reaped(self, backend: str, removed: int) -> None:
        self.families.reaped.labels(backend).inc(removed)

    def isolation_proved(self, backend: str, status: str) -> None:
        verdict(self.families, backend, status)


class SandboxMetrics(SandboxObserver):
    """The backends' measurements as metrics."""

    def __init__(self, families: Families) -> None:
        self.families = families

    def provisioned(self, backend: str, isolation: str, start: str, seconds: float) -> None:
        self.families.provision.labels(backend, isolation, start).observe(seconds)

    def isolation_proved(self, backend: str, status: str) -> None:
        verdict(self.families, backend, status)


def verdict(families: Families, backend: str, status: str) -> None:
    """``backend``'s latest isolation verdict: 1 for ``status``, 0 for the others."""
    for known in ISOLATION_STATUSES:
        families.enforcement.labels(backend, known).set(1 if known == status else 0)
