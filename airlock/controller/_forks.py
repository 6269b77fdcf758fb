"""Forking a job: a new job that starts from another's conversation and workspace at one of
its checkpoints, recorded in the same weave as a branch of it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from airlock.jobs import Job

from ._fork_point import ForkSeed, continued, fork_point
from ._store import JobStore

__all__ = ["Forks"]


#: Creates and queues the fork's job: agent, the original job, its input files, the seed, owner.
Submit = Callable[[str, Job, list[tuple[str, bytes]], ForkSeed, str | None], Awaitable[Job]]


class Forks:
    """Starts forks of the jobs the caller may see (the caller checks that first)."""

    def __init__(self, store: JobStore, submit: Submit) -> None:
        self._store = store
        self._submit = submit

    async def fork(
        self,
        original: Job,
        *,
        at: str | None = None,
        message: str | None = None,
        agent: str | None = None,
        owner: str | None = None,
    ) -> Job:
        """A new job (of ``original``'s tenant) continuing ``original`` from the fork point
        ``at`` (see :func:`fork_point`; None: its last checkpoint), with its input files and
        its workspace there; ``message`` continues the conversation with a new user message
        (at a step boundary); ``agent`` runs it under another agent; ``owner`` forked it.

        Raises:
            ForkRefused: no such fork point, or a message inside a step.
            QuotaExceeded, ConfigError: as a submission (an unknown agent, a quota).
        """
        entries = await self._store.checkpoint_log(original.id)
        point = fork_point(entries, at, original.id)
        state = continued(point.state, message) if message else point.state
        seed = ForkSeed(
            forked_from=original.id,
            point=f"{point.seq}@{point.record}" if point.record else str(point.seq),
            state=state.model_dump_json(),
            manifest=point.manifest,
        )
        files = await self._store.input_files(original.id)
        return await self._submit(agent or original.agent, original, files, seed, owner)
