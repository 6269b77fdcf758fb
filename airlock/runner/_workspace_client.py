"""The client's side of workspace restores and snapshots (RestoreWorkspace, SnapshotWorkspace)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import WorkspaceBlob, WorkspaceManifest, WorkspaceSnapshot, WorkspaceStopped

from ._transfer import CHUNK_BYTES

__all__ = ["restore_requests", "restore_workspace", "snapshot_workspace"]


async def restore_requests(
    manifest: WorkspaceManifest, read: Callable[[str], Awaitable[bytes]]
) -> AsyncIterator[pb.RestoreWorkspaceRequest]:
    """The manifest's entries, then each distinct content (read once, zlib) as blob pieces."""
    for entry in manifest.entries:
        yield pb.RestoreWorkspaceRequest(entry=wire.entry_to_proto(entry))
    sizes = {e.sha256: e.size for e in manifest.entries}
    for sha, size in sizes.items():
        data = await read(sha)
        for at in range(0, max(len(data), 1), CHUNK_BYTES):
            piece = WorkspaceBlob(
                sha256=sha, size=size, data=data[at : at + CHUNK_BYTES], last=at + CHUNK_BYTES >= len(data)
            )
            yield pb.RestoreWorkspaceRequest(blob=wire.blob_to_proto(piece))


async def restore_workspace(
    stub: Any, metadata: Any, manifest: WorkspaceManifest, read: Callable[[str], Awaitable[bytes]]
) -> str:
    """Restore ``manifest`` into the runner's empty workspace; the digest the runner wrote."""
    response = await stub.RestoreWorkspace(restore_requests(manifest, read), metadata=metadata)
    return str(response.manifest)


async def snapshot_workspace(stub: Any, metadata: Any, max_bytes: int) -> AsyncIterator[wire.WorkspaceEvent]:
    """A full snapshot of the idle runner's workspace, as events.

    Raises:
        MalformedMessage: the runner sent something else than workspace events.
    """
    call = stub.SnapshotWorkspace(pb.SnapshotWorkspaceRequest(max_bytes=max_bytes), metadata=metadata)
    try:
        async for message in call:
            item = wire.event_from_proto(message)
            if not isinstance(item, WorkspaceBlob | WorkspaceSnapshot | WorkspaceStopped):
                raise wire.MalformedMessage(f"a {type(item).__name__} in a workspace snapshot")
            yield item
    finally:
        call.cancel()
