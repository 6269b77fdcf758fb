"""Restoring a workspace from a manifest and its blobs (RestoreWorkspace), confined to it.

The stream holds the manifest's entries, then each distinct content as blob pieces (zlib).
A piece is inflated no further than the blob's declared size, the content's SHA-256 and size
are checked, and it is written (through ``O_NOFOLLOW`` directory descriptors, as input files
are) to every entry that names it. The workspace must be empty when the restore starts.
Writing blocks: call :meth:`Restore.write` in a thread.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path

from airlock.policy import ManifestEntry, ManifestRefused, WorkspaceBlob, WorkspaceManifest

from ._files import write_file
from ._snapshot import StatKey, stat_key

__all__ = ["Restore", "RestoreRefused", "workspace_is_empty"]

#: A restore stream that does not describe a workspace (says why).
RestoreRefused = ManifestRefused


def workspace_is_empty(workspace: Path) -> bool:
    """Whether ``workspace`` holds no entry at all."""
    with os.scandir(workspace) as entries:
        return next(entries, None) is None


@dataclass
class _Pending:
    """The blob being received: its hash, declared size, and content inflated so far."""

    sha256: str
    size: int
    inflate: zlib._Decompress | None
    data: bytearray = field(default_factory=bytearray)


class Restore:
    """One RestoreWorkspace stream: :meth:`entry` for each entry, then :meth:`piece` for each
    blob piece (a completed blob is returned, to :meth:`write` in a thread), then :meth:`finish`."""

    def __init__(self, workspace: Path, max_entries: int = 100_000) -> None:
        self.workspace = workspace
        self.max_entries = max_entries
        self._entries: list[ManifestEntry] = []
        self._manifest: WorkspaceManifest | None = None
        self._by_sha: dict[str, list[ManifestEntry]] = {}
        self._pending: _Pending | None = None
        self._written: set[str] = set()
        self.keys: dict[str, StatKey] = {}

    def entry(self, entry: ManifestEntry) -> None:
        """One entry of the manifest (all come before the first blob)."""
        if self._manifest is not None:
            raise RestoreRefused("a manifest entry came after a blob")
        if len(self._entries) >= self.max_entries:
            raise RestoreRefused(f"more than {self.max_entries} files")
        self._entries.append(entry)

    def _manifest_now(self) -> WorkspaceManifest:
        if self._manifest is None:
            self._manifest = WorkspaceManifest.of(self._entries)
            for e in self._manifest.entries:
                self._by_sha.setdefault(e.sha256, []).append(e)
        return self._manifest

    def piece(self, blob: WorkspaceBlob) -> tuple[str, bytes] | None:
        """One blob piece; the blob's hash and plain content when it is complete and checked."""
        self._manifest_now()
        pending = self._pending
        if pending is None:
            pending = self._pending = self._start(blob)
        elif blob.sha256 != pending.sha256:
            raise RestoreRefused(f"blob {pending.sha256[:12]}… ended without its last piece")
        if pending.inflate is None:
            pending.data += blob.data
        else:
            room = pending.size - len(pending.data) + 1
            try:
                pending.data += pending.inflate.decompress(blob.data, room)
            except zlib.error as e:
                raise RestoreRefused(f"blob {blob.sha256[:12]}… is not valid zlib data ({e})") from None
            if pending.inflate.unconsumed_tail:
                raise RestoreRefused(f"blob {blob.sha256[:12]}… inflates past its size {pending.size}")
        if len(pending.data) > pending.size:
            raise RestoreRefused(f"blob {blob.sha256[:12]}… is larger than its size {pending.size}")
        if not blob.last:
            return None
        self._pending = None
        data = bytes(pending.data)
        if len(data) != pending.size or sha256(data).hexdigest() != pending.sha256:
            raise RestoreRefused(f"blob {blob.sha256[:12]}… does not match its hash or size")
        self._written.add(pending.sha256)
        return pending.sha256, data

    def _start(self, blob: WorkspaceBlob) -> _Pending:
        named = self._by_sha.get(blob.sha256)
        if named is None:
            raise RestoreRefused(f"blob {blob.sha256[:12]}… is named by no entry")
        if blob.sha256 in self._written:
            raise RestoreRefused(f"blob {blob.sha256[:12]}… was sent twice")
        if blob.size != named[0].size:
            raise RestoreRefused(f"blob {blob.sha256[:12]}… declares another size than its entry")
        inflate = zlib.decompressobj() if blob.compression == "zlib" else None
        return _Pending(blob.sha256, blob.size, inflate)

    def write(self, sha: str, data: bytes) -> None:
        """Write ``data`` to every entry whose content it is (blocking)."""
        for entry in self._by_sha[sha]:
            info = write_file(self.workspace, entry.path, data, executable=entry.executable)
            self.keys[entry.path] = stat_key(info)

    def finish(self) -> WorkspaceManifest:
        """The manifest written, or RestoreRefused (a blob cut short or never sent)."""
        manifest = self._manifest_now()
        if self._pending is not None:
            raise RestoreRefused(f"blob {self._pending.sha256[:12]}… ended without its last piece")
        missing = manifest.hashes() - self._written
        if missing:
            raise RestoreRefused(f"{len(missing)} file content(s) named but not sent")
        return manifest
