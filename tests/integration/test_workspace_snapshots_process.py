"""Workspace snapshots through a real runner process (the process backend): a turn's bash tool
writes files and the events carry blobs, then the manifest, before the checkpoint; a fresh
sandbox restored from them holds the same files (same digest), and a restore whose blobs lie
fails the provisioning."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from airlock.policy import (
    EMPTY_MANIFEST,
    ManifestEntry,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    sha256_hex,
    stored_blob,
)
from airlock.sandbox import SandboxRequest, TurnHandle, WorkspaceRestore
from airlock.sandbox.process import ProcessBackend
from airlock.testing import bash_agent
from layer0 import EnvError, EnvironmentSpec, ProcessIsolation, TurnInput

pytestmark = pytest.mark.timeout(180)
ENV = EnvironmentSpec(isolation=[ProcessIsolation()])


async def run(commands: list[str], handle: TurnHandle) -> tuple[list[Any], Any]:
    events: list[Any] = []

    async def sink(event: Any) -> None:
        events.append(event)

    request = SandboxRequest.compile(bash_agent(*commands), TurnInput.new("go"), ENV, handle=handle)
    request = request.model_copy(update={"events": sink})
    output = await ProcessBackend().run(request)
    return events, output


def fold(events: list[Any]) -> tuple[WorkspaceManifest, dict[str, bytes]]:
    """The manifest the snapshots make, and the blobs as a blob store keeps them (zlib; one
    sent as it is, as a stored zlib stream)."""
    manifest, blobs, how = EMPTY_MANIFEST, {}, {}
    for e in events:
        if isinstance(e, WorkspaceBlob):
            blobs[e.sha256] = blobs.get(e.sha256, b"") + e.data
            how[e.sha256] = e.compression
        elif isinstance(e, WorkspaceSnapshot):
            assert e.base == manifest.digest
            manifest = manifest.apply(e.changed, e.deleted)
            assert manifest.digest == e.manifest
    return manifest, {sha: stored_blob(how[sha], data) for sha, data in blobs.items()}


async def test_snapshots_then_a_restore_into_a_fresh_sandbox() -> None:
    events, _ = await run(
        ["mkdir -p src && echo 'print(1)' > src/main.py", "head -c 300000 /dev/urandom > data.bin"],
        TurnHandle(snapshot_bytes=10_000_000),
    )
    kinds = [e.type for e in events]
    first = kinds.index("workspace")
    assert kinds[first - 1] == "workspace_blob" and kinds[first + 1] == "checkpoint"
    manifest, blobs = fold(events)
    assert {e.path for e in manifest.entries} == {"src/main.py", "data.bin"}

    async def read(sha: str) -> bytes:
        return blobs[sha]

    restore = WorkspaceRestore(manifest=manifest, read=read)
    check = "cat src/main.py && sha256sum data.bin && echo new > later.txt"
    events2, output = await run([check], TurnHandle(restore=restore, snapshot_bytes=10_000_000))
    finished = [e for e in events2 if e.type == "tool_finished"]
    assert "print(1)" in finished[0].output
    data_sha = manifest.by_path()["data.bin"].sha256
    assert data_sha in finished[0].output
    [snap] = [e for e in events2 if isinstance(e, WorkspaceSnapshot)]
    assert snap.base == manifest.digest  # an increment against the restored manifest
    assert [e.path for e in snap.changed] == ["later.txt"] and snap.deleted == ()
    assert not [e for e in events2 if isinstance(e, WorkspaceBlob) and e.sha256 == data_sha]
    assert output.exit_reason is not None


async def test_a_restore_whose_blob_lies_fails_the_provisioning() -> None:
    real = b"real"
    manifest = WorkspaceManifest.of([ManifestEntry(path="f", sha256=sha256_hex(real), size=4)])

    async def read(sha: str) -> bytes:
        return zlib.compress(b"fake")

    with pytest.raises(EnvError) as caught:
        await run(["cat f"], TurnHandle(restore=WorkspaceRestore(manifest=manifest, read=read)))
    assert caught.value.kind == "provision_failed" and "restore" in str(caught.value)
