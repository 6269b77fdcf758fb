"""The scheduler: queued jobs wait in a fair queue; ``concurrency`` workers take them, one at
a time each, and run each as its own task (so it can be cancelled without its worker)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import Any

from airlock.jobs import Job

from ._active import ActiveJobs
from ._queue import FairQueue, QueuedJob


class Scheduler:
    """The queue, the workers, and how many jobs run now.

    Args:
        concurrency: workers (jobs running at once).
        active: where each running job's task is kept.
        run: runs one job (by id) to its end.
    """

    def __init__(
        self, concurrency: int, active: ActiveJobs, run: Callable[[str], Coroutine[Any, Any, None]]
    ) -> None:
        self._concurrency = concurrency
        self._active = active
        self._run = run
        self._queue = FairQueue()
        self._wake = asyncio.Condition()
        self._busy_sessions: Counter[str] = Counter()
        self._workers: list[asyncio.Task[None]] = []
        self.running_now = 0
        #: The most jobs seen running at once (for tests and the bench).
        self.peak_running = 0

    def start(self) -> None:
        """Start the workers."""
        self._workers = [
            asyncio.create_task(self._worker(), name=f"airlock-worker-{i}") for i in range(self._concurrency)
        ]

    def cancel_workers(self) -> list[asyncio.Task[None]]:
        """Cancel the workers; them, to be awaited."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.cancel()
        return workers

    async def push(self, job: Job) -> None:
        """Queue ``job`` and wake a worker."""
        async with self._wake:
            self._queue.push(QueuedJob(job.id, job.queue, job.session))
            self._wake.notify()

    async def remove(self, job_id: str) -> bool:
        """Take the job out of the queue; whether it was in it."""
        async with self._wake:
            return self._queue.remove(job_id)

    @property
    def queued_count(self) -> int:
        """Jobs waiting for a worker."""
        return len(self._queue)

    async def _worker(self) -> None:
        while True:
            async with self._wake:
                while (item := self._queue.pop(self._busy_sessions)) is None:
                    await self._wake.wait()
                if item.session is not None:
                    self._busy_sessions[item.session] += 1
            self.running_now += 1
            self.peak_running = max(self.peak_running, self.running_now)
            entry = self._active.of(item.id)
            task: asyncio.Task[None] | None = None
            try:
                task = asyncio.create_task(self._run(item.id), name=f"airlock-job-{item.id}")
                entry.task = task
                await asyncio.wait([task])
            finally:
                if entry.task is task:
                    entry.task = None
                self._active.tidy(item.id)
                self.running_now -= 1
                async with self._wake:
                    if item.session is not None:
                        self._busy_sessions[item.session] -= 1
                        if self._busy_sessions[item.session] <= 0:
                            del self._busy_sessions[item.session]
                    self._wake.notify_all()
