"""TurnHandle: the controls of a sandboxed turn while it runs, the snapshot it resumes from,
the files it starts with and the artifacts it leaves.

A caller creates one per request (:attr:`SandboxRequest.handle`); the backend attaches the
runner's channel to it for the duration of the turn. Pause, resume, step and signal then
reach the runner inside the sandbox; outside that window they raise ``TurnNotRunning``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airlock.errors import AirlockError

if TYPE_CHECKING:
    from airlock.policy import WorkspaceManifest
    from airlock.runner import Artifacts, RemoteTurn, StepInfo

__all__ = ["TurnHandle", "TurnNotRunning", "WorkspaceRestore"]


@dataclass(frozen=True)
class WorkspaceRestore:
    """The workspace a turn starts in: ``manifest``'s files, each content read by ``read``
    (a SHA-256 in hex → the content zlib-compressed, as the blob store keeps it)."""

    manifest: WorkspaceManifest
    read: Callable[[str], Awaitable[bytes]]


class TurnNotRunning(AirlockError):
    """The turn has no runner to control now (not started yet, or already ended)."""


class TurnHandle:
    """Controls of one sandboxed turn.

    Args:
        resume_from: a session snapshot (``SessionState`` JSON, every message) the turn continues
            from instead of starting anew.
        start_paused: the turn pauses before its first step.
        files: ``(path, content)`` written into the workspace before the turn (paths relative
            to it).
        collect_artifacts: after a turn that ended, collect the files under its agent's
            artifact globs into :attr:`artifacts` (a refusal: :attr:`artifacts_refused`).
        restore: the workspace restored before the turn (instead of ``files``); the runner
            must report the same manifest digest back or the turn does not start.
        snapshot_bytes: the runner snapshots the workspace before each checkpoint while it
            holds at most this many bytes (``None``: no snapshots).
        workspace_base: without ``restore``, the manifest the caller holds of the workspace
            the turn starts in (a long-lived sandbox's; None: the empty one).
    """

    def __init__(
        self,
        resume_from: str | None = None,
        *,
        start_paused: bool = False,
        files: Sequence[tuple[str, bytes]] = (),
        collect_artifacts: bool = False,
        restore: WorkspaceRestore | None = None,
        snapshot_bytes: int | None = None,
        workspace_base: WorkspaceManifest | None = None,
    ) -> None:
        self.resume_from = resume_from
        #: The turn starts paused, before its first step (then step or resume it).
        self.start_paused = start_paused
        self.files = list(files)
        self.collect_artifacts = collect_artifacts
        self.restore = restore
        self.snapshot_bytes = snapshot_bytes
        self.workspace_base = workspace_base
        #: What the turn left under its artifact globs (checked against the spec's caps).
        self.artifacts: Artifacts | None = None
        #: Why the artifacts were refused (over a cap, a path not confined), if they were.
        self.artifacts_refused: str | None = None
        self._remote: RemoteTurn | None = None

    def attach(self, remote: RemoteTurn) -> None:
        """The backend: the turn runs through ``remote`` from now on."""
        self._remote = remote

    def detach(self, remote: RemoteTurn) -> None:
        """The backend: the turn through ``remote`` ended."""
        if self._remote is remote:
            self._remote = None

    @property
    def running(self) -> bool:
        """Whether a runner is attached now."""
        return self._remote is not None

    def _current(self) -> RemoteTurn:
        if self._remote is None or self._remote.execution_id is None:
            raise TurnNotRunning("the turn is not running in a sandbox now")
        return self._remote

    async def pause(self) -> None:
        """Stop at the next step boundary.

        Raises:
            TurnNotRunning: no turn runs now.
            RunnerCallError: the runner refused or is unreachable.
        """
        await self._current().pause()

    async def resume(self) -> None:
        """Let a paused turn run on (raises as :meth:`pause`)."""
        await self._current().resume()

    async def step(self) -> StepInfo:
        """Run exactly one step of the paused turn (raises as :meth:`pause`; not paused:
        ``RunnerCallError`` ``FAILED_PRECONDITION``)."""
        return await self._current().step()

    async def signal(self, signal_type: str, data: Any = None) -> None:
        """Hand the turn a signal for its next step boundary (raises as :meth:`pause`)."""
        await self._current().signal(signal_type, data)
