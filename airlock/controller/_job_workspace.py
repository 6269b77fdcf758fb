"""A job's workspace between its sandboxes: what an execution restores, and the snapshots it
sends, verified and kept.

An execution of a job that resumes (a lost sandbox, a restart, a failover, a fork) starts
from the manifest of the checkpoint it continues from; its files come back from the blob
store before the turn goes on. While it runs, the runner sends a snapshot before each
checkpoint whose workspace changed; :class:`WorkspaceIntake` checks it (the sandbox is
untrusted) and keeps its blobs, and the next checkpoint names the new manifest.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from airlock.behaviour import DurabilityPolicy
from airlock.jobs import Job, JobEventData, LogLine, WorkspaceChanged
from airlock.policy import (
    EMPTY_MANIFEST,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
)
from airlock.sandbox import WorkspaceRestore
from layer0 import EnvError, LogLevel

from ._blobs import BlobStore
from ._store import JobStore
from ._workspace_intake import WorkspaceIntake

__all__ = ["JobWorkspace", "KeptWorkspace", "WorkspaceExecution"]

_log = logging.getLogger("airlock.jobs")

#: A workspace event of the execution, as the job's record keeps it.
Emit = Callable[[JobEventData], Awaitable[object]]


class WorkspaceExecution:
    """One execution's workspace: the restore it starts with, and the intake of its snapshots.

    Attributes:
        restore: the files the turn starts with (None: a fresh workspace, the input files).
        snapshot_bytes: the runner snapshots while the workspace holds at most this many
            bytes (None: snapshots are off for the agent, or no blob store is configured).
        digest: the manifest the job's next checkpoint names ("" before the first snapshot).
        held: without a restore, the manifest of the files the turn starts with (a
            long-lived sandbox's), which the runner's snapshots start from.
    """

    def __init__(
        self,
        *,
        intake: WorkspaceIntake | None,
        restore: WorkspaceRestore | None,
        snapshot_bytes: int | None,
        digest: str,
        emit: Emit,
        held: WorkspaceManifest | None = None,
    ) -> None:
        self._intake = intake
        self.held = held
        self.restore = restore
        self.snapshot_bytes = snapshot_bytes
        self.digest = digest
        self._emit = emit

    async def take(self, event: object) -> bool:
        """Follow ``event`` if it is a workspace event (True); the others are not its own.

        Raises:
            WorkspaceViolation: the snapshot is a lie (the job fails).
        """
        if not isinstance(event, WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped):
            return False
        if self._intake is None:
            # Snapshots were not asked for: a runner sending them anyway is ignored, not trusted.
            return True
        if isinstance(event, WorkspaceBlob):
            await self._intake.blob(event)
        elif isinstance(event, WorkspaceSnapshot):
            manifest = await self._intake.snapshot(event)
            self.digest = manifest.digest
            await self._emit(
                WorkspaceChanged(
                    phase="saved", manifest=self.digest, files=manifest.files, bytes=manifest.total_bytes
                )
            )
        else:
            self._intake.stopped(event)
            await self._stopped(event)
        return True

    async def _stopped(self, event: WorkspaceStopped) -> None:
        kept = self.digest or "none"
        reason = (
            f"workspace snapshots stopped: {event.reason}; a resume restores the last snapshot "
            f"({kept}), older than the conversation"
        )
        await self._emit(
            WorkspaceChanged(
                phase="stopped",
                manifest=self.digest,
                bytes=event.bytes,
                max_bytes=event.max_bytes,
                reason=event.reason,
            )
        )
        await self._emit(LogLine(level=LogLevel.WARN, message=reason, source="controller"))


@dataclass(frozen=True)
class KeptWorkspace:
    """The workspace of the long-lived sandbox a job runs in.

    Attributes:
        manifest: the digest of the sandbox's last snapshot (None: none yet).
        fresh: its box was just opened (a resume, a lost box): the workspace is restored
            before the turn; else the files are there already.
    """

    manifest: str | None
    fresh: bool


class JobWorkspace:
    """Opens each execution's workspace from the job's last checkpoint (or the long-lived
    sandbox it runs in).

    Args:
        store: the checkpoints and the manifests.
        blobs: the tenants' file contents (None: workspaces are not kept; jobs resume with the
            input files only).
    """

    def __init__(self, store: JobStore, blobs: BlobStore | None) -> None:
        self._store = store
        self._blobs = blobs

    async def execution(
        self, job: Job, durability: DurabilityPolicy, emit: Emit, kept: KeptWorkspace | None = None
    ) -> WorkspaceExecution:
        """The workspace the job's next execution starts with and keeps. In a long-lived
        sandbox (``kept``), a fresh box is restored from the job's own checkpoint (a resume),
        else the sandbox's last snapshot, whatever the agent's snapshot policy."""
        policy = durability.workspace
        fresh = kept is not None and kept.fresh
        if self._blobs is None or not (policy.snapshots or fresh):
            return WorkspaceExecution(intake=None, restore=None, snapshot_bytes=None, digest="", emit=emit)
        if kept is None:
            restored = held = await self._last_manifest(job, emit)
        elif kept.fresh:
            restored = held = await self._last_manifest(job, emit) or await self._named(
                job, kept.manifest, emit
            )
        else:
            restored, held = None, await self._named(job, kept.manifest, emit)
        restore = await self._restore(job, restored, emit) if restored is not None else None
        base = held or EMPTY_MANIFEST
        intake = None
        if policy.snapshots:
            intake = WorkspaceIntake(
                self._blobs,
                self._store,
                job.tenant,
                job.id,
                base=base,
                known=set(base.hashes()),
                max_bytes=policy.max_bytes,
            )
        return WorkspaceExecution(
            intake=intake,
            restore=restore,
            snapshot_bytes=policy.max_bytes if policy.snapshots else None,
            digest=held.digest if held is not None else "",
            emit=emit,
            held=held if restore is None else None,
        )

    async def _restore(self, job: Job, manifest: WorkspaceManifest, emit: Emit) -> WorkspaceRestore:
        """The restore of ``manifest``'s files from the tenant's blobs (announced as an event)."""
        assert self._blobs is not None
        blobs, tenant = self._blobs, job.tenant

        async def read(sha256: str) -> bytes:
            try:
                return await blobs.get(tenant, sha256)
            except KeyError:
                raise EnvError.provision_failed(
                    f"the workspace to restore names blob {sha256}, which the blob store no longer holds"
                ) from None

        await emit(
            WorkspaceChanged(
                phase="restored", manifest=manifest.digest, files=manifest.files, bytes=manifest.total_bytes
            )
        )
        return WorkspaceRestore(manifest, read)

    async def _last_manifest(self, job: Job, emit: Emit) -> WorkspaceManifest | None:
        """The manifest the job's checkpoint names (None: no checkpoint, or no snapshot yet)."""
        return await self._named(job, await self._store.checkpoint_manifest(job.id), emit)

    async def _named(self, job: Job, digest: str | None, emit: Emit) -> WorkspaceManifest | None:
        """The tenant's manifest ``digest`` (None: none named, or gone: a warning says so)."""
        if not digest:
            return None
        manifest = await self._store.manifest(job.tenant, digest)
        if manifest is None:  # pruned under it, or a store restored without its manifests
            message = f"the workspace snapshot {digest} is gone; the job resumes without its files"
            _log.warning("job %s: %s", job.id, message)
            await emit(LogLine(level=LogLevel.WARN, message=message, source="controller"))
        return manifest
