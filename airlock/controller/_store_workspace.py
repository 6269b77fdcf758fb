"""The job store's workspace rows (schema v6), as operations both engines run.

``workspace_blobs`` notes each tenant's stored blob (its size plain and stored), and
``workspace_manifests`` each manifest a snapshot made (its entries as JSON), both shared by
the tenant's jobs. ``checkpoint_log`` keeps every checkpoint of a job (the delta as the runner
sent it, the started calls, the manifest, the last record): a fork folds it up to a point.
``checkpoints.manifest`` is the manifest of the latest checkpoint, the one a resume restores.
"""

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
    "note_blob",
    "put_manifest",
    "save_checkpoint",
]


@dataclass(frozen=True)
class LoggedCheckpoint:
    """One row of a job's checkpoint log."""

    seq: int
    delta: str
    started: list[str]
    manifest: str | None
    record: str | None
    time: float


def save_checkpoint(job_id: str, state: str, started: Iterable[str], manifest: str | None) -> Op[None]:
    """The job's latest checkpoint (``manifest`` None: the previous one's stays)."""
    yield from execute(
        "INSERT INTO checkpoints (job_id, state, started, time, manifest) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(job_id) DO UPDATE SET state = excluded.state, started = excluded.started, "
        "time = excluded.time, manifest = COALESCE(excluded.manifest, checkpoints.manifest)",
        job_id,
        state,
        json.dumps(sorted(started)),
        time.time(),
        manifest,
    )


def checkpoint_manifest(job_id: str) -> Op[str | None]:
    """The manifest digest of the job's latest checkpoint (None: none, or no snapshot)."""
    row = yield from fetch_one("SELECT manifest FROM checkpoints WHERE job_id = ?", job_id)
    return str(row[0]) if row is not None and row[0] is not None else None


def log_checkpoint(
    job_id: str, delta: str, started: Iterable[str], manifest: str | None, record: str | None
) -> Op[int]:
    """Append a checkpoint to the job's log; its seq (1, 2, …)."""
    row = yield from fetch_one(
        "INSERT INTO checkpoint_log (job_id, seq, delta, started, manifest, record, time) "
        "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? FROM checkpoint_log WHERE job_id = ? "
        "RETURNING seq",
        job_id,
        delta,
        json.dumps(sorted(started)),
        manifest,
        record,
        time.time(),
        job_id,
    )
    assert row is not None
    return int(row[0])


def checkpoint_log(job_id: str, upto: int | None = None) -> Op[list[LoggedCheckpoint]]:
    """The job's logged checkpoints in order (up to seq ``upto``, if given)."""
    rows = yield from fetch_all(
        "SELECT seq, delta, started, manifest, record, time FROM checkpoint_log "
        "WHERE job_id = ? AND seq <= ? ORDER BY seq",
        job_id,
        upto if upto is not None else 2**62,
    )
    return [
        LoggedCheckpoint(int(r[0]), str(r[1]), list(json.loads(r[2])), r[3], r[4], float(r[5])) for r in rows
    ]


def put_manifest(tenant: str, manifest: WorkspaceManifest) -> Op[None]:
    """Keep a manifest of the tenant (idempotent: the digest names the content)."""
    yield from execute(
        "INSERT INTO workspace_manifests (tenant, digest, files, bytes, entries, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(tenant, digest) DO NOTHING",
        tenant,
        manifest.digest,
        manifest.files,
        manifest.total_bytes,
        manifest.to_json(),
        time.time(),
    )


def manifest(tenant: str, digest: str) -> Op[WorkspaceManifest | None]:
    """The tenant's manifest of that digest (None: unknown)."""
    row = yield from fetch_one(
        "SELECT entries FROM workspace_manifests WHERE tenant = ? AND digest = ?", tenant, digest
    )
    return WorkspaceManifest.from_json(str(row[0])) if row is not None else None


def note_blob(tenant: str, sha256: str, size: int, stored: int) -> Op[None]:
    """Note a blob the tenant's store holds (idempotent; a re-upload refreshes its time, so a
    sweep's grace period counts from the last use)."""
    yield from execute(
        "INSERT INTO workspace_blobs (tenant, sha256, size, stored, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(tenant, sha256) DO UPDATE SET created_at = excluded.created_at",
        tenant,
        sha256,
        size,
        stored,
        time.time(),
    )
