"""FairQueue: queued jobs taking turns by queue key, FIFO within a key."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Container
from dataclasses import dataclass


@dataclass(frozen=True)
class QueuedJob:
    """What the scheduler needs of a queued job."""

    id: str
    queue: str
    session: str | None = None


class FairQueue:
    """Round-robin over queue keys; within one key, oldest first.

    A key that just had a job taken goes to the back, so a key with 1,000 queued jobs
    delays another key's first job by at most one job per worker. A job whose session is
    busy (another job of the same session holds a worker) is passed over, so one session's
    turns run one at a time, in order, and read each other's history.
    """

    def __init__(self) -> None:
        self._keys: OrderedDict[str, deque[QueuedJob]] = OrderedDict()
        self._ids: set[str] = set()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._ids

    def push(self, job: QueuedJob) -> None:
        """Add ``job`` at the back of its key (no-op if already queued)."""
        if job.id in self._ids:
            return
        self._keys.setdefault(job.queue, deque()).append(job)
        self._ids.add(job.id)

    def pop(self, busy_sessions: Container[str] = frozenset()) -> QueuedJob | None:
        """The next job to run (None: nothing runnable), taken off the queue."""
        for key, jobs in self._keys.items():
            for job in jobs:
                if job.session is not None and job.session in busy_sessions:
                    continue  # its session's earlier job still runs; later ones wait too
                jobs.remove(job)
                self._ids.discard(job.id)
                if jobs:
                    self._keys.move_to_end(key)
                else:
                    del self._keys[key]
                return job
        return None

    def remove(self, job_id: str) -> bool:
        """Take ``job_id`` off the queue; whether it was there."""
        if job_id not in self._ids:
            return False
        for key, jobs in self._keys.items():
            for job in jobs:
                if job.id == job_id:
                    jobs.remove(job)
                    self._ids.discard(job_id)
                    if not jobs:
                        del self._keys[key]
                    return True
        return False  # pragma: no cover - _ids and _keys agree
