"""WorkspaceIntake: the controller's check of the workspace snapshots a sandbox sends.

The sandbox is untrusted. Blob pieces are inflated with a bound (the declared size, the
per-file cap), their SHA-256 and size must match what they claim, and they stay in memory
until a snapshot names them. A snapshot must apply to the current manifest, every content
hash it names must be one verified in this snapshot or one of this job's own lineage
(``known``: never merely "in the tenant's store", else a guessed hash would restore another
job's file), and its digest, file count and size are recomputed. Only then are the blobs and
the manifest written. Any lie raises :class:`WorkspaceViolation` and nothing is written.
Verified blobs wait in memory (at most ``max_bytes`` of content per snapshot); inflating,
hashing and checking a manifest run on a worker thread. Calls are made one at a time, in the
order of the events.
"""

from __future__ import annotations

import asyncio
import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Literal, Protocol

from airlock.errors import AirlockError
from airlock.policy import (
    EMPTY_MANIFEST,
    ManifestEntry,
    ManifestRefused,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
    stored_blob,
)

from ._blobs import BlobStore

__all__ = ["WorkspaceIntake", "WorkspaceRows", "WorkspaceViolation"]

#: How much larger than its content a zlib stream may be (headers, stored blocks).
_ZLIB_SLACK = 1024


class WorkspaceViolation(AirlockError):
    """The sandbox sent a workspace snapshot no well-behaved runner sends (the job fails)."""

    kind = "isolation_violation"


class WorkspaceRows(Protocol):
    """The rows the intake writes (the job store's workspace methods)."""

    async def note_blob(self, tenant: str, sha256: str, size: int, stored: int) -> None: ...

    async def put_manifest(self, tenant: str, manifest: WorkspaceManifest) -> None: ...


@dataclass
class _Pending:
    """A blob whose pieces are arriving."""

    sha256: str
    size: int
    compression: Literal["none", "zlib"]
    inflater: zlib._Decompress | None
    hasher: hashlib._Hash = field(default_factory=hashlib.sha256)
    plain: int = 0
    raw: bytearray = field(default_factory=bytearray)


class WorkspaceIntake:
    """The snapshots of one execution of a job (or of a long-lived sandbox's pause), checked
    before anything is stored.

    Args:
        blobs: where the tenant's blobs go.
        store: where the manifests and blob rows go.
        tenant: the job's tenant.
        job_id: the job (named in refusals; a sandbox's pause: ``sandbox <id>``).
        base: the manifest the sandbox's workspace starts from (restored, or empty). A runner
            that holds another one sends a full snapshot (its base the empty manifest's).
        known: the content hashes of this job's lineage (earlier manifests, the fork base).
        max_bytes: the workspace's cap (uncompressed); also caps one file.
    """

    def __init__(
        self,
        blobs: BlobStore,
        store: WorkspaceRows,
        tenant: str,
        job_id: str,
        base: WorkspaceManifest,
        known: set[str],
        max_bytes: int,
    ) -> None:
        self._blobs, self._store, self._tenant, self._job = blobs, store, tenant, job_id
        self.manifest = base
        self._known = set(known) | set(base.hashes())
        self._sizes = {e.sha256: e.size for e in base.entries}
        self._max = max_bytes
        self._pending: _Pending | None = None
        self._staged: dict[str, tuple[int, bytes]] = {}
        self.stop: WorkspaceStopped | None = None

    def _refuse(self, reason: str) -> WorkspaceViolation:
        who = self._job if " " in self._job else f"job {self._job}"
        return WorkspaceViolation(f"{who}: workspace snapshot refused: {reason}")

    async def blob(self, ev: WorkspaceBlob) -> None:
        """Take one piece of a blob; the last one verifies it (hash, size) and stages it."""
        pending = self._piece_of(ev)
        await asyncio.to_thread(self._take, pending, ev.data)  # inflating and hashing: CPU
        if ev.last:
            self._pending = None
            await asyncio.to_thread(self._finish, pending)

    def _piece_of(self, ev: WorkspaceBlob) -> _Pending:
        pending = self._pending
        if pending is not None:
            if (pending.sha256, pending.size, pending.compression) != (ev.sha256, ev.size, ev.compression):
                raise self._refuse(f"a piece of blob {ev.sha256} came amid the pieces of {pending.sha256}")
            return pending
        if ev.size > self._max:
            raise self._refuse(f"blob {ev.sha256} claims {ev.size} bytes, over the cap of {self._max}")
        staged = sum(size for size, _ in self._staged.values())
        if staged + ev.size > self._max:
            raise self._refuse(f"blobs sent for one snapshot exceed the cap of {self._max} bytes")
        inflater = zlib.decompressobj() if ev.compression == "zlib" else None
        self._pending = _Pending(ev.sha256, ev.size, ev.compression, inflater)
        return self._pending

    def _take(self, pending: _Pending, data: bytes) -> None:
        pending.raw += data
        if len(pending.raw) > pending.size + pending.size // 100 + _ZLIB_SLACK:
            raise self._refuse(f"blob {pending.sha256} sends more bytes than its {pending.size} bytes need")
        left = pending.size - pending.plain
        if pending.inflater is None:
            plain = data
        else:
            try:
                plain = pending.inflater.decompress(data, left + 1)
            except zlib.error as e:
                raise self._refuse(f"blob {pending.sha256} is not a zlib stream ({e})") from None
        if len(plain) > left:
            raise self._refuse(f"blob {pending.sha256} inflates past its declared {pending.size} bytes")
        pending.plain += len(plain)
        pending.hasher.update(plain)

    def _finish(self, pending: _Pending) -> None:
        sha = pending.sha256
        if pending.inflater is not None and not (pending.inflater.eof and not pending.inflater.unused_data):
            raise self._refuse(f"blob {sha}: the zlib stream is incomplete or has bytes after its end")
        if pending.plain != pending.size:
            raise self._refuse(f"blob {sha} holds {pending.plain} bytes, not the {pending.size} it claims")
        if pending.hasher.hexdigest() != sha:
            raise self._refuse(f"blob claimed as {sha} has SHA-256 {pending.hasher.hexdigest()}")
        raw = bytes(pending.raw)
        self._staged[sha] = (pending.size, stored_blob(pending.compression, raw))

    async def snapshot(self, ev: WorkspaceSnapshot) -> WorkspaceManifest:
        """Verify the snapshot against the current manifest and the verified blobs, then store
        the new blobs and the manifest; the new manifest (WorkspaceViolation: a lie)."""
        after = await asyncio.to_thread(self._verify, ev)  # a large manifest: CPU
        await self._commit(ev, after)
        return after

    def _verify(self, ev: WorkspaceSnapshot) -> WorkspaceManifest:
        if self.stop is not None:
            raise self._refuse(f"a snapshot came after snapshots stopped ({self.stop.reason})")
        if self._pending is not None:
            raise self._refuse(f"blob {self._pending.sha256} is unfinished when the snapshot came")
        base = self.manifest
        if ev.base == EMPTY_MANIFEST.digest:
            base = EMPTY_MANIFEST  # a full snapshot: every file is in ``changed``
        elif ev.base != base.digest:
            raise self._refuse(f"it applies to {ev.base}, but the workspace is {self.manifest.digest}")
        try:
            after = base.apply(ev.changed, ev.deleted)
        except ManifestRefused as e:
            raise self._refuse(str(e)) from None
        for entry in ev.changed:
            self._check_content(entry)
        self._check_totals(ev, after)
        return after

    def _check_content(self, entry: ManifestEntry) -> None:
        staged = self._staged.get(entry.sha256)
        if staged is not None:
            size = staged[0]
        elif entry.sha256 in self._known:
            size = self._sizes.get(entry.sha256, entry.size)
        else:
            raise self._refuse(f"file {entry.path!r} names content {entry.sha256} that was never sent")
        if size != entry.size:
            raise self._refuse(f"file {entry.path!r} claims {entry.size} bytes; its content has {size}")

    def _check_totals(self, ev: WorkspaceSnapshot, after: WorkspaceManifest) -> None:
        if after.digest != ev.manifest:
            raise self._refuse(f"the files make manifest {after.digest}, not the claimed {ev.manifest}")
        if (after.files, after.total_bytes) != (ev.files, ev.total_bytes):
            raise self._refuse(
                f"it claims {ev.files} files / {ev.total_bytes} bytes; "
                f"the files are {after.files} / {after.total_bytes}"
            )
        if after.total_bytes > self._max:
            raise self._refuse(f"the workspace's {after.total_bytes} bytes exceed the cap of {self._max}")

    async def _commit(self, ev: WorkspaceSnapshot, after: WorkspaceManifest) -> None:
        used = {e.sha256 for e in ev.changed} & set(self._staged)
        for sha in sorted(used):
            size, data = self._staged[sha]
            if not await self._blobs.has(self._tenant, sha):
                await self._blobs.put(self._tenant, sha, data)
            await self._store.note_blob(self._tenant, sha, size, len(data))
            self._sizes[sha] = size
        await self._store.put_manifest(self._tenant, after)
        self._known |= after.hashes()
        self._staged.clear()
        self.manifest = after

    def stopped(self, ev: WorkspaceStopped) -> None:
        """Snapshots stopped for this execution (the last manifest stays the one to restore)."""
        self.stop = ev
        self._pending = None
        self._staged.clear()
