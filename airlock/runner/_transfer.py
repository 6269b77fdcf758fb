"""The client's side of the workspace's files: input files sent in chunks, and artifacts
received and checked again (the runner is inside the untrusted sandbox: a path it sends must
be confined and match the globs asked for, and the set must fit the caps)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.policy import FileCaps, FileRefused, FilesOverCap, matches, workspace_path
from airlock.spec import ArtifactSpec

__all__ = ["Artifacts", "collect_artifacts", "put_files"]

#: Bytes of one chunk on the wire.
CHUNK_BYTES = 256 * 1024


@dataclass(frozen=True)
class Artifacts:
    """What a turn left in its workspace under its artifact globs."""

    #: Path (relative to the workspace) → content, in path order.
    files: dict[str, bytes] = field(default_factory=dict)
    #: Matches not collected, with why (symbolic links, special files).
    skipped: list[tuple[str, str]] = field(default_factory=list)


async def _chunks(files: Sequence[tuple[str, bytes]]) -> AsyncIterator[pb.FileChunk]:
    for path, data in files:
        for at in range(0, max(len(data), 1), CHUNK_BYTES):
            yield pb.FileChunk(
                path=path, data=data[at : at + CHUNK_BYTES], last=at + CHUNK_BYTES >= len(data)
            )


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
    caps = FileCaps(
        max_files=spec.max_files, max_file_bytes=spec.max_file_bytes, max_total_bytes=spec.max_total_bytes
    )
    request = pb.CollectArtifactsRequest(
        globs=spec.globs,
        max_files=spec.max_files,
        max_file_bytes=spec.max_file_bytes,
        max_total_bytes=spec.max_total_bytes,
    )
    parts: dict[str, list[bytes]] = {}
    sizes: dict[str, int] = {}
    skipped: list[tuple[str, str]] = []
    open_path: str | None = None
    try:
        async for item in stub.CollectArtifacts(request, metadata=metadata):
            if item.WhichOneof("item") == "skipped":
                skipped.append((_asked_for(item.skipped.path, spec), item.skipped.reason[:200]))
                continue
            chunk = item.chunk
            if open_path is None:
                path = _asked_for(chunk.path, spec)
                if path in parts:
                    raise FileRefused(f"the sandbox sent artifact {path} twice")
                parts[path], sizes[path], open_path = [], 0, path
            elif chunk.path != open_path:
                raise FileRefused(f"the sandbox began artifact {chunk.path!r} before {open_path} ended")
            parts[open_path].append(chunk.data)
            sizes[open_path] += len(chunk.data)
            if sizes[open_path] > caps.max_file_bytes or len(sizes) > caps.max_files:
                caps.check(sizes, "artifacts")
            if chunk.last:
                open_path = None
    except grpc.aio.AioRpcError as e:
        if e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
            raise FilesOverCap(e.details() or "artifacts refused: over a cap") from e
        if e.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION):
            raise FileRefused(f"artifacts refused: {e.details()}") from e
        raise
    if open_path is not None:
        raise FileRefused(f"the sandbox's artifact {open_path} ended without its last chunk")
    caps.check(sizes, "artifacts")
    return Artifacts(files={p: b"".join(parts[p]) for p in sorted(parts)}, skipped=skipped)


def _asked_for(path: str, spec: ArtifactSpec) -> str:
    """``path`` if it is confined and matches the globs asked for (FileRefused otherwise)."""
    normal = workspace_path(path)
    if normal != path or not matches(path, spec.globs):
        raise FileRefused(f"the sandbox sent {path[:200]!r}, which no artifact glob asked for")
    return path
