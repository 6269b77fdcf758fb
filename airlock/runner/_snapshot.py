"""Workspace snapshots: what changed in the workspace since the last one, as events.

One :class:`Snapshotter` lives as long as the runner process, so the executions of a box
share it. It keeps a stat index (path → inode, size, mtime, ctime, mode → SHA-256): a scan
hashes only the files whose stat changed (``ctime`` cannot be set from userland, so
``touch -d`` does not hide a change). A scan yields the blobs of contents this process has
not sent yet (zlib level 1, or as they are when a sample shows zlib gains nothing; in
pieces), then one :class:`WorkspaceSnapshot` against the manifest it sent before. Symbolic
links, FIFOs, sockets and devices are never followed or read: they are named in
``skipped``. Scanning blocks: iterate it in a thread.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from hashlib import sha256
from pathlib import Path
from typing import Any, Literal

from airlock.policy import (
    EMPTY_MANIFEST,
    FileRefused,
    ManifestEntry,
    SkippedFile,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
)
from airlock.policy.workspace import MAX_NAME_CHARS, MAX_PATH_CHARS

from ._files import MAX_WALKED, SKIPPED_SPECIAL, SKIPPED_SYMLINK, open_confined_dir
from ._transfer import CHUNK_BYTES

__all__ = ["Snapshotter", "StatKey", "WorkspaceEvent", "stat_key"]

WorkspaceEvent = WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped

#: What identifies a file's content without reading it.
StatKey = tuple[int, int, int, int, int]

_READ_BYTES = 1024 * 1024
#: What a file's compressibility is judged on.
_SAMPLE_BYTES = 4096
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def stat_key(info: os.stat_result) -> StatKey:
    """A file's stat key: inode, size, mtime and ctime (ns), mode."""
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


@dataclass(frozen=True)
class _Pieces:
    """A file's content as sent: how it is compressed, in pieces."""

    compression: Literal["none", "zlib"]
    pieces: list[bytes]


class _Changed(Exception):
    """A file changed while it was read (the next scan picks it up)."""


@dataclass
class _Walk:
    """What one walk found: each regular file's stat key, and the entries skipped."""

    files: dict[str, StatKey] = field(default_factory=dict)
    skipped: list[SkippedFile] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        return sum(key[1] for key in self.files.values())


def _walk(workspace: Path) -> _Walk:
    """Every entry below ``workspace``, through ``O_NOFOLLOW`` directory descriptors.

    Raises:
        FileRefused: more than ``MAX_WALKED`` entries, or a directory replaced by a link.
    """
    found, stack, walked = _Walk(), [""], 0
    while stack:
        prefix = stack.pop()
        parts = prefix.split("/")[:-1] if prefix else []
        fd = open_confined_dir(workspace, parts, shown=prefix or ".")
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    walked += 1
                    if walked > MAX_WALKED:
                        raise FileRefused(f"the workspace holds more than {MAX_WALKED} entries")
                    _visit(found, stack, prefix + entry.name, entry)
        finally:
            os.close(fd)
    return found


def _holdable(name: str, rel: str) -> bool:
    """Whether a manifest can hold ``rel`` (``prefix + name``, the prefix already held): what
    :func:`~airlock.policy.workspace_path` checks of one more part, without re-reading the path."""
    if name in (".", "..") or "\\" in name or len(name) > MAX_NAME_CHARS or len(rel) > MAX_PATH_CHARS:
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _visit(found: _Walk, stack: list[str], rel: str, entry: os.DirEntry[str]) -> None:
    ok = _holdable(entry.name, rel)
    shown = rel.encode("utf-8", "backslashreplace").decode("utf-8")
    if not ok:
        found.skipped.append(SkippedFile(path=shown[:1024], reason="a name a manifest cannot hold"))
    elif entry.is_symlink():
        found.skipped.append(SkippedFile(path=rel, reason=SKIPPED_SYMLINK))
    elif entry.is_dir(follow_symlinks=False):
        stack.append(rel + "/")
    else:
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISREG(info.st_mode):
            found.files[rel] = stat_key(info)
        else:
            found.skipped.append(SkippedFile(path=rel, reason=SKIPPED_SPECIAL))


def _compressible(chunk: bytes) -> bool:
    """Whether a file whose first chunk this is gains from zlib (judged on a sample: random or
    already compressed content is sent as it is, at the speed of hashing it)."""
    sample = chunk[:_SAMPLE_BYTES]
    return len(zlib.compress(sample, 1)) < len(sample) * 0.9


def _read_file(workspace: Path, path: str, key: StatKey) -> tuple[ManifestEntry, StatKey, _Pieces]:
    """``path``'s entry, its stat key as read and its content, zlib-compressed (level 1) when
    that gains, in pieces of at most ``CHUNK_BYTES``, read through ``O_NOFOLLOW``.

    Raises:
        _Changed: it is gone or no longer a regular file.
    """
    parts = path.split("/")
    try:
        parent = open_confined_dir(workspace, parts[:-1], shown=path)
    except (FileRefused, OSError) as e:
        raise _Changed(path) from e
    try:
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
    except OSError as e:
        raise _Changed(path) from e
    finally:
        os.close(parent)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Changed(path)
        digest, out, size = sha256(), bytearray(), 0
        squeeze: Any = None
        while chunk := os.read(fd, _READ_BYTES):
            if size == 0 and _compressible(chunk):
                squeeze = zlib.compressobj(1)
            size += len(chunk)
            digest.update(chunk)
            out += squeeze.compress(chunk) if squeeze is not None else chunk
        if squeeze is not None:
            out += squeeze.flush()
    finally:
        os.close(fd)
    entry = ManifestEntry(
        path=path, sha256=digest.hexdigest(), size=size, executable=bool(info.st_mode & 0o100)
    )
    pieces = [bytes(out[at : at + CHUNK_BYTES]) for at in range(0, max(len(out), 1), CHUNK_BYTES)]
    return entry, stat_key(info), _Pieces("zlib" if squeeze is not None else "none", pieces)


class Snapshotter:
    """The workspace's snapshots for one runner process (see the module docstring)."""

    def __init__(self, workspace: Path, max_bytes: int = 0) -> None:
        self.workspace = workspace
        self.max_bytes = max_bytes
        self._index: dict[str, tuple[StatKey, ManifestEntry]] = {}
        self._manifest = EMPTY_MANIFEST
        self._digest = EMPTY_MANIFEST.digest
        self._sent: set[str] = set()
        self._seq = 0
        self._stopped = False
        self._forced = False

    @property
    def manifest(self) -> WorkspaceManifest:
        """The manifest last sent (or restored)."""
        return self._manifest

    def begin(self, max_bytes: int, base: str) -> None:
        """A new execution (or a SnapshotWorkspace call) snapshots up to ``max_bytes`` (0: no
        cap); a caller holding another manifest than ours (``base``) gets a full snapshot."""
        self.max_bytes, self._stopped = max_bytes, False
        if base != self._digest:
            self._manifest, self._sent, self._forced = EMPTY_MANIFEST, set(), True
            self._digest = EMPTY_MANIFEST.digest

    def seed(self, manifest: WorkspaceManifest, keys: dict[str, StatKey]) -> None:
        """The workspace was just restored to ``manifest`` (its files' stat keys as written):
        the next snapshot is an increment against it, its blobs known as sent."""
        by_path = manifest.by_path()
        self._index = {p: (keys[p], by_path[p]) for p in keys if p in by_path}
        self._manifest, self._sent, self._forced = manifest, set(manifest.hashes()), False
        self._digest = manifest.digest

    def scan(self) -> Generator[WorkspaceEvent, None, None]:
        """The events of one snapshot: nothing if nothing changed, blob pieces then a
        WorkspaceSnapshot, or one WorkspaceStopped (then nothing until the next :meth:`begin`)."""
        if self._stopped:
            return
        try:
            walk = _walk(self.workspace)
        except (FileRefused, OSError) as e:
            yield self._stop(f"the workspace could not be read: {e}", 0)
            return
        total = walk.total_bytes
        if self.max_bytes and total > self.max_bytes:
            yield self._stop(
                f"the workspace holds {total} bytes, more than the snapshot cap of {self.max_bytes}", total
            )
            return
        yield from self._snapshot(walk)

    def stop(self, reason: str) -> WorkspaceStopped:
        """Stop snapshots until the next :meth:`begin` (e.g. a snapshot too large to send)."""
        return self._stop(reason, 0)

    def _stop(self, reason: str, size: int) -> WorkspaceStopped:
        self._stopped = True
        return WorkspaceStopped(reason=reason[:1000], bytes=size, max_bytes=self.max_bytes)

    def _snapshot(self, walk: _Walk) -> Iterator[WorkspaceEvent]:
        entries: list[ManifestEntry] = []
        pending: set[str] = set()
        read = False
        for path, key in sorted(walk.files.items()):
            known = self._index.get(path)
            if known is not None and known[0] == key and known[1].sha256 in self._sent:
                entries.append(known[1])
                continue
            read = True
            try:
                entry, read_key, pieces = _read_file(self.workspace, path, key)
            except _Changed:
                self._index.pop(path, None)
                continue
            self._index[path] = (read_key, entry)
            entries.append(entry)
            if entry.sha256 not in self._sent and entry.sha256 not in pending:
                pending.add(entry.sha256)
                yield from _blob(entry, pieces)
        for gone in set(self._index) - set(walk.files):
            del self._index[gone]
        if not read and not self._forced and len(entries) == self._manifest.files:
            return  # every file as last sent, none gone: the manifest is the one sent
        # A walk's entries are sorted, valid paths of one tree (the controller checks them again).
        after = WorkspaceManifest.model_construct(entries=tuple(entries))
        changed, deleted = self._manifest.diff(after)
        if not changed and not deleted and not self._forced:
            return
        self._seq += 1
        digest = after.digest
        yield WorkspaceSnapshot(
            seq=self._seq,
            base=self._digest,
            manifest=digest,
            changed=tuple(changed),
            deleted=tuple(deleted),
            skipped=tuple(walk.skipped),
            total_bytes=after.total_bytes,
            files=after.files,
        )
        self._manifest, self._digest, self._forced = after, digest, False
        self._sent |= pending


def _blob(entry: ManifestEntry, content: _Pieces) -> Iterator[WorkspaceBlob]:
    pieces = content.pieces
    for i, piece in enumerate(pieces):
        yield WorkspaceBlob(
            sha256=entry.sha256,
            size=entry.size,
            compression=content.compression,
            data=piece,
            last=i == len(pieces) - 1,
        )
