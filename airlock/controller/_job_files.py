"""A job's files: a job's input files (checked at submit, announced in its message
as its agent says, placed in the workspace before each of its turns) and its artifacts (what
the turn left under its agent's artifact globs, checked by the runner's client and kept in
the job store)."""

from __future__ import annotations

from collections.abc import Sequence

from airlock.behaviour import InputFilesPolicy
from airlock.jobs import LogLine, StoredFile
from airlock.policy import INPUT_CAPS, FileRefused, workspace_path
from airlock.sandbox import TurnHandle
from layer0 import Content, TextBlock, TurnInput

from ._job_events import JobEvents
from ._service_settings import JobNotFound


def checked_input_files(files: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """``files`` with normalised paths, in path order.

    Raises:
        FileRefused: a path that leaves the workspace, or one path twice; ``FilesOverCap``
            beyond :data:`~airlock.policy.INPUT_CAPS` (the whole set refused).
    """
    checked: dict[str, bytes] = {}
    for path, data in files:
        normal = workspace_path(path)
        if normal in checked:
            raise FileRefused(f"input file {normal} is given twice")
        checked[normal] = bytes(data)
    INPUT_CAPS.check({p: len(d) for p, d in checked.items()}, "input files")
    return sorted(checked.items())


def announced(input: TurnInput, files: Sequence[tuple[str, bytes]], policy: InputFilesPolicy) -> TurnInput:
    """``input`` with the announcement of its ``files`` (checked, in path order) as a text
    block after its message, as the agent's ``policy`` says; unchanged when it says nothing.
    Stored with the job, so every execution of it reads the same message."""
    text = policy.announcement(files)
    if text is None:
        return input
    message = Content.blocks([*input.message.as_blocks(), TextBlock(text=text)])
    return input.model_copy(update={"message": message})


class JobFiles:
    """A job's input files and artifacts as the job store keeps them."""

    def __init__(self, events: JobEvents) -> None:
        self._events = events
        self._store = events.store

    async def artifacts(self, job_id: str) -> list[StoredFile]:
        """The job's artifacts (path, size, SHA-256), in path order.

        Raises:
            JobNotFound: no such job.
        """
        await self._events.get(job_id)
        return await self._store.files(job_id, "artifact")

    async def artifact(self, job_id: str, path: str) -> bytes:
        """The content of one of the job's artifacts.

        Raises:
            JobNotFound: no such job, or no such artifact of it.
        """
        await self._events.get(job_id)
        data = await self._store.file_data(job_id, "artifact", path)
        if data is None:
            raise JobNotFound(f"job {job_id} has no artifact {path[:200]!r}")
        return data

    async def input_files(self, job_id: str) -> list[StoredFile]:
        """The job's input files (path, size, SHA-256), in path order (raises as :meth:`artifacts`)."""
        await self._events.get(job_id)
        return await self._store.files(job_id, "input")

    async def keep_artifacts(self, job_id: str, handle: TurnHandle, room: int | None = None) -> None:
        """Store what the turn left (replacing an earlier execution's) and say so on the job;
        a refused set is a warning naming why, and nothing is stored. Each warning's data
        names what it is about (``artifacts_refused``, ``artifact_skipped``). ``room``: the
        bytes its tenant's ``artifact_bytes`` quota still allows (a larger set is refused)."""
        if handle.artifacts_refused is not None:
            await self._events.emit(
                job_id,
                LogLine(
                    level="warn",
                    source="controller",
                    message=handle.artifacts_refused,
                    data={"artifacts_refused": True},
                ),
            )
            return
        found = handle.artifacts
        if found is None:
            return
        for path, reason in found.skipped:
            await self._events.emit(
                job_id,
                LogLine(
                    level="warn",
                    source="controller",
                    message=f"artifact {path} not collected: {reason}",
                    data={"artifact_skipped": path},
                ),
            )
        if not found.files:
            return
        size = sum(len(d) for d in found.files.values())
        if room is not None and size > room:
            message = (
                f"artifacts not kept: {size} bytes exceed what the tenant's artifact_bytes quota "
                f"leaves ({room})"
            )
            line = LogLine(
                level="warn", source="controller", message=message, data={"artifacts_refused": True}
            )
            await self._events.emit(job_id, line)
            return
        await self._store.save_artifacts(job_id, found.files.items())
        await self._events.emit(
            job_id,
            LogLine(
                level="info",
                source="controller",
                message=f"{len(found.files)} artifact(s) kept ({size} bytes)",
                data={"artifacts": list(found.files)},
            ),
        )
