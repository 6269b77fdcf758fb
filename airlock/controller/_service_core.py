"""The state and primitives every part of the JobService shares: its stores, its runner,
its in-memory bookkeeping, and how a job's state changes and events are recorded."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from airlock.errors import AirlockError, ConfigError
from airlock.jobs import (
    Job,
    JobEvent,
    JobEventData,
    JobState,
    LogLine,
)
from airlock.sandbox import TurnHandle
from layer0 import (
    LogLevel,
    StateStore,
)

from ._execute import AgentRunner
from ._journal import JobJournal
from ._queue import FairQueue
from ._store import SqliteJobStore
from ._weaving import Weaves

_log = logging.getLogger("airlock.jobs")

_LOG_LEVELS = {level.value: level for level in LogLevel}


class JobNotFound(AirlockError):
    """No job has this id."""


class JobNotAwaiting(AirlockError):
    """The job is not in the state the request needs (e.g. an approval of a job that waits
    for none, a step of a job whose turn is not running)."""


class NotAnApprover(AirlockError):
    """The name given may not decide on this job's calls."""


@dataclass(frozen=True)
class ServiceSettings:
    """How the controller schedules and bounds jobs.

    Attributes:
        concurrency: jobs running at once (each holds one sandbox, children aside).
        default_max_duration_ms: a job's limit when neither the submitter nor its agent sets
            one.
        max_depth: levels of delegate/handoff children under a submitted job.
        max_follow_ups: children one submitted job may start in all (delegation loops stop).
    """

    concurrency: int = 4
    default_max_duration_ms: int = 3_600_000
    max_depth: int = 4
    max_follow_ups: int = 16

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.max_depth < 0 or self.max_follow_ups < 0:
            raise ConfigError("max_depth and max_follow_ups must not be negative")


class ServiceCore:
    """What the JobService's parts share (see :class:`~airlock.controller.JobService`)."""

    def __init__(
        self,
        store: SqliteJobStore,
        runner: AgentRunner,
        state: StateStore,
        settings: ServiceSettings | None = None,
        audit_key: bytes | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.state = state
        self.settings = settings or ServiceSettings()
        #: Every job tree's turn records (sealed with ``audit_key``).
        self.weaves = Weaves(state, audit_key)
        #: Running jobs' turn controls and journals.
        self._handles: dict[str, TurnHandle] = {}
        self._journals: dict[str, JobJournal] = {}
        #: Approval timeouts, and children waiting in place for a decision.
        self._approval_timers: dict[str, asyncio.Task[None]] = {}
        self._decided: dict[str, asyncio.Event] = {}
        #: Whether a job's latest execution got its turn going (a checkpoint came back).
        self._progressed: dict[str, bool] = {}
        #: Jobs whose next execution starts paused (before its first model call).
        self._paused_at_start: set[str] = set()
        #: Jobs whose turn is paused now (a ``paused`` event came; resumed or ended since: not).
        self._paused: set[str] = set()
        self._queue = FairQueue()
        self._wake = asyncio.Condition()
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        #: Why a job's task is being cancelled: CANCELLED (with the user's detail) or INTERRUPTED.
        self._stopping: dict[str, tuple[JobState, str]] = {}
        self._busy_sessions: Counter[str] = Counter()
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._workers: list[asyncio.Task[None]] = []
        self._running_now = 0
        #: The most jobs seen running at once (for tests and the bench).
        self.peak_running = 0
        #: Jobs marked interrupted at start (their controller was gone).
        self.recovered: list[Job] = []
        #: Jobs submitted by :meth:`run`: the exception each ended with, if it failed with one.
        self._awaited: dict[str, BaseException | None] = {}

    async def get(self, job_id: str) -> Job:
        """The job.

        Raises:
            JobNotFound: no such job.
        """
        job = await self.store.get(job_id)
        if job is None:
            raise JobNotFound(f"no job {job_id!r}")
        return job

    def _notify(self, event: JobEvent) -> None:
        for wake in self._watchers.get(event.job_id, ()):
            wake.set()

    async def _emit(self, job_id: str, data: JobEventData) -> JobEvent:
        event = await self.store.append(job_id, data)
        self._notify(event)
        return event

    async def _transition(self, job_id: str, state: JobState, **kwargs: Any) -> Job | None:
        changed = await self.store.transition(job_id, state, **kwargs)
        if changed is None:
            return None
        self._notify(changed[1])
        return changed[0]

    async def _log(self, job_id: str, level: str, message: str) -> None:
        await self._emit(
            job_id, LogLine(level=_LOG_LEVELS.get(level, LogLevel.INFO), message=message, source="controller")
        )
