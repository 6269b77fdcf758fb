"""The runner's workspace RPCs and the snapshot hook of Execute, over :class:`Snapshotter`.

The service keeps one :class:`Workspaces` for the process. An execution that asked for
snapshots calls :meth:`Workspaces.events` before each checkpoint it forwards; the scan runs in
a thread one event at a time, so at most one file's compressed content is held at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import FileRefused

from ._restore import Restore, RestoreRefused, workspace_is_empty
from ._snapshot import Snapshotter, WorkspaceEvent

__all__ = ["NOT_EMPTY", "Workspaces"]

#: Why a restore into a workspace that already holds something is refused.
NOT_EMPTY = "the workspace is not empty; a restore starts from an empty one"


class Workspaces:
    """The workspace's snapshots and restores for one runner process."""

    def __init__(self, workspace: Path, message_limit: int = 16 * 1024 * 1024 - 1024) -> None:
        self.workspace = workspace
        #: A snapshot event larger than this (a huge file list) stops snapshots instead.
        self.message_limit = message_limit
        self.snapshotter = Snapshotter(workspace)
        self._lock = asyncio.Lock()

    def begin(self, options: wire.WorkspaceOptions) -> None:
        """An execution asked for snapshots with ``options``."""
        self.snapshotter.begin(options.max_bytes, options.base)

    async def events(self) -> AsyncIterator[pb.TurnEvent]:
        """One snapshot's events (nothing when nothing changed), scanned in a thread."""
        async with self._lock:
            scan = self.snapshotter.scan()
            while (event := await asyncio.to_thread(_next, scan)) is not None:
                message = wire.workspace_event_to_proto(event)
                if message.ByteSize() > self.message_limit:
                    size = message.ByteSize()
                    why = f"a snapshot of {size} bytes is over the runner's message limit"
                    message = wire.workspace_event_to_proto(self.snapshotter.stop(why))
                    scan.close()
                yield message

    async def full(self, max_bytes: int) -> AsyncIterator[pb.TurnEvent]:
        """A full snapshot of the idle workspace (SnapshotWorkspace)."""
        async with self._lock:
            self.snapshotter.begin(max_bytes, "")
        async for event in self.events():
            yield event

    async def empty(self) -> bool:
        """Whether the workspace holds nothing (a restore needs it empty)."""
        return await asyncio.to_thread(workspace_is_empty, self.workspace)

    async def restore(self, items: AsyncIterator[pb.RestoreWorkspaceRequest]) -> pb.RestoreWorkspaceResponse:
        """Write the streamed manifest and blobs into the empty workspace; seed the snapshots.

        Raises:
            FileRefused: the workspace is not empty (:data:`NOT_EMPTY`; check :meth:`empty`
                first to tell it apart).
            FileRefused: the stream does not describe a workspace, or a path is not confined.
            MalformedMessage: an item does not decode.
        """
        async with self._lock:
            if not await asyncio.to_thread(workspace_is_empty, self.workspace):
                raise FileRefused(NOT_EMPTY)
            restore = Restore(self.workspace)
            async for item in items:
                kind = item.WhichOneof("item")
                if kind == "entry":
                    restore.entry(wire.entry_from_proto(item.entry))
                elif kind == "blob":
                    done = restore.piece(wire.blob_from_proto(item.blob))
                    if done is not None:
                        await asyncio.to_thread(restore.write, *done)
                else:
                    raise RestoreRefused("an empty restore item")
            manifest = restore.finish()
            self.snapshotter.seed(manifest, restore.keys)
        return pb.RestoreWorkspaceResponse(
            manifest=manifest.digest, files=manifest.files, bytes=manifest.total_bytes
        )


def _next(scan: Iterator[WorkspaceEvent]) -> WorkspaceEvent | None:
    return next(scan, None)
