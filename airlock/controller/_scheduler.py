"""The scheduler: ``concurrency`` workers, each claiming the next queued job from the store in
fair order (queue keys take turns; a session's jobs run one at a time, across replicas) and
running it as its own task (so it can be cancelled without its worker)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ._active import ActiveJobs
from ._claims import Claim
from ._store_rows import JobStoreError

_log = logging.getLogger("airlock.jobs")


class Scheduler:
    """The workers, and how many jobs run now.

    Args:
        concurrency: workers (jobs running at once in this replica).
        active: where each running job's task is kept.
        run: runs one claimed job (by id) to its end.
        claim: claims the next queued job (None: nothing claimable).
        release: lets go of a job whose run here ended.
        poll_s: how often an idle worker looks again without being woken.
    """

    def __init__(
        self,
        concurrency: int,
        active: ActiveJobs,
        run: Callable[[str], Coroutine[Any, Any, None]],
        *,
        claim: Callable[[], Awaitable[Claim | None]],
        release: Callable[[str], Awaitable[None]],
        poll_s: float = 1.0,
    ) -> None:
        self._concurrency = concurrency
        self._active = active
        self._run = run
        self._claim = claim
        self._release = release
        self._poll_s = poll_s
        self._wake = asyncio.Event()
        self._pushes = 0
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

    async def push(self) -> None:
        """Wake the workers: a job was queued (here, or in another replica)."""
        self._pushes += 1
        self._wake.set()

    async def _next(self) -> Claim:
        """The next job this worker claims (waiting until one is queued)."""
        while True:
            seen = self._pushes
            try:
                claimed = await self._claim()
            except JobStoreError as e:
                _log.warning("cannot claim a queued job: %s", e)
                claimed = None
            if claimed is not None:
                return claimed
            if self._pushes == seen:  # nothing queued since this look: wait for a push (or poll)
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._poll_s):
                        await self._wake.wait()

    async def _worker(self) -> None:
        while True:
            claimed = await self._next()
            self.running_now += 1
            self.peak_running = max(self.peak_running, self.running_now)
            entry = self._active.of(claimed.job_id)
            task: asyncio.Task[None] | None = None
            try:
                task = asyncio.create_task(self._run(claimed.job_id), name=f"airlock-job-{claimed.job_id}")
                entry.task = task
                await asyncio.wait([task])
            finally:
                if task is not None and not task.done():
                    await asyncio.wait([task])  # a stop cancelled the worker, then the job: it ends first
                if entry.task is task:
                    entry.task = None
                self._active.tidy(claimed.job_id)
                self.running_now -= 1
                await self._released(claimed.job_id)

    async def _released(self, job_id: str) -> None:
        try:
            await asyncio.shield(self._release(job_id))
        except JobStoreError as e:
            _log.warning("job %s: its claim could not be released (it lapses with the lease): %s", job_id, e)
        await self.push()  # a session's next job may run now
