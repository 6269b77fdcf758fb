"""The runner's workspace snapshots: increments, skipped special files, the byte cap, stat
changes that ``touch -d`` cannot hide, and a full snapshot for a caller holding another base."""

from __future__ import annotations

import os
import socket
import zlib
from pathlib import Path

from airlock.policy import (
    EMPTY_MANIFEST,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
    sha256_hex,
)
from airlock.runner._snapshot import Snapshotter


def scan(snap: Snapshotter) -> tuple[dict[str, bytes], list[WorkspaceSnapshot], list[WorkspaceStopped]]:
    """The blobs (sha → plain content), snapshots and stops of one scan."""
    blobs: dict[str, bytearray] = {}
    zipped: set[str] = set()
    snaps, stops = [], []
    for event in snap.scan():
        if isinstance(event, WorkspaceBlob):
            blobs.setdefault(event.sha256, bytearray()).extend(event.data)
            if event.compression == "zlib":
                zipped.add(event.sha256)
        elif isinstance(event, WorkspaceSnapshot):
            snaps.append(event)
        else:
            stops.append(event)
    plain = {k: zlib.decompress(bytes(v)) if k in zipped else bytes(v) for k, v in blobs.items()}
    return plain, snaps, stops


def test_the_first_snapshot_is_full_and_the_next_sends_only_the_change_and_deletions(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"alpha")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/b.txt").write_bytes(b"beta")
    (tmp_path / "sub/c.sh").write_bytes(b"#!/bin/sh\n")
    (tmp_path / "sub/c.sh").chmod(0o755)
    snap = Snapshotter(tmp_path)
    snap.begin(0, EMPTY_MANIFEST.digest)
    blobs, [first], _ = scan(snap)
    assert first.base == EMPTY_MANIFEST.digest
    assert {e.path for e in first.changed} == {"a.txt", "sub/b.txt", "sub/c.sh"}
    assert blobs == {
        sha256_hex(b"alpha"): b"alpha",
        sha256_hex(b"beta"): b"beta",
        sha256_hex(b"#!/bin/sh\n"): b"#!/bin/sh\n",
    }
    assert [e.executable for e in first.changed if e.path == "sub/c.sh"] == [True]
    after = EMPTY_MANIFEST.apply(first.changed, first.deleted)
    assert after.digest == first.manifest and first.files == 3 and first.total_bytes == 5 + 4 + 10

    assert scan(snap) == ({}, [], [])  # nothing changed: no event at all

    (tmp_path / "a.txt").write_bytes(b"ALPHA!")
    (tmp_path / "sub/b.txt").unlink()
    (tmp_path / "copy").write_bytes(b"#!/bin/sh\n")  # a content already sent: no blob again
    blobs, [second], _ = scan(snap)
    assert second.base == first.manifest
    assert {e.path for e in second.changed} == {"a.txt", "copy"}
    assert second.deleted == ("sub/b.txt",)
    assert blobs == {sha256_hex(b"ALPHA!"): b"ALPHA!"}
    assert after.apply(second.changed, second.deleted).digest == second.manifest
    assert second.seq == first.seq + 1


def test_symlinks_fifos_and_sockets_are_skipped_and_named_never_followed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = tmp_path / "secret"
    secret.write_bytes(b"outside")
    (ws / "link").symlink_to(secret)
    (ws / "dirlink").symlink_to(tmp_path)
    os.mkfifo(ws / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    (ws / "ok").write_bytes(b"fine")
    snap = Snapshotter(ws)
    snap.begin(0, EMPTY_MANIFEST.digest)
    try:
        blobs, [snapshot], _ = scan(snap)
    finally:
        sock.close()
    assert [e.path for e in snapshot.changed] == ["ok"]
    assert {s.path for s in snapshot.skipped} == {"link", "dirlink", "fifo", "sock"}
    assert b"outside" not in blobs.values()


def test_over_max_bytes_one_stop_then_nothing_until_the_next_execution(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 2000)
    snap = Snapshotter(tmp_path)
    snap.begin(1000, EMPTY_MANIFEST.digest)
    blobs, snaps, [stop] = scan(snap)
    assert (blobs, snaps) == ({}, [])
    assert stop.bytes == 2000 and stop.max_bytes == 1000 and "1000" in stop.reason
    (tmp_path / "more").write_bytes(b"y")
    assert scan(snap) == ({}, [], [])
    snap.begin(10_000, EMPTY_MANIFEST.digest)  # the next execution, with room
    _, [snapshot], _ = scan(snap)
    assert snapshot.files == 2


def test_a_change_hidden_by_touch_d_is_still_seen(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"one")
    os.utime(f, ns=(10**18, 10**18))
    snap = Snapshotter(tmp_path)
    snap.begin(0, EMPTY_MANIFEST.digest)
    scan(snap)
    before = f.stat()
    f.write_bytes(b"two")  # same size; then the old times put back, as touch -d would
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    blobs, [snapshot], _ = scan(snap)
    assert [e.sha256 for e in snapshot.changed] == [sha256_hex(b"two")]
    assert blobs == {sha256_hex(b"two"): b"two"}


def test_a_caller_with_another_base_gets_a_full_snapshot_with_every_blob(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a")
    snap = Snapshotter(tmp_path)
    snap.begin(0, EMPTY_MANIFEST.digest)
    scan(snap)
    snap.begin(0, "sha256:" + "0" * 64)
    blobs, [full], _ = scan(snap)
    assert full.base == EMPTY_MANIFEST.digest
    assert [e.path for e in full.changed] == ["a"] and blobs == {sha256_hex(b"a"): b"a"}


def test_an_empty_workspace_asked_in_full_still_answers_a_snapshot(tmp_path: Path) -> None:
    snap = Snapshotter(tmp_path)
    snap.begin(0, "")
    _, [full], _ = scan(snap)
    assert full.manifest == EMPTY_MANIFEST.digest == WorkspaceManifest().digest and full.files == 0


def test_blob_pieces_are_at_most_a_chunk(tmp_path: Path) -> None:
    from airlock.runner._transfer import CHUNK_BYTES

    (tmp_path / "rnd").write_bytes(os.urandom(CHUNK_BYTES * 2 + 5))
    snap = Snapshotter(tmp_path)
    snap.begin(0, EMPTY_MANIFEST.digest)
    pieces = [e for e in snap.scan() if isinstance(e, WorkspaceBlob)]
    assert len(pieces) >= 3 and all(len(p.data) <= CHUNK_BYTES for p in pieces)
    assert [p.last for p in pieces] == [False] * (len(pieces) - 1) + [True]


def test_compressible_content_is_sent_zlib_and_random_content_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "text").write_text("the same line again\n" * 5000)
    (tmp_path / "noise").write_bytes(os.urandom(100_000))
    sent = {e.sha256: e.compression for e in Snapshotter(tmp_path).scan() if isinstance(e, WorkspaceBlob)}
    by_path = {p.name: sha256_hex(p.read_bytes()) for p in tmp_path.iterdir()}
    assert sent == {by_path["text"]: "zlib", by_path["noise"]: "none"}
