"""Workspace snapshots on the wire: manifest entries, blob pieces, snapshots, their options."""

from __future__ import annotations

from dataclasses import dataclass

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import (
    ManifestEntry,
    SkippedFile,
    WorkspaceBlob,
    WorkspaceSnapshot,
    WorkspaceStopped,
)

from ._primitives import decoder
from ._problems import MalformedMessage

#: A workspace event's models (what ``event_from_proto`` returns for the three new kinds).
WorkspaceEvent = WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped

_COMPRESSION = {"none": pb.COMPRESSION_NONE, "zlib": pb.COMPRESSION_ZLIB}
_COMPRESSION_NAMES = {v: k for k, v in _COMPRESSION.items()}


@dataclass(frozen=True)
class WorkspaceOptions:
    """ExecuteRequest.workspace: snapshot before each checkpoint while the workspace holds at
    most ``max_bytes``; ``base`` is the manifest digest the caller holds."""

    max_bytes: int
    base: str


def entry_to_proto(entry: ManifestEntry) -> pb.WorkspaceEntry:
    """A manifest entry on the wire."""
    return pb.WorkspaceEntry(
        path=entry.path, sha256=entry.sha256, size=entry.size, executable=entry.executable
    )


@decoder
def entry_from_proto(message: pb.WorkspaceEntry) -> ManifestEntry:
    """A manifest entry from the wire (its path is checked where a manifest is built)."""
    return ManifestEntry(
        path=message.path, sha256=message.sha256, size=message.size, executable=message.executable
    )


def blob_to_proto(blob: WorkspaceBlob) -> pb.WorkspaceBlob:
    """A blob piece on the wire."""
    return pb.WorkspaceBlob(
        sha256=blob.sha256,
        size=blob.size,
        compression=_COMPRESSION[blob.compression],
        data=blob.data,
        last=blob.last,
    )


@decoder
def blob_from_proto(message: pb.WorkspaceBlob) -> WorkspaceBlob:
    """A blob piece from the wire (an unspecified or unknown compression is refused)."""
    compression = _COMPRESSION_NAMES.get(message.compression)
    if compression is None:
        raise MalformedMessage(f"unknown compression {message.compression}", path="compression")
    return WorkspaceBlob(
        sha256=message.sha256,
        size=message.size,
        compression=compression,
        data=message.data,
        last=message.last,
    )


def snapshot_to_proto(snapshot: WorkspaceSnapshot) -> pb.WorkspaceSnapshot:
    """A snapshot on the wire."""
    return pb.WorkspaceSnapshot(
        seq=snapshot.seq,
        base=snapshot.base,
        manifest=snapshot.manifest,
        changed=[entry_to_proto(e) for e in snapshot.changed],
        deleted=list(snapshot.deleted),
        skipped=[pb.SkippedFile(path=s.path, reason=s.reason) for s in snapshot.skipped],
        total_bytes=snapshot.total_bytes,
        files=snapshot.files,
    )


@decoder
def snapshot_from_proto(message: pb.WorkspaceSnapshot) -> WorkspaceSnapshot:
    """A snapshot from the wire."""
    return WorkspaceSnapshot(
        seq=message.seq,
        base=message.base,
        manifest=message.manifest,
        changed=tuple(entry_from_proto(e) for e in message.changed),
        deleted=tuple(message.deleted),
        skipped=tuple(SkippedFile(path=s.path, reason=s.reason) for s in message.skipped),
        total_bytes=message.total_bytes,
        files=message.files,
    )


def stopped_to_proto(stopped: WorkspaceStopped) -> pb.WorkspaceStopped:
    """Snapshots stopped, on the wire."""
    return pb.WorkspaceStopped(reason=stopped.reason, bytes=stopped.bytes, max_bytes=stopped.max_bytes)


@decoder
def stopped_from_proto(message: pb.WorkspaceStopped) -> WorkspaceStopped:
    """Snapshots stopped, from the wire."""
    return WorkspaceStopped(reason=message.reason, bytes=message.bytes, max_bytes=message.max_bytes)


def workspace_event_to_proto(event: WorkspaceEvent) -> pb.TurnEvent:
    """A workspace event as a TurnEvent of the Execute (or SnapshotWorkspace) stream."""
    if isinstance(event, WorkspaceBlob):
        return pb.TurnEvent(workspace_blob=blob_to_proto(event))
    if isinstance(event, WorkspaceSnapshot):
        return pb.TurnEvent(workspace=snapshot_to_proto(event))
    return pb.TurnEvent(workspace_stopped=stopped_to_proto(event))


def options_to_proto(options: WorkspaceOptions) -> pb.WorkspaceOptions:
    """ExecuteRequest.workspace for ``options``."""
    return pb.WorkspaceOptions(snapshots=True, max_bytes=options.max_bytes, base=options.base)


def options_from_proto(request: pb.ExecuteRequest) -> WorkspaceOptions | None:
    """The request's workspace options, or None (absent, or snapshots off)."""
    if not request.HasField("workspace") or not request.workspace.snapshots:
        return None
    w = request.workspace
    if w.max_bytes < 0:
        raise MalformedMessage("must not be negative", path="workspace.max_bytes")
    return WorkspaceOptions(max_bytes=w.max_bytes, base=w.base)
