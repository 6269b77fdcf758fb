"""Metrics: the registry, its families and what feeds them, for one controller process."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest, make_asgi_app

from airlock.controller import set_controller_observer
from airlock.sandbox import set_sandbox_observer

from ._census import INTERVAL_S, JobCensus
from ._families import Families
from ._jobs import JobMetrics
from ._observers import ControllerMetrics, SandboxMetrics
from ._pools import PoolCollector

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from airlock.controller import JobService

__all__ = ["Metrics", "metrics_app"]


class Metrics:
    """A registry of its own (not prometheus_client's global one) with every family.

    :meth:`observing` installs the core's observers for a block; :meth:`attach` feeds the job
    families from a service's events and the pool families from its runner.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.families = Families(self.registry)
        self.jobs = JobMetrics(self.families)
        self._detach: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def observing(self) -> Iterator[Metrics]:
        """While the block runs, the controller's and the backends' measurements land here
        (the process's previous observers are back after it)."""
        controller = set_controller_observer(ControllerMetrics(self.families))
        sandbox = set_sandbox_observer(SandboxMetrics(self.families))
        try:
            yield self
        finally:
            set_controller_observer(controller)
            set_sandbox_observer(sandbox)
            self.detach()

    def attach(self, service: JobService | None) -> None:
        """Follow ``service``'s job events and its runner's warm pools (until :meth:`detach`;
        None: nothing to follow)."""
        if service is None:
            return
        self._detach.append(service.events.subscribe(self.jobs))
        pools = PoolCollector(service.runner.pool_stats)
        self.registry.register(pools)
        self._detach.append(lambda: self.registry.unregister(pools))

    @contextlib.asynccontextmanager
    async def census(self, service: JobService | None, interval_s: float = INTERVAL_S) -> AsyncIterator[None]:
        """While the block runs, the jobs gauge is also set from ``service``'s store every
        ``interval_s`` (store-wide counts: see :class:`JobCensus`; None: nothing to count)."""
        if service is None:
            yield
            return
        async with JobCensus(self.families, service.store.census, interval_s).running():
            yield

    def detach(self) -> None:
        """Stop following the services attached."""
        while self._detach:
            self._detach.pop()()

    def exposition(self) -> str:
        """The registry in the Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry).decode()


def metrics_app(metrics: Metrics) -> ASGIApp:
    """An ASGI app serving ``metrics`` in the Prometheus text format (mount it at ``/metrics``)."""
    app: ASGIApp = make_asgi_app(metrics.registry)
    return app
