"""The controller's intake of a sandbox's workspace snapshots: every blob and manifest checked
(the sandbox is untrusted) before anything is written.

A blob's pieces arrive in a row; once whole, it is inflated within its declared size (a zlib
bomb stops there) and its SHA-256 and size must match. A snapshot must apply to the manifest
the intake holds, name only paths a workspace can hold, claim only contents it sent or that
this job's workspace already held (never a hash merely present in the tenant's store: that
would let a sandbox read another job's file by guessing its hash), and its claimed digest,
file count and size must be what the controller computes. Only then are the blobs stored (in
the tenant's namespace) and the manifest kept.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field

from airlock.errors import AirlockError, shorten
from airlock.policy import (
    ManifestRefused,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
)

from ._blobs import BlobStore
from ._store import JobStore

__all__ = ["WorkspaceIntake", "WorkspaceViolation"]


class WorkspaceViolation(AirlockError):
    """The sandbox sent a workspace snapshot no well-behaved runner sends (the job fails)."""

    kind = "isolation_violation"


def _zlib_bound(size: int) -> int:
    """The most bytes zlib needs for ``size`` bytes (its worst case, with room)."""
    return size + size // 100 + 1024


@dataclass
class _Open:
    """The blob whose pieces are arriving."""

    sha256: str
    size: int
    compression: str
    pieces: list[bytes] = field(default_factory=list)
    received: int = 0


class WorkspaceIntake:
    """Checks and keeps one execution's workspace snapshots.

    Args:
        blobs: where the tenant's blobs go.
        store: where the tenant's manifests go.
        tenant: the job's tenant (its blobs' namespace).
        job_id: the job (named in refusals).
        base: the manifest the execution starts from (restored, or empty).
        known: content hashes this job's workspace holds already (its own lineage).
        max_bytes: the workspace's limit (uncompressed).
    """

    def __init__(
        self,
        blobs: BlobStore,
        store: JobStore,
        tenant: str,
        job_id: str,
        *,
        base: WorkspaceManifest,
        known: set[str],
        max_bytes: int,
    ) -> None:
        self._blobs = blobs
        self._store = store
        self._tenant = tenant
        self._job = job_id
        self.manifest = base
        self._known = set(known)
        self._sizes = {e.sha256: e.size for e in base.entries}
        self._max_bytes = max_bytes
        self._staged: dict[str, tuple[int, bytes]] = {}  # sha256 -> (size, zlib data)
        self._staged_bytes = 0
        self._open: _Open | None = None
        self.stopped: str | None = None

    def _refuse(self, reason: str) -> WorkspaceViolation:
        return WorkspaceViolation(f"job {self._job}: the sandbox sent a bad workspace snapshot: {reason}")

    async def blob(self, event: WorkspaceBlob) -> None:
        """Take one piece of a blob (verified once its last piece arrived; nothing written yet).

        Raises:
            WorkspaceViolation: interleaved pieces, a blob over the limit, or one whose content
                does not inflate to its declared hash and size.
        """
        self._not_stopped()
        current = self._open
        if current is None:
            if event.size > self._max_bytes or self._staged_bytes + event.size > self._max_bytes:
                raise self._refuse(f"blob {event.sha256} of {event.size} bytes exceeds the workspace's limit")
            current = self._open = _Open(event.sha256, event.size, event.compression)
        elif (event.sha256, event.size, event.compression) != (
            current.sha256,
            current.size,
            current.compression,
        ):
            raise self._refuse(f"blob {event.sha256}'s pieces interleave with those of {current.sha256}")
        current.received += len(event.data)
        if current.received > _zlib_bound(current.size):
            raise self._refuse(f"blob {current.sha256} sent more bytes than {current.size} bytes need")
        current.pieces.append(event.data)
        if event.last:
            self._open = None
            self._stage(current)

    def _stage(self, blob: _Open) -> None:
        data = b"".join(blob.pieces)
        plain = self._inflated(blob, data)
        if len(plain) != blob.size or hashlib.sha256(plain).hexdigest() != blob.sha256:
            raise self._refuse(f"blob {blob.sha256}'s content does not match its hash and size")
        stored = data if blob.compression == "zlib" else zlib.compress(plain, 6)
        if blob.sha256 not in self._staged:
            self._staged_bytes += blob.size
        self._staged[blob.sha256] = (blob.size, stored)

    def _inflated(self, blob: _Open, data: bytes) -> bytes:
        if blob.compression != "zlib":
            return data
        inflater = zlib.decompressobj()
        try:
            plain = inflater.decompress(data, blob.size + 1)
        except zlib.error as e:
            raise self._refuse(f"blob {blob.sha256} is not valid zlib data ({e})") from None
        if len(plain) > blob.size or inflater.unconsumed_tail or not inflater.eof:
            raise self._refuse(f"blob {blob.sha256} inflates past its declared {blob.size} bytes, or is cut")
        return plain

    async def snapshot(self, event: WorkspaceSnapshot) -> WorkspaceManifest:
        """Check a snapshot against the manifest held, store its new blobs and keep the new
        manifest; return it.

        Raises:
            WorkspaceViolation: any claim that does not hold (nothing is written then).
        """
        self._not_stopped()
        if self._open is not None:
            raise self._refuse(f"the snapshot came before blob {self._open.sha256}'s last piece")
        if event.base != self.manifest.digest:
            raise self._refuse(f"it applies to {event.base}, not to the workspace's {self.manifest.digest}")
        try:
            new = self.manifest.apply(event.changed, event.deleted)
        except ManifestRefused as e:
            raise self._refuse(shorten(str(e), 300)) from None
        self._check_claims(event, new)
        fresh = [(sha, *self._staged[sha]) for sha in sorted(new.hashes() & self._staged.keys())]
        for sha, _, data in fresh:
            if not await self._blobs.has(self._tenant, sha):
                await self._blobs.put(self._tenant, sha, data)
        await self._store.put_manifest(
            self._tenant, new, [(sha, size, len(data)) for sha, size, data in fresh]
        )
        self._known |= new.hashes()
        self._sizes |= {e.sha256: e.size for e in new.entries}
        self._staged.clear()
        self._staged_bytes = 0
        self.manifest = new
        return new

    def _check_claims(self, event: WorkspaceSnapshot, new: WorkspaceManifest) -> None:
        for entry in event.changed:
            if entry.sha256 in self._staged:
                size = self._staged[entry.sha256][0]
            elif entry.sha256 in self._known:
                size = self._sizes.get(entry.sha256, entry.size)
            else:
                raise self._refuse(f"file {entry.path!r} claims content {entry.sha256} it never sent")
            if size != entry.size:
                raise self._refuse(f"file {entry.path!r} claims {entry.size} bytes; its content has {size}")
        if new.digest != event.manifest:
            raise self._refuse(f"its manifest is {new.digest}, not the {event.manifest} it claims")
        if (new.files, new.total_bytes) != (event.files, event.total_bytes):
            raise self._refuse(
                f"it claims {event.files} files and {event.total_bytes} bytes; "
                f"the manifest holds {new.files} and {new.total_bytes}"
            )
        if new.total_bytes > self._max_bytes:
            raise self._refuse(
                f"the workspace holds {new.total_bytes} bytes, over its limit of {self._max_bytes}"
            )

    def stopped_at(self, event: WorkspaceStopped) -> None:
        """Snapshots stopped for this execution: the manifest held stays the last one."""
        self._staged.clear()
        self._staged_bytes = 0
        self._open = None
        self.stopped = event.reason or "stopped"

    def _not_stopped(self) -> None:
        if self.stopped is not None:
            raise self._refuse("it kept sending after its snapshots stopped")
