"""The job store's workspace rows, as operations either engine runs: every checkpoint of a
job (what a fork starts from), the tenants' manifests, and the blobs they hold."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass

from airlock.policy import WorkspaceManifest
from airlock.state import Op, execute, fetch_all, fetch_one

__all__ = [
    "LoggedCheckpoint",
    "checkpoint_log",
    "checkpoint_manifest",
    "log_checkpoint",
    "manifest",
    "note_blobs",
    "put_manifest",
]


@dataclass(frozen=True)
class LoggedCheckpoint:
    """One checkpoint of a job's history, as received (``delta``: the Checkpoint event's JSON),
    with the manifest it names and the job's latest record then."""

    seq: int
    delta: str
    started: list[str]
    manifest: str | None
    record: str | None
    time: float


def log_checkpoint(
    job_id: str, delta: str, started: Iterable[str], manifest: str | None, record: str | None
) -> Op[int]:
    """Append a checkpoint to the job's history; its number (from 1)."""
    row = yield from fetch_one("SELECT COALESCE(MAX(seq), 0) FROM checkpoint_log WHERE job_id = ?", job_id)
    seq = int(row[0]) + 1 if row is not None else 1
    yield from execute(
        "INSERT INTO checkpoint_log (job_id, seq, delta, started, manifest, record, time) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        job_id,
        seq,
        delta,
        json.dumps(sorted(started)),
        manifest,
        record,
        time.time(),
    )
    return seq


def checkpoint_log(job_id: str) -> Op[list[LoggedCheckpoint]]:
    """The job's checkpoints, in order."""
    rows = yield from fetch_all(
        "SELECT seq, delta, started, manifest, record, time FROM checkpoint_log "
        "WHERE job_id = ? ORDER BY seq",
        job_id,
    )
    return [LoggedCheckpoint(int(r[0]), r[1], list(json.loads(r[2])), r[3], r[4], float(r[5])) for r in rows]


def checkpoint_manifest(job_id: str) -> Op[str | None]:
    """The manifest digest the job's latest checkpoint names (None: none, or no checkpoint)."""
    row = yield from fetch_one("SELECT manifest FROM checkpoints WHERE job_id = ?", job_id)
    return row[0] if row is not None and row[0] else None


def put_manifest(tenant: str, manifest: WorkspaceManifest) -> Op[None]:
    """Keep a tenant's manifest under its digest (kept once: the digest names the content)."""
    yield from execute(
        "INSERT INTO workspace_manifests (tenant, digest, files, bytes, entries, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, digest) DO NOTHING",
        tenant,
        manifest.digest,
        manifest.files,
        manifest.total_bytes,
        manifest.to_json(),
        time.time(),
    )


def manifest(tenant: str, digest: str) -> Op[WorkspaceManifest | None]:
    """The tenant's manifest ``digest`` (None: the tenant keeps none by that digest)."""
    row = yield from fetch_one(
        "SELECT entries FROM workspace_manifests WHERE tenant = ? AND digest = ?", tenant, digest
    )
    return WorkspaceManifest.from_json(row[0]) if row is not None else None


def note_blobs(tenant: str, blobs: Iterable[tuple[str, int, int]]) -> Op[None]:
    """Note the tenant's blobs just stored: ``(sha256, size, stored bytes)`` each."""
    now = time.time()
    for sha, size, stored in blobs:
        yield from execute(
            "INSERT INTO workspace_blobs (tenant, sha256, size, stored, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant, sha256) DO NOTHING",
            tenant,
            sha,
            size,
            stored,
            now,
        )
