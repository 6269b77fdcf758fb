"""What the controller knows about a job in this process beyond its record: its agent, its
task, its turn's controls and journal, its approval wait, its pause and stop requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airlock.jobs import Job, JobState

if TYPE_CHECKING:
    from airlock.config import AgentConfig
    from airlock.sandbox import TurnHandle

    from ._journal import JobJournal


@dataclass
class ActiveJob:
    """One job as this controller holds it (the job store keeps only its agent's name).

    Attributes:
        agent: its agent, resolved once (see :meth:`ActiveJobs.agent`).
        task: the task running it now (a worker's, or its parent's child task).
        handle: its running turn's controls; ``journal`` that execution's journal.
        approval_timer: decides its approval wait at the policy's timeout.
        decided: set when a child's approval wait (held in place) is decided.
        progressed: its latest execution got its turn going (a checkpoint came back).
        paused_at_start: its next execution starts paused (before its first model call).
        paused: its turn is paused now (a ``paused`` event came; resumed or ended since: not).
        stopping: why its task is being cancelled (CANCELLED with the user's detail, or
            INTERRUPTED, or QUEUED to resume at the next start).
        awaited: submitted by :meth:`JobService.run`; ``failure`` the exception it failed with.
        let_go: this replica no longer holds it (another adopted it, or it was cancelled
            through another replica): its task is cancelled and writes nothing.
    """

    agent: AgentConfig | None = None
    task: asyncio.Task[Any] | None = None
    handle: TurnHandle | None = None
    journal: JobJournal | None = None
    approval_timer: asyncio.Task[None] | None = None
    decided: asyncio.Event | None = None
    progressed: bool = False
    paused_at_start: bool = False
    paused: bool = False
    stopping: tuple[JobState, str] | None = None
    awaited: bool = False
    failure: BaseException | None = None
    let_go: bool = False

    @property
    def idle(self) -> bool:
        """Nothing is held for it but its agent (which can be resolved again)."""
        held = (self.task, self.handle, self.approval_timer, self.decided)
        return all(h is None for h in held) and not (self.paused_at_start or self.awaited)


class ActiveJobs:
    """The registry of :class:`ActiveJob`, by job id.

    Args:
        resolve: an agent's configuration by name (raises ``ConfigError`` for an unknown one).
    """

    def __init__(self, resolve: Callable[[str], AgentConfig]) -> None:
        self.resolve = resolve
        self._jobs: dict[str, ActiveJob] = {}

    def get(self, job_id: str) -> ActiveJob | None:
        """The job's entry, if it has one."""
        return self._jobs.get(job_id)

    def of(self, job_id: str) -> ActiveJob:
        """The job's entry, created empty if it has none."""
        entry = self._jobs.get(job_id)
        if entry is None:
            entry = self._jobs[job_id] = ActiveJob()
        return entry

    def agent(self, job: Job) -> AgentConfig:
        """The job's agent: the one it carries, else resolved from its name and kept.

        Raises:
            ConfigError: the configuration has no such agent.
        """
        entry = self._jobs.get(job.id)
        if entry is not None and entry.agent is not None:
            return entry.agent
        agent = self.resolve(job.agent)
        self.of(job.id).agent = agent
        return agent

    def tidy(self, job_id: str) -> None:
        """Forget the job's entry when nothing is held for it."""
        entry = self._jobs.get(job_id)
        if entry is not None and entry.idle:
            del self._jobs[job_id]

    def task(self, job_id: str) -> asyncio.Task[Any] | None:
        """The task running the job now."""
        entry = self._jobs.get(job_id)
        return entry.task if entry is not None else None

    def tasks(self) -> dict[str, asyncio.Task[Any]]:
        """Every running job's task, by job id."""
        return {job_id: e.task for job_id, e in self._jobs.items() if e.task is not None}

    def letting_go(self, job_id: str) -> bool:
        """Whether this replica's run of the job stops writing nothing (another replica holds
        it, or will: a stop that hands it over)."""
        entry = self._jobs.get(job_id)
        return entry is not None and entry.let_go

    def stopping(self, job_id: str) -> tuple[JobState, str] | None:
        """Why the job's task is being cancelled, if it is."""
        entry = self._jobs.get(job_id)
        return entry.stopping if entry is not None else None

    def handle(self, job_id: str) -> TurnHandle | None:
        """The controls of the job's running turn."""
        entry = self._jobs.get(job_id)
        return entry.handle if entry is not None else None

    def journal(self, job_id: str) -> JobJournal | None:
        """The journal of the job's running execution."""
        entry = self._jobs.get(job_id)
        return entry.journal if entry is not None else None

    def take_timers(self) -> list[asyncio.Task[None]]:
        """Every approval timer, each entry forgetting its own (the service stops)."""
        found = []
        for entry in self._jobs.values():
            if entry.approval_timer is not None:
                found.append(entry.approval_timer)
                entry.approval_timer = None
        return found
