"""A job's record as the service writes and follows it: state changes and events stored, and
the watchers of each job woken when one lands."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from airlock.jobs import ACTIVE_STATES, Job, JobError, JobEvent, JobEventData, JobState, LogLine
from layer0 import LogLevel

from ._live_events import LiveFeed
from ._service_settings import JobNotFound
from ._store import JobStore

_LOG_LEVELS = {level.value: level for level in LogLevel}
_log = logging.getLogger("airlock.jobs")

#: Receives each event recorded in this process, with its job when the write returned it (a
#: state change, a job created); it must be quick and is called on the event loop.
JobListener = Callable[[JobEvent, Job | None], None]


class JobEvents:
    """Reads jobs, records their state changes and events, and follows them live."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._listeners: list[JobListener] = []
        #: Live-only events (text deltas) for this replica's watchers, never stored.
        self.live = LiveFeed()

    def subscribe(self, listener: JobListener) -> Callable[[], None]:
        """Hand ``listener`` every event recorded from now on; returns what unsubscribes it."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    async def get(self, job_id: str, tenant: str | None = None) -> Job:
        """The job (of ``tenant``, when given).

        Raises:
            JobNotFound: no such job (of that tenant: the same refusal).
        """
        job = await self.store.get(job_id, tenant)
        if job is None:
            raise JobNotFound(f"no job {job_id!r}")
        return job

    def notify(self, event: JobEvent, job: Job | None = None) -> None:
        """Wake the watchers of ``event``'s job; hand it (and ``job``) to the listeners."""
        self.wake(event.job_id)
        for listener in list(self._listeners):
            try:
                listener(event, job)
            except Exception:
                _log.exception("a job event listener failed")

    def wake(self, job_id: str | None) -> None:
        """Wake the watchers of ``job_id`` (None: of every job): it has new events, recorded
        here or by another replica."""
        groups = [self._watchers.get(job_id, set())] if job_id is not None else list(self._watchers.values())
        for watchers in groups:
            for wake in watchers:
                wake.set()

    async def emit(self, job_id: str, data: JobEventData) -> JobEvent:
        """Record an event of the job."""
        event = await self.store.append(job_id, data)
        self.notify(event)
        return event

    def publish_live(self, job_id: str, data: JobEventData) -> None:
        """Hand a live-only event to the job's watchers here (not recorded, no listener)."""
        if self.live.publish(job_id, data):
            self.wake(job_id)

    async def transition(self, job_id: str, state: JobState, **kwargs: Any) -> Job | None:
        """Move the job to ``state`` (as :meth:`JobStore.transition`); None when it was not."""
        changed = await self.store.transition(job_id, state, **kwargs)
        if changed is None:
            return None
        self.notify(changed[1], changed[0])
        return changed[0]

    async def log(self, job_id: str, level: str, message: str) -> None:
        """A log line of the controller on the job."""
        line = LogLine(level=_LOG_LEVELS.get(level, LogLevel.INFO), message=message, source="controller")
        await self.emit(job_id, line)

    async def watch(self, job_id: str, after_seq: int = 0) -> AsyncIterator[JobEvent]:
        """The job's events after ``after_seq``, then live ones, until it is terminal."""
        job = await self.get(job_id)
        seq = after_seq
        wake = asyncio.Event()
        self._watchers.setdefault(job_id, set()).add(wake)
        live = self.live.open(job_id)
        try:
            while True:
                wake.clear()
                # Live events published before the store is read come before what it holds
                # (a call's deltas before its InferenceFinished); each carries the seq of the
                # last recorded event before it.
                pending = live.take()
                # The state is read before the events: a job that was terminal then has all
                # its events, the final one included, in this read (the other order could see
                # no event, then the terminal state, and end without sending the last event).
                ended = job.state.terminal or (await self.get(job_id)).state.terminal
                events = await self.store.events(job_id, after_seq=seq)
                for data in pending:
                    yield JobEvent(job_id=job_id, seq=seq, time=datetime.now(UTC), data=data)
                for event in events:
                    seq = event.seq
                    yield event
                    if event.terminal:
                        return
                if ended:
                    return
                if not events:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(wake.wait(), 5.0)
        finally:
            self.live.close(job_id, live)
            watchers = self._watchers.get(job_id)
            if watchers is not None:
                watchers.discard(wake)
                if not watchers:
                    del self._watchers[job_id]

    async def finish(self, job_id: str, state: JobState, error: JobError, *, revoke: bool = False) -> None:
        """End a job that is not yet terminal with ``error``, even when the caller is being
        cancelled (with ``revoke``, the claim of the replica running it ends too)."""
        active = [JobState.QUEUED, *ACTIVE_STATES]
        change = self.transition(
            job_id, state, error=error, detail=error.message, only_from=active, revoke=revoke
        )
        await shielded(change)


async def shielded(work: Awaitable[Any]) -> None:
    """Finish ``work`` even when the caller is being cancelled."""
    done = asyncio.ensure_future(work)
    try:
        await asyncio.shield(done)
    except asyncio.CancelledError:
        await done
        raise
