"""A workspace's files as data: the manifest a snapshot names, and the events that carry one.

A manifest lists every regular file of a workspace, sorted by path, each with its SHA-256,
size and executable bit. Its digest (``sha256:<hex>`` of the canonical JSON of its entries)
names the workspace's content; two workspaces with the same files have the same digest.

The runner sends a snapshot as an increment against the manifest it last sent: blobs of the
new contents (zlib-compressed, in pieces), then the changed entries and the deleted paths.
The controller applies them with :meth:`WorkspaceManifest.apply`, which refuses anything a
well-behaved runner cannot send (a path outside the workspace, a file that is also a
directory, a deletion of what is not there), and checks the digest the runner claims.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .workspace import FileRefused, workspace_path

__all__ = [
    "EMPTY_MANIFEST",
    "ManifestEntry",
    "ManifestRefused",
    "SkippedFile",
    "WorkspaceBlob",
    "WorkspaceManifest",
    "WorkspaceSnapshot",
    "WorkspaceStopped",
    "sha256_hex",
    "stored_blob",
]

_HEX = r"^[0-9a-f]{64}$"
_DIGEST = r"^sha256:[0-9a-f]{64}$"


class ManifestRefused(FileRefused):
    """A snapshot or manifest that does not describe a workspace; says why."""


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of ``data`` as 64 lowercase hex digits (how blobs are named)."""
    return hashlib.sha256(data).hexdigest()


def stored_blob(compression: Literal["none", "zlib"], data: bytes) -> bytes:
    """A blob's whole content as sent, as a blob store keeps it: a zlib stream (content sent
    as it is, found incompressible, is kept as a stored, level 0, stream)."""
    return data if compression == "zlib" else zlib.compress(data, 0)


class ManifestEntry(BaseModel):
    """One regular file of a workspace: its path (relative, normalised), content hash and size."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    sha256: str = Field(pattern=_HEX)
    size: int = Field(ge=0)
    executable: bool = False


class WorkspaceManifest(BaseModel):
    """Every regular file of a workspace, sorted by path (build with :meth:`of`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entries: tuple[ManifestEntry, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[ManifestEntry]) -> WorkspaceManifest:
        """The manifest of ``entries`` (any order), or ManifestRefused (a bad or repeated
        path, a file that is also a directory of another)."""
        by_path: dict[str, ManifestEntry] = {}
        for entry in entries:
            path = _checked_path(entry.path)
            if path in by_path:
                raise ManifestRefused(f"file {path!r} is listed twice")
            by_path[path] = entry if path == entry.path else entry.model_copy(update={"path": path})
        _check_tree(by_path)
        return cls(entries=tuple(by_path[p] for p in sorted(by_path)))

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the canonical JSON of the entries (the empty manifest has one too)."""
        rows = [[e.path, e.sha256, e.size, e.executable] for e in self.entries]
        text = json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
        return "sha256:" + sha256_hex(text.encode())

    @property
    def total_bytes(self) -> int:
        """The files' sizes summed (uncompressed)."""
        return sum(e.size for e in self.entries)

    @property
    def files(self) -> int:
        """How many files the manifest lists."""
        return len(self.entries)

    def by_path(self) -> dict[str, ManifestEntry]:
        """The entries keyed by path."""
        return {e.path: e for e in self.entries}

    def hashes(self) -> frozenset[str]:
        """The distinct content hashes the manifest names."""
        return frozenset(e.sha256 for e in self.entries)

    def apply(self, changed: Iterable[ManifestEntry], deleted: Iterable[str]) -> WorkspaceManifest:
        """This manifest with ``deleted`` removed then ``changed`` added or replaced, or
        ManifestRefused (a deleted path not in it, a path both changed and deleted, a bad path)."""
        current = self.by_path()
        gone = [_checked_path(p) for p in deleted]
        if len(set(gone)) != len(gone):
            raise ManifestRefused("a deleted path is listed twice")
        for path in gone:
            if current.pop(path, None) is None:
                raise ManifestRefused(f"deleted file {path!r} is not in the workspace")
        new = WorkspaceManifest.of(changed).by_path()
        if set(new) & set(gone):
            raise ManifestRefused("a path is both changed and deleted")
        return WorkspaceManifest.of({**current, **new}.values())

    def diff(self, after: WorkspaceManifest) -> tuple[list[ManifestEntry], list[str]]:
        """What turns this manifest into ``after``: the changed or added entries, the deleted paths."""
        before, now = self.by_path(), after.by_path()
        changed = [e for p, e in now.items() if (b := before.get(p)) is not e and b != e]
        return changed, sorted(set(before) - set(now))

    def to_json(self) -> str:
        """The entries as compact JSON (how a store keeps a manifest)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> WorkspaceManifest:
        """A manifest from :meth:`to_json`, its paths and tree checked again."""
        return cls.of(cls.model_validate_json(text).entries)


def _checked_path(path: str) -> str:
    try:
        normal = workspace_path(path)
    except FileRefused as exc:
        raise ManifestRefused(str(exc)) from None
    if normal != path:
        raise ManifestRefused(f"file path {path[:200]!r} is not normalised (expected {normal!r})")
    return normal


def _check_tree(by_path: Mapping[str, ManifestEntry]) -> None:
    """No file is also a directory of another listed file (``a`` and ``a/b``)."""
    for path in by_path:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in by_path:
                raise ManifestRefused(f"{parent!r} is a file and also a directory of {path!r}")


#: The manifest of an empty workspace.
EMPTY_MANIFEST = WorkspaceManifest()


class _WorkspaceEvent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SkippedFile(BaseModel):
    """A workspace entry a snapshot does not carry (a symlink, FIFO, socket or device), and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    reason: str


class WorkspaceBlob(_WorkspaceEvent):
    """One piece of a file's content (``data`` compressed per ``compression``); the pieces of
    one blob arrive in a row, the last with ``last`` set. ``size`` is the uncompressed size."""

    type: Literal["workspace_blob"] = "workspace_blob"
    sha256: str = Field(pattern=_HEX)
    size: int = Field(ge=0)
    compression: Literal["none", "zlib"] = "zlib"
    data: bytes = b""
    last: bool = True


class WorkspaceSnapshot(_WorkspaceEvent):
    """The workspace changed: ``changed`` and ``deleted`` turn the manifest ``base`` into the
    one whose digest is ``manifest``; every new content hash was sent as blobs just before."""

    type: Literal["workspace"] = "workspace"
    seq: int = Field(ge=0)
    base: str = Field(pattern=_DIGEST)
    manifest: str = Field(pattern=_DIGEST)
    changed: tuple[ManifestEntry, ...] = ()
    deleted: tuple[str, ...] = ()
    skipped: tuple[SkippedFile, ...] = ()
    total_bytes: int = Field(ge=0, default=0)
    files: int = Field(ge=0, default=0)


class WorkspaceStopped(_WorkspaceEvent):
    """Snapshots stopped for this execution (the workspace outgrew ``max_bytes``, or it could
    not be read); the turn goes on and the last snapshot stays the one a resume restores."""

    type: Literal["workspace_stopped"] = "workspace_stopped"
    reason: str
    bytes: int = Field(ge=0, default=0)
    max_bytes: int = Field(ge=0, default=0)
