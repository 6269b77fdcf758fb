"""Adoption: what becomes of the jobs this replica takes over from a replica that is gone.

Their sandboxes are reaped first (their owner process is gone). A submitted job whose turn was
provisioning or running is queued to resume from its last checkpoint in a fresh sandbox
(within its agent's ``max_resumes``); one that was applying its effects applies the rest of
them here (its ledger says which were applied), its children with it; the others are marked
interrupted. Then the adopted jobs are released for any replica's workers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from airlock.errors import ConfigError
from airlock.jobs import Job, JobState

from ._active import ActiveJobs
from ._claims import Adopted
from ._job_records import JobRecords
from ._job_runs import STOPPED, JobRuns
from ._store import JobStore

if TYPE_CHECKING:
    from ._execute import AgentRunner


class Adoption:
    """Recovers adopted jobs (see the module).

    Args:
        store: the shared job store; ``runner`` reaps sandboxes; ``records`` resumes jobs;
        ``runs`` applies an adopted job's remaining effects; ``active`` this replica's jobs;
        ``wake`` wakes the workers once jobs are queued again.
    """

    def __init__(
        self,
        *,
        store: JobStore,
        runner: AgentRunner,
        records: JobRecords,
        runs: Callable[[], JobRuns],
        active: ActiveJobs,
        wake: Callable[[], Awaitable[None]],
    ) -> None:
        self._store = store
        self._runner = runner
        self._records = records
        self._runs = runs
        self._active = active
        self._wake = wake
        #: Jobs marked interrupted because their controller was gone.
        self.recovered: list[Job] = []

    async def resumable(self, job: Job) -> bool:
        """Whether a submitted job whose controller stopped resumes from its last checkpoint."""
        if job.origin != "submit" or job.state not in (JobState.PROVISIONING, JobState.RUNNING):
            return False
        try:
            agent = self._active.agent(job)
        except ConfigError:
            return False
        return await self._records.crash_resumes(job.id) < agent.durability.max_resumes

    async def __call__(self, adopted: Sequence[Adopted], dead: Sequence[str]) -> None:
        """Recover the jobs adopted from the ``dead`` replicas (none: a previous controller's)."""
        jobs = {a.job_id: job for a in adopted if (job := await self._store.get(a.job_id)) is not None}
        held = [job for job in jobs.values() if not job.state.terminal and job.state is not JobState.QUEUED]
        removed = "; ".join(await self._runner.reap()) if held else ""
        keep = [job for job in held if await self.resumable(job)]
        replay = [job for job in held if _replays(job)]
        replaying = {job.id for job in replay}
        trees = {job.id for job in held if await self._root(job, jobs) in replaying}
        if dead and self._store.shared:
            gone = detail = f"its controller replica ({', '.join(dead)}) stopped renewing its lease"
            log = f"interrupted: {gone}; its orphaned sandboxes were reaped ({removed})"
        else:
            gone, detail = "the controller restarted", STOPPED
            log = (
                "interrupted: the controller stopped while this job ran; "
                f"orphaned sandboxes reaped at restart ({removed})"
            )
        dropped = [job.id for job in held if job not in keep and job.id not in trees]
        self.recovered.extend(await self._store.recover(dropped, detail, log))
        for job_id in dropped:
            self._active.tidy(job_id)  # interrupted: nothing is held for it
        for job in keep:
            why = f"{gone}; its sandboxes were reaped ({removed})"
            await self._records.resumed(job, "restart", why, into=JobState.QUEUED)
        for job_id in jobs:
            if job_id not in trees:
                await self._store.release(job_id)
        for job in replay:
            self._replay(job)
        if jobs:
            await self._wake()

    def _replay(self, job: Job) -> None:
        """Apply the rest of ``job``'s effects here, as its own task (stopped with the service)."""
        entry = self._active.of(job.id)

        async def replay() -> None:
            try:
                await self._runs().replay_effects(job)
            finally:
                entry.task = None
                self._active.tidy(job.id)
                await self._store.release(job.id)

        entry.task = asyncio.create_task(replay(), name=f"airlock-effects-{job.id}")

    async def replays_tree(self, job: Job, known: dict[str, Job]) -> bool:
        """Whether ``job`` is in a tree whose submitted job applies its effects (adopted, it
        applies the rest of them, reusing its children)."""
        root_id = await self._root(job, known)
        root = known.get(root_id) or await self._store.get(root_id)
        return root is not None and _replays(root)

    async def _root(self, job: Job, known: dict[str, Job]) -> str:
        """The id of the submitted job at the top of ``job``'s tree."""
        while job.parent_id is not None:
            parent = known.get(job.parent_id) or await self._store.get(job.parent_id)
            if parent is None:
                break
            job = parent
        return job.id


def _replays(job: Job) -> bool:
    """Whether an adopted job applies the rest of its effects: a submitted one whose replica
    died while applying them."""
    return job.origin == "submit" and job.state is JobState.APPLYING_EFFECTS and job.output is not None
