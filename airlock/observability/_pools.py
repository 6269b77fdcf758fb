"""The warm pools' counters, read from the pools themselves at each scrape (they already keep
them): a custom collector, so the pool code has no metrics hook at all."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from airlock.sandbox import PoolStats

__all__ = ["PoolCollector"]

#: Each backend's pool statistics now (``AgentRunner.pool_stats``).
PoolSource = Callable[[], Mapping[str, "PoolStats"]]


class PoolCollector(Collector):
    """``airlock_pool_*``: ready members, hits, misses and refill failures by backend."""

    def __init__(self, source: PoolSource) -> None:
        self.source = source

    def describe(self) -> list[Metric]:
        return list(self._families({}))

    def collect(self) -> Iterator[Metric]:
        yield from self._families(self.source())

    @staticmethod
    def _families(stats: Mapping[str, PoolStats]) -> Iterator[Metric]:
        size = GaugeMetricFamily("airlock_pool_size", "Ready warm sandboxes", labels=["backend"])
        hits = CounterMetricFamily("airlock_pool_hits", "Claims a warm sandbox served", labels=["backend"])
        misses = CounterMetricFamily("airlock_pool_misses", "Claims that started cold", labels=["backend"])
        failures = CounterMetricFamily(
            "airlock_pool_refill_failures", "Warm sandboxes that failed to start", labels=["backend"]
        )
        for backend, s in sorted(stats.items()):
            size.add_metric([backend], sum(shape.ready for shape in s.shapes))
            hits.add_metric([backend], s.hits)
            misses.add_metric([backend], s.misses)
            failures.add_metric([backend], s.failed)
        yield from (size, hits, misses, failures)
