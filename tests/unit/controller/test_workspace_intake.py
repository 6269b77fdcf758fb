"""WorkspaceIntake against a hostile runner: every lie is refused with a reason and nothing is
written (the blob directory stays empty, no manifest row)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from airlock.controller._blobs import DirBlobStore
from airlock.controller._workspace_intake import WorkspaceIntake, WorkspaceViolation
from airlock.policy import (
    EMPTY_MANIFEST,
    ManifestEntry,
    WorkspaceBlob,
    WorkspaceManifest,
    WorkspaceSnapshot,
    WorkspaceStopped,
    sha256_hex,
)

CAP = 1 << 20


class Rows:
    """The workspace rows, in memory."""

    def __init__(self) -> None:
        self.blobs: dict[tuple[str, str], tuple[int, int]] = {}
        self.manifests: dict[tuple[str, str], WorkspaceManifest] = {}

    async def note_blob(self, tenant: str, sha256: str, size: int, stored: int) -> None:
        self.blobs[(tenant, sha256)] = (size, stored)

    async def put_manifest(self, tenant: str, manifest: WorkspaceManifest) -> None:
        self.manifests[(tenant, manifest.digest)] = manifest


def entry(path: str, data: bytes, executable: bool = False) -> ManifestEntry:
    return ManifestEntry(path=path, sha256=sha256_hex(data), size=len(data), executable=executable)


def blob(data: bytes) -> WorkspaceBlob:
    return WorkspaceBlob(sha256=sha256_hex(data), size=len(data), data=zlib.compress(data))


def snapshot(
    base: WorkspaceManifest, changed: list[ManifestEntry], deleted: tuple[str, ...] = ()
) -> WorkspaceSnapshot:
    after = base.apply(changed, deleted)
    return WorkspaceSnapshot(
        seq=1,
        base=base.digest,
        manifest=after.digest,
        changed=tuple(changed),
        deleted=deleted,
        total_bytes=after.total_bytes,
        files=after.files,
    )


def raw_snapshot(
    base: WorkspaceManifest, changed: list[ManifestEntry], **claims: object
) -> WorkspaceSnapshot:
    fields: dict[str, object] = {
        "seq": 1,
        "base": base.digest,
        "manifest": "sha256:" + "0" * 64,
        "changed": tuple(changed),
        "total_bytes": sum(e.size for e in changed),
        "files": len(changed),
    }
    if "changed_" in claims:
        fields["changed"] = claims.pop("changed_")
    return WorkspaceSnapshot.model_validate({**fields, **claims})


@pytest.fixture
def rows() -> Rows:
    return Rows()


@pytest.fixture
def blobs_dir(tmp_path: Path) -> Path:
    return tmp_path / "blobs"


def intake(
    blobs_dir: Path,
    rows: Rows,
    base: WorkspaceManifest = EMPTY_MANIFEST,
    known: set[str] | None = None,
    cap: int = CAP,
) -> WorkspaceIntake:
    return WorkspaceIntake(DirBlobStore(blobs_dir), rows, "acme", "job-1", base, known or set(), cap)


def written(blobs_dir: Path) -> list[Path]:
    return [p for p in blobs_dir.rglob("*") if p.is_file()] if blobs_dir.exists() else []


async def test_a_good_snapshot_is_stored(blobs_dir: Path, rows: Rows) -> None:
    take = intake(blobs_dir, rows)
    a, b = b"print('hi')\n", b"x" * 300_000
    await take.blob(blob(a))
    zb = zlib.compress(b)
    sha = sha256_hex(b)
    await take.blob(WorkspaceBlob(sha256=sha, size=len(b), data=zb[:100], last=False))
    await take.blob(WorkspaceBlob(sha256=sha, size=len(b), data=zb[100:], last=True))
    await take.blob(WorkspaceBlob(sha256=sha256_hex(b"plain"), size=5, compression="none", data=b"plain"))
    changed = [entry("src/a.py", a, True), entry("big.bin", b), entry("p.txt", b"plain")]
    after = await take.snapshot(snapshot(EMPTY_MANIFEST, changed))
    assert after.files == 3 and take.manifest == after
    assert rows.manifests[("acme", after.digest)] == after
    assert rows.blobs[("acme", sha)][0] == len(b)
    store = DirBlobStore(blobs_dir)
    assert zlib.decompress(await store.get("acme", sha)) == b
    assert zlib.decompress(await store.get("acme", sha256_hex(b"plain"))) == b"plain"
    # the next snapshot may name content of its own lineage without sending it again
    again = snapshot(after, [entry("copy.py", a)], ("big.bin",))
    assert (await take.snapshot(again)).by_path()["copy.py"].sha256 == sha256_hex(a)


async def test_known_content_of_the_lineage_needs_no_blob(blobs_dir: Path, rows: Rows) -> None:
    data = b"restored"
    take = intake(blobs_dir, rows, known={sha256_hex(data)})
    after = await take.snapshot(snapshot(EMPTY_MANIFEST, [entry("r.txt", data)]))
    assert after.files == 1


BOMB = zlib.compress(b"\0" * (50 << 20))


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        pytest.param(
            [WorkspaceBlob(sha256=sha256_hex(b"other"), size=4, data=zlib.compress(b"evil"))],
            "has SHA-256",
            id="wrong-hash",
        ),
        pytest.param(
            [WorkspaceBlob(sha256=sha256_hex(b"evil"), size=3, data=zlib.compress(b"evil"))],
            "inflates past",
            id="wrong-size",
        ),
        pytest.param(
            [WorkspaceBlob(sha256="a" * 64, size=CAP + 1, data=b"")],
            "over the cap",
            id="oversized-blob",
        ),
        pytest.param(
            [WorkspaceBlob(sha256="b" * 64, size=1000, data=BOMB)],
            "more bytes than|inflates past",
            id="zlib-bomb",
        ),
        pytest.param(
            [WorkspaceBlob(sha256="b" * 64, size=1000, data=BOMB[:200], last=False)],
            "inflates past",
            id="zlib-bomb-piece",
        ),
        pytest.param(
            [WorkspaceBlob(sha256=sha256_hex(b"ab"), size=2, data=b"not zlib")],
            "not a zlib stream",
            id="not-zlib",
        ),
        pytest.param(
            [WorkspaceBlob(sha256=sha256_hex(b"ab"), size=2, data=zlib.compress(b"ab")[:-3])],
            "incomplete",
            id="truncated",
        ),
        pytest.param(
            [
                WorkspaceBlob(sha256=sha256_hex(b"ab"), size=2, data=zlib.compress(b"ab")[:4], last=False),
                blob(b"cd"),
            ],
            "amid the pieces",
            id="interleaved",
        ),
    ],
)
async def test_lying_blobs_are_refused(
    blobs_dir: Path, rows: Rows, events: list[WorkspaceBlob], reason: str
) -> None:
    take = intake(blobs_dir, rows)
    with pytest.raises(WorkspaceViolation, match=reason):
        for ev in events:
            await take.blob(ev)
    assert written(blobs_dir) == [] and rows.blobs == {} and rows.manifests == {}


def _hostile(
    name: str,
) -> tuple[list[WorkspaceBlob], WorkspaceSnapshot, WorkspaceManifest]:
    good = b"good"
    base = WorkspaceManifest.of([entry("dir", b"file")])
    if name == "dotdot":
        return (
            [blob(good)],
            raw_snapshot(EMPTY_MANIFEST, [], changed_=[_entry_dict("../escape", good)]),
            EMPTY_MANIFEST,
        )
    if name == "absolute":
        return (
            [blob(good)],
            raw_snapshot(EMPTY_MANIFEST, [], changed_=[_entry_dict("/etc/passwd", good)]),
            EMPTY_MANIFEST,
        )
    if name == "symlink":  # "dir" is a file in the base; a path under it would go through a link
        return [blob(good)], raw_snapshot(base, [entry("dir/x", good)]), base
    if name == "unsent":
        return [], snapshot(EMPTY_MANIFEST, [entry("ghost.txt", b"never sent")]), EMPTY_MANIFEST
    if name == "other-job":  # in the tenant's store (see the test), not in this job's lineage
        return [], snapshot(EMPTY_MANIFEST, [entry("stolen.txt", b"another job's secret")]), EMPTY_MANIFEST
    if name == "base":
        return [blob(good)], snapshot(base, [entry("g", good)]), EMPTY_MANIFEST
    if name == "digest":
        return [blob(good)], raw_snapshot(EMPTY_MANIFEST, [entry("g", good)]), EMPTY_MANIFEST
    if name == "totals":
        snap = snapshot(EMPTY_MANIFEST, [entry("g", good)])
        return [blob(good)], snap.model_copy(update={"total_bytes": 1}), EMPTY_MANIFEST
    if name == "size":
        lie = ManifestEntry(path="g", sha256=sha256_hex(good), size=99)
        return [blob(good)], snapshot(EMPTY_MANIFEST, [lie]), EMPTY_MANIFEST
    if name == "deleted":
        return [], raw_snapshot(EMPTY_MANIFEST, [], deleted=["nothing"]), EMPTY_MANIFEST
    raise AssertionError(name)


def _entry_dict(path: str, data: bytes) -> dict[str, object]:
    return {"path": path, "sha256": sha256_hex(data), "size": len(data), "executable": False}


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("dotdot", r"\.\."),
        ("absolute", "absolute|relative"),
        ("symlink", "is a file and also a directory"),
        ("unsent", "never sent"),
        ("other-job", "never sent"),
        ("base", "applies to"),
        ("digest", "not the claimed"),
        ("totals", "files are"),
        ("size", "claims 99 bytes"),
        ("deleted", "not in the workspace"),
    ],
)
async def test_lying_snapshots_are_refused(blobs_dir: Path, rows: Rows, case: str, reason: str) -> None:
    events, snap, current = _hostile(case)
    other = DirBlobStore(blobs_dir)
    secret = b"another job's secret"
    await other.put("acme", sha256_hex(secret), zlib.compress(secret))  # another job's file
    before = written(blobs_dir)
    take = intake(blobs_dir, rows, base=current if case != "base" else EMPTY_MANIFEST)
    if case == "base":
        take = intake(blobs_dir, rows)
    for ev in events:
        await take.blob(ev)
    with pytest.raises(WorkspaceViolation, match=reason):
        await take.snapshot(snap)
    assert written(blobs_dir) == before and rows.blobs == {} and rows.manifests == {}


async def test_over_max_bytes_is_refused(blobs_dir: Path, rows: Rows) -> None:
    data = b"y" * 600
    take = intake(blobs_dir, rows, known={sha256_hex(data)}, cap=1000)
    with pytest.raises(WorkspaceViolation, match="exceed the cap"):
        await take.snapshot(snapshot(EMPTY_MANIFEST, [entry("a", data), entry("b", data)]))
    assert written(blobs_dir) == [] and rows.manifests == {}


async def test_unfinished_blob_and_after_stop(blobs_dir: Path, rows: Rows) -> None:
    take = intake(blobs_dir, rows)
    data = b"abc"
    await take.blob(WorkspaceBlob(sha256=sha256_hex(data), size=3, data=zlib.compress(data)[:2], last=False))
    with pytest.raises(WorkspaceViolation, match="unfinished"):
        await take.snapshot(snapshot(EMPTY_MANIFEST, [entry("a", data)]))
    take = intake(blobs_dir, rows)
    take.stopped(WorkspaceStopped(reason="over max_bytes", bytes=10, max_bytes=5))
    with pytest.raises(WorkspaceViolation, match="after snapshots stopped"):
        await take.snapshot(snapshot(EMPTY_MANIFEST, []))
    assert written(blobs_dir) == []


async def test_the_job_store_takes_the_rows(blobs_dir: Path, tmp_path: Path) -> None:
    from airlock.controller import SqliteJobStore

    data = b"stored for real"
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        take = WorkspaceIntake(DirBlobStore(blobs_dir), store, "acme", "job-1", EMPTY_MANIFEST, set(), CAP)
        await take.blob(blob(data))
        after = await take.snapshot(snapshot(EMPTY_MANIFEST, [entry("f.txt", data)]))
        assert await store.manifest("acme", after.digest) == after
        usage = await store.workspace_usage()
        assert [(t.tenant, t.blobs, t.plain) for t in usage.tenants] == [("acme", 1, len(data))]
