"""JobCensus: the ``airlock_jobs`` gauge set from the job store's count of unfinished jobs,
every ``interval_s``. Between counts the gauge follows this process's own job events
(:class:`JobMetrics`); the count puts right what they cannot see (jobs other replicas moved, a
job adopted from this one, the jobs queued before this process started). Every replica reports
the same store-wide numbers: aggregate them with ``max``, not ``sum``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from airlock.jobs import JobState

from ._families import Families

__all__ = ["Count", "JobCensus"]

_log = logging.getLogger("airlock.observability")

#: How often the store is counted, seconds.
INTERVAL_S = 15.0
#: What counts: unfinished jobs by state, agent and tenant.
Count = Callable[[], Awaitable[dict[tuple[JobState, str, str], int]]]


class JobCensus:
    """Sets the jobs gauge from ``count``; the label sets it no longer sees are removed."""

    def __init__(self, families: Families, count: Count, interval_s: float = INTERVAL_S) -> None:
        self._families = families
        self._count = count
        self._interval_s = interval_s
        self._shown: set[tuple[str, str, str]] = set()

    async def once(self) -> None:
        """Count now and set the gauge (a store error is logged; the gauge keeps its values)."""
        try:
            counts = await self._count()
        except Exception as e:  # a failed count must not end the census
            _log.warning("cannot count the jobs for airlock_jobs: %s", e)
            return
        gauge = self._families.jobs
        shown = {(state.value, agent, tenant): n for (state, agent, tenant), n in counts.items()}
        for labels in self._shown - shown.keys():
            with contextlib.suppress(KeyError):
                gauge.remove(*labels)
        for labels, n in shown.items():
            gauge.labels(*labels).set(n)
        self._shown = set(shown)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[JobCensus]:
        """Count at once, then every interval, while the block runs."""
        await self.once()
        task = asyncio.create_task(self._loop(), name="airlock-job-census")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            await self.once()
