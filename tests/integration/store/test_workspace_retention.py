"""Retention of workspaces, on SQLite and PostgreSQL: a fork is part of its original's tree
(never pruned alone, the tree kept until the fork is due too), a pruned tree's checkpoint log
goes with it, and the blob sweep keeps what a checkpoint or sandbox names and what is young."""

from __future__ import annotations

import time
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airlock.controller import JobStore, Pruner
from airlock.controller._blob_gc import BlobGc
from airlock.controller._blobs import DirBlobStore
from airlock.controller._weaving import Weaves
from airlock.identity import AuthSettings, RetentionSettings
from airlock.jobs import JobState
from airlock.policy import ManifestEntry, WorkspaceManifest, sha256_hex
from airlock.state import InMemoryStore, execute
from layer0 import TurnInput
from tests.support.job_stores import StoreSite, count_rows


class Clock:
    """The simulated time, from now on."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr("airlock.controller._store.utcnow", fake)
    return fake


def pruner(store: JobStore, clock: Clock, gc: BlobGc | None = None) -> Pruner:
    retention = RetentionSettings(finished_jobs=timedelta(days=1))
    return Pruner(store, Weaves(InMemoryStore()), retention, AuthSettings(), now=clock, gc=gc)


async def finished(store: JobStore, tenant: str = "acme", forked_from: str | None = None) -> str:
    job, _ = await store.create(agent="a", input=TurnInput.new("hi"), tenant=tenant)
    if forked_from is not None:
        await store.run(execute("UPDATE jobs SET forked_from = ? WHERE id = ?", forked_from, job.id))
    await store.log_checkpoint(job.id, "{}", [], None, None)
    await store.transition(job.id, JobState.RUNNING)
    await store.transition(job.id, JobState.SUCCEEDED)
    return job.id


async def test_a_fork_is_part_of_its_original_tree(site: StoreSite, clock: Clock) -> None:
    async with site.open() as store:
        root = await finished(store)
        clock.now += timedelta(days=1)
        fork = await finished(store, forked_from=root)
        fork_of_fork = await finished(store, forked_from=fork)
        clock.now += timedelta(hours=12)  # the root is due, its forks are not
        report = await pruner(store, clock).once()
        assert report.jobs == 0 and await count_rows(store, "checkpoint_log") == 3
        assert await store.get(fork) is not None  # nor pruned alone
        clock.now += timedelta(days=1)
        report = await pruner(store, clock).once()
        assert report.roots == [root] and report.jobs == 3 and report.tenants == {"acme"}
        assert await store.get(fork_of_fork) is None
        assert await count_rows(store, "checkpoint_log") == 0


def manifest(*contents: bytes) -> WorkspaceManifest:
    return WorkspaceManifest.of(
        ManifestEntry(path=f"f{i}", sha256=sha256_hex(c), size=len(c)) for i, c in enumerate(contents)
    )


async def put(store: JobStore, blobs: DirBlobStore, tenant: str, *contents: bytes) -> None:
    for data in contents:
        packed = zlib.compress(data)
        await blobs.put(tenant, sha256_hex(data), packed)
        await store.note_blob(tenant, sha256_hex(data), len(data), len(packed))


async def names(blobs: DirBlobStore, tenant: str) -> set[str]:
    return {sha async for sha, _ in blobs.names(tenant)}


async def test_the_sweep_keeps_what_is_named_and_young(site: StoreSite, clock: Clock, tmp_path: Path) -> None:
    blobs = DirBlobStore(tmp_path / "blobs")
    a, b, c, d, e, young = b"a", b"bb", b"ccc", b"dddd", b"eeeee", b"young"
    async with site.open() as store:
        await put(store, blobs, "acme", a, b, c, e)
        await put(store, blobs, "other", d)
        kept, gone, boxed, others = manifest(a, b), manifest(b, c), manifest(e), manifest(d)
        for m in (kept, gone, boxed):
            await store.put_manifest("acme", m)
        await store.put_manifest("other", others)
        keep_job, _ = await store.create(agent="a", input=TurnInput.new("hi"), tenant="acme")
        await store.log_checkpoint(keep_job.id, "{}", [], kept.digest, None)
        gone_job = await finished(store)
        await store.save_checkpoint(gone_job, "{}", [], manifest=gone.digest)
        other_job, _ = await store.create(agent="a", input=TurnInput.new("hi"), tenant="other")
        await store.save_checkpoint(other_job.id, "{}", [], manifest=others.digest)
        await store.run(
            execute(
                "INSERT INTO sandboxes (id, tenant, owner, agent, spec_digest, state, manifest, ttl_s, "
                "created_at, last_used_at, replica) VALUES ('sb1', 'acme', NULL, 'a', 'x', 'paused', ?, "
                "NULL, 0, 0, NULL)",
                boxed.digest,
            )
        )
        clock.now += timedelta(days=2)
        gc = BlobGc(store, blobs, now=lambda: clock.now.timestamp())
        await pruner(store, clock, gc).once()
        assert await names(blobs, "acme") == {sha256_hex(x) for x in (a, b, e)}
        assert await names(blobs, "other") == {sha256_hex(d)}
        assert await store.manifest("acme", gone.digest) is None
        assert await store.manifest("acme", kept.digest) == kept
        assert await store.manifest("acme", boxed.digest) == boxed
        assert await count_rows(store, "workspace_blobs") == 4

        # a blob and a manifest of a snapshot under way (no checkpoint names them yet) stay
        await put(store, blobs, "acme", young)
        await store.put_manifest("acme", manifest(young))
        report = await BlobGc(store, blobs).sweep("acme")
        assert (report.blobs, report.manifests) == (0, 0)
        assert sha256_hex(young) in await names(blobs, "acme")
        later = await BlobGc(store, blobs, now=lambda: time.time() + 7200).sweep("acme")
        assert (later.blobs, later.manifests, later.bytes) == (1, 1, len(zlib.compress(young)))
        assert sha256_hex(young) not in await names(blobs, "acme")
