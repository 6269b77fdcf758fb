"""Workspace snapshots and restores through a real runner server over gRPC: a turn's bash
tool writes files and the stream carries blobs, then the manifest, then the checkpoint; a
fresh runner restored from them reports the same digest; hostile restores are refused."""

from __future__ import annotations

import secrets
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import grpc
import pytest

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock._proto.runner.v1 import runner_pb2_grpc as pb_grpc
from airlock.policy import (
    EMPTY_MANIFEST,
    FileRefused,
    ManifestEntry,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
    sha256_hex,
    stored_blob,
)
from airlock.runner import RemoteTurn, RunnerCallError, RunnerConfig, RunnerServer
from airlock.runner._restore import Restore
from layer0 import TurnInput

from .runner_helpers import scripted_spec, text_step, tool_step


async def run_turn(address: str, token: str, commands: list[str], max_bytes: int = 0) -> list[object]:
    steps = [tool_step("bash", {"command": c}, use_id=f"t{i}") for i, c in enumerate(commands)]
    agent = scripted_spec([*steps, text_step("done")], tools=["bash"])
    events: list[object] = []

    async def sink(event: object) -> None:
        events.append(event)

    async with RemoteTurn(address, token, agent) as turn:
        turn.workspace = wire.WorkspaceOptions(max_bytes=max_bytes, base=EMPTY_MANIFEST.digest)
        await turn.execute(TurnInput.new("go"), events=sink)
    return events


def blobs_of(events: list[object]) -> dict[str, bytes]:
    """Each blob as a blob store keeps it (zlib; one sent as it is, stored level 0)."""
    data: dict[str, bytearray] = {}
    how: dict[str, Literal["none", "zlib"]] = {}
    for e in events:
        if isinstance(e, WorkspaceBlob):
            data.setdefault(e.sha256, bytearray()).extend(e.data)
            how[e.sha256] = e.compression
    return {k: stored_blob(how[k], bytes(v)) for k, v in data.items()}


async def test_a_turn_streams_blobs_then_the_manifest_before_its_checkpoint_and_a_restore_matches(
    address: str, token: str, tmp_path: Path
) -> None:
    events = await run_turn(
        address,
        token,
        [
            "mkdir -p out && echo hello > out/a.txt && printf '#!/bin/sh\\n' > run.sh && chmod +x run.sh",
            "rm out/a.txt && echo two > b",
        ],
    )
    kinds = [getattr(e, "type", "") for e in events]
    first = kinds.index("workspace")
    assert "workspace_blob" in kinds[:first] and kinds[first + 1] == "checkpoint"
    snaps = [e for e in events if isinstance(e, WorkspaceSnapshot)]
    assert len(snaps) == 2  # one per tool call that changed the workspace, none otherwise
    manifest = EMPTY_MANIFEST
    for s in snaps:
        assert s.base == manifest.digest
        manifest = manifest.apply(s.changed, s.deleted)
        assert manifest.digest == s.manifest
    assert snaps[1].deleted == ("out/a.txt",)
    assert {e.path for e in manifest.entries} == {"run.sh", "b"}
    store = blobs_of(events)

    async def read(sha: str) -> bytes:
        return store[sha]

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    token2 = secrets.token_urlsafe(16)
    async with RunnerServer(RunnerConfig(token=token2, workspace=fresh)) as other:
        address2 = await other.start("127.0.0.1:0")
        async with RemoteTurn(address2, token2, scripted_spec([text_step("x")])) as turn:
            digest = await turn.restore_workspace(manifest, read)
            assert digest == manifest.digest
            with pytest.raises(RunnerCallError, match="not empty"):
                await turn.restore_workspace(manifest, read)
            full = [e async for e in turn.snapshot_workspace()]
    assert (fresh / "b").read_bytes() == b"two\n"
    assert (fresh / "run.sh").stat().st_mode & 0o100
    [snapshot] = [e for e in full if isinstance(e, WorkspaceSnapshot)]
    assert snapshot.manifest == manifest.digest


async def test_over_max_bytes_the_turn_goes_on_with_one_stop(address: str, token: str) -> None:
    events = await run_turn(address, token, ["head -c 5000 /dev/zero > big", "echo more > m"], max_bytes=1000)
    stops = [e for e in events if isinstance(e, WorkspaceStopped)]
    assert len(stops) == 1 and stops[0].max_bytes == 1000
    assert not [e for e in events if isinstance(e, WorkspaceSnapshot | WorkspaceBlob)]
    assert any(getattr(e, "type", "") == "checkpoint" for e in events)


async def test_without_options_no_workspace_event(address: str, token: str, workspace: Path) -> None:
    agent = scripted_spec([tool_step("bash", {"command": "echo x > f"}), text_step("done")], tools=["bash"])
    events: list[object] = []

    async def sink(event: object) -> None:
        events.append(event)

    async with RemoteTurn(address, token, agent) as turn:
        await turn.execute(TurnInput.new("go"), events=sink)
    assert (workspace / "f").exists()
    assert not [e for e in events if getattr(e, "type", "").startswith("workspace")]


# -- hostile restores ------------------------------------------------------------------------


def entry(path: str, data: bytes) -> pb.RestoreWorkspaceRequest:
    return pb.RestoreWorkspaceRequest(
        entry=pb.WorkspaceEntry(path=path, sha256=sha256_hex(data), size=len(data))
    )


def blob(data: bytes, sha: str | None = None, size: int | None = None) -> pb.RestoreWorkspaceRequest:
    return pb.RestoreWorkspaceRequest(
        blob=pb.WorkspaceBlob(
            sha256=sha or sha256_hex(data),
            size=len(data) if size is None else size,
            compression=pb.COMPRESSION_ZLIB,
            data=zlib.compress(data),
            last=True,
        )
    )


async def restore_raw(
    address: str, token: str, items: list[pb.RestoreWorkspaceRequest]
) -> grpc.aio.AioRpcError:
    async def stream() -> AsyncIterator[pb.RestoreWorkspaceRequest]:
        for item in items:
            yield item

    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.RunnerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.RestoreWorkspace(stream(), metadata=(("authorization", f"Bearer {token}"),))
    return caught.value


@pytest.mark.parametrize(
    ("items", "says"),
    [
        ([entry("../escape", b"x"), blob(b"x")], "leaves the workspace"),
        ([entry("/etc/passwd", b"x"), blob(b"x")], "absolute"),
        ([entry("a", b"x"), blob(b"y", sha=sha256_hex(b"x"), size=1)], "does not match"),
        ([entry("a", b"x")], "not sent"),
        ([entry("a", b"x"), blob(b"x" * 10_000, sha=sha256_hex(b"x"), size=1)], "past its size"),
        ([entry("a", b"x"), blob(b"z")], "named by no entry"),
    ],
    ids=["dotdot", "absolute", "bad-hash", "missing-blob", "bomb", "unnamed-blob"],
)
async def test_a_hostile_restore_is_refused_and_nothing_lands_outside(
    address: str, token: str, workspace: Path, items: list[pb.RestoreWorkspaceRequest], says: str
) -> None:
    error = await restore_raw(address, token, items)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert says in str(error.details())
    assert not (workspace.parent / "escape").exists()


async def test_a_restore_into_a_non_empty_workspace_is_refused(
    address: str, token: str, workspace: Path
) -> None:
    (workspace / "there").write_bytes(b"already")
    error = await restore_raw(address, token, [entry("a", b"x"), blob(b"x")])
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert (workspace / "there").read_bytes() == b"already" and not (workspace / "a").exists()


def test_a_symlink_in_the_way_of_a_restored_file_is_refused(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "d").symlink_to(outside)
    restore = Restore(ws)
    data = b"planted"
    restore.entry(ManifestEntry(path="d/f", sha256=sha256_hex(data), size=len(data)))
    done = restore.piece(WorkspaceBlob(sha256=sha256_hex(data), size=len(data), data=zlib.compress(data)))
    assert done is not None
    with pytest.raises(FileRefused, match="symbolic link"):
        restore.write(*done)
    assert list(outside.iterdir()) == []


def test_manifest_of_restore_entries_is_checked(tmp_path: Path) -> None:
    restore = Restore(tmp_path)
    restore.entry(ManifestEntry(path="a", sha256="0" * 64, size=1))
    restore.entry(ManifestEntry(path="a/b", sha256="0" * 64, size=1))
    with pytest.raises(FileRefused, match="also a directory"):
        restore.finish()
    assert WorkspaceManifest().files == 0


async def test_a_snapshot_over_the_message_limit_stops_snapshots_instead(tmp_path: Path) -> None:
    from airlock.runner._workspace_rpc import Workspaces

    for i in range(300):
        (tmp_path / f"file-with-a-long-name-{i:04d}").write_bytes(b"")
    spaces = Workspaces(tmp_path, message_limit=4096)
    spaces.begin(wire.WorkspaceOptions(max_bytes=0, base=EMPTY_MANIFEST.digest))
    kinds = [m.WhichOneof("kind") async for m in spaces.events()]
    assert kinds[-1] == "workspace_stopped" and "workspace" not in kinds
    assert [m async for m in spaces.events()] == []
