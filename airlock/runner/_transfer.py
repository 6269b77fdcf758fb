"""The client's side of the workspace's files: input files sent in chunks, and artifacts
received and checked again (the runner is inside the untrusted sandbox: a path it sends must
be confined and match the globs asked for, and the set must fit the caps)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import FileCaps, FileRefused, FilesOverCap, matches, workspace_path
from airlock.spec import ArtifactSpec

__all__ = [
    "Artifacts",
    "FileAssembly",
    "artifact_caps",
    "collect_artifacts",
    "file_chunks",
    "put_chunks",
    "put_files",
]

#: Bytes of one chunk on the wire.
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class Artifacts:
    """What a turn left in its workspace under its artifact globs."""

    #: Path (relative to the workspace) → content, in path order.
    files: dict[str, bytes] = field(default_factory=dict)
    #: Matches not collected, with why (symbolic links, special files).
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _pieces(data: bytes, size: int) -> Iterator[tuple[bytes, bool]]:
    """``data`` in pieces of at most ``size`` bytes (one, empty, for empty data), each with
    whether it is the last."""
    for at in range(0, max(len(data), 1), size):
        yield data[at : at + size], at + size >= len(data)


def file_chunks(path: str, data: bytes, size: int = CHUNK_BYTES) -> Iterator[pb.FileChunk]:
    """``data`` as artifact chunks of at most ``size`` bytes (one, empty, for an empty file),
    each naming ``path``, the last marked."""
    for piece, last in _pieces(data, size):
        yield pb.FileChunk(path=path, data=piece, last=last)


def put_chunks(path: str, data: bytes, size: int = CHUNK_BYTES) -> Iterator[pb.PutFilesRequest]:
    """``data`` as the PutFiles requests of one file (as :func:`file_chunks`)."""
    for piece, last in _pieces(data, size):
        yield pb.PutFilesRequest(path=path, data=piece, last=last)


async def _chunks(files: Sequence[tuple[str, bytes]]) -> AsyncIterator[pb.PutFilesRequest]:
    for path, data in files:
        for chunk in put_chunks(path, data):
            yield chunk


def artifact_caps(spec: ArtifactSpec) -> FileCaps:
    """The caps ``spec`` sets on its artifacts."""
    return FileCaps(
        max_files=spec.max_files, max_file_bytes=spec.max_file_bytes, max_total_bytes=spec.max_total_bytes
    )


class FileAssembly:
    """Files arriving as chunks, one file after another (its last chunk marked), refused as
    soon as the set outgrows ``caps`` and at the end if a file is left unfinished.

    ``what`` names the set in refusals (``"input files"``, ``"artifacts"``).
    """

    def __init__(self, caps: FileCaps, what: str) -> None:
        self.caps = caps
        self.what = what
        #: Bytes received per path, in arrival order.
        self.sizes: dict[str, int] = {}
        self._parts: dict[str, list[bytes]] = {}
        self._open: str | None = None
        self._total = 0

    def add(self, path: str, data: bytes, last: bool) -> None:
        """One chunk.

        Raises:
            FileRefused: a file sent twice, or begun before the previous one ended.
            FilesOverCap: the set so far exceeds a cap.
        """
        if self._open is None:
            if path in self._parts:
                raise FileRefused(f"{self.what}: {path} sent twice")
            self._parts[path], self.sizes[path], self._open = [], 0, path
        elif path != self._open:
            raise FileRefused(f"{self.what}: {path} began before {self._open} ended (its last chunk)")
        self._parts[path].append(data)
        self.sizes[path] += len(data)
        self._total += len(data)
        caps = self.caps
        if (
            self.sizes[path] > caps.max_file_bytes
            or len(self.sizes) > caps.max_files
            or self._total > caps.max_total_bytes
        ):
            caps.check(self.sizes, self.what)
        if last:
            self._open = None

    def finish(self) -> dict[str, bytes]:
        """The files, by path in arrival order.

        Raises:
            FileRefused: the stream ended inside a file.
            FilesOverCap: the set exceeds a cap.
        """
        if self._open is not None:
            raise FileRefused(f"{self.what}: the stream ended before the last chunk of {self._open}")
        self.caps.check(self.sizes, self.what)
        return {path: b"".join(parts) for path, parts in self._parts.items()}


async def put_files(stub: Any, metadata: Any, files: Sequence[tuple[str, bytes]]) -> None:
    """Send ``files`` (``(path, content)``) to the runner's workspace.

    Raises:
        FileRefused: a path that is not confined (checked before anything is sent), or the
            runner's refusal (a link in the way, over its caps).
        grpc.aio.AioRpcError: the runner is unreachable.
    """
    for path, _ in files:
        workspace_path(path)
    try:
        await stub.PutFiles(_chunks(files), metadata=metadata)
    except grpc.aio.AioRpcError as e:
        if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED):
            raise FileRefused(f"the sandbox refused the input files: {e.details()}") from e
        raise


async def collect_artifacts(stub: Any, metadata: Any, spec: ArtifactSpec) -> Artifacts:
    """The files the runner reports under ``spec``'s globs, each checked here again.

    Raises:
        FilesOverCap: the set exceeds a cap (the runner's refusal, or what it sent).
        FileRefused: the runner sent a path that is not confined or not asked for, or chunks
            out of order.
        grpc.aio.AioRpcError: the runner is unreachable.
    """
    received = FileAssembly(artifact_caps(spec), "artifacts")
    request = pb.CollectArtifactsRequest(
        globs=spec.globs,
        max_files=spec.max_files,
        max_file_bytes=spec.max_file_bytes,
        max_total_bytes=spec.max_total_bytes,
    )
    skipped: list[tuple[str, str]] = []
    try:
        async for item in stub.CollectArtifacts(request, metadata=metadata):
            if item.WhichOneof("item") == "skipped":
                skipped.append((_asked_for(item.skipped.path, spec), item.skipped.reason[:200]))
                continue
            chunk = item.chunk
            received.add(_asked_for(chunk.path, spec), chunk.data, chunk.last)
    except grpc.aio.AioRpcError as e:
        if e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise FilesOverCap(e.details() or "artifacts refused: over a cap") from e
        if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
            raise FileRefused(f"artifacts refused: {e.details()}") from e
        raise
    files = received.finish()
    return Artifacts(files={p: files[p] for p in sorted(files)}, skipped=skipped)


def _asked_for(path: str, spec: ArtifactSpec) -> str:
    """``path`` if it is confined and matches the globs asked for (FileRefused otherwise)."""
    normal = workspace_path(path)
    if normal != path or not matches(path, spec.globs):
        raise FileRefused(f"the sandbox sent {path[:200]!r}, which no artifact glob asked for")
    return path
