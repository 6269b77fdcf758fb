"""The job store's long-lived sandboxes (table ``sandboxes``, schema v6), as operations both
engines run: one row per sandbox of a tenant, its agent and spec digest fixed at creation, its
phase, the manifest of its workspace's last snapshot, its idle TTL and last use."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from airlock.jobs import SandboxInfo, SandboxPhase
from airlock.state import Op, Row, execute, fetch_all, fetch_one

__all__ = ["delete", "get", "idle", "insert", "listed", "update"]

_COLUMNS = "id, tenant, owner, agent, spec_digest, state, manifest, ttl_s, created_at, last_used_at, replica"


def insert(sandbox: SandboxInfo, replica: str) -> Op[None]:
    """Record a new sandbox (held by ``replica``)."""
    yield from execute(
        f"INSERT INTO sandboxes ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        sandbox.id,
        sandbox.tenant,
        sandbox.owner,
        sandbox.agent,
        sandbox.spec_digest,
        sandbox.state,
        sandbox.manifest,
        sandbox.ttl_s,
        sandbox.created_at.timestamp(),
        sandbox.last_used_at.timestamp(),
        replica,
    )


def get(sandbox_id: str) -> Op[SandboxInfo | None]:
    """The sandbox (None: unknown)."""
    row = yield from fetch_one(f"SELECT {_COLUMNS} FROM sandboxes WHERE id = ?", sandbox_id)
    return _of(row) if row is not None else None


def listed(tenant: str | None) -> Op[list[SandboxInfo]]:
    """The tenant's sandboxes (None: every tenant's), newest first."""
    if tenant is None:
        rows = yield from fetch_all(f"SELECT {_COLUMNS} FROM sandboxes ORDER BY created_at DESC, id")
    else:
        rows = yield from fetch_all(
            f"SELECT {_COLUMNS} FROM sandboxes WHERE tenant = ? ORDER BY created_at DESC, id", tenant
        )
    return [_of(r) for r in rows]


def idle(now: float) -> Op[list[str]]:
    """The sandboxes idle longer than their TTL at ``now``."""
    rows = yield from fetch_all(
        "SELECT id FROM sandboxes WHERE ttl_s IS NOT NULL AND last_used_at + ttl_s < ? ORDER BY id", now
    )
    return [str(r[0]) for r in rows]


def update(
    sandbox_id: str, *, state: SandboxPhase | None = None, manifest: str | None = None, used: bool = True
) -> Op[None]:
    """Set its phase and manifest (None: unchanged); ``used``: its last use is now."""
    yield from execute(
        "UPDATE sandboxes SET state = COALESCE(?, state), manifest = COALESCE(?, manifest), "
        "last_used_at = CASE WHEN ? THEN ? ELSE last_used_at END WHERE id = ?",
        state,
        manifest,
        used,
        time.time(),
        sandbox_id,
    )


def delete(sandbox_id: str) -> Op[None]:
    """Forget the sandbox (its manifest's blobs are swept once nothing else names them)."""
    yield from execute("DELETE FROM sandboxes WHERE id = ?", sandbox_id)


def _of(row: Row) -> SandboxInfo:
    return SandboxInfo(
        id=row["id"],
        tenant=row["tenant"],
        owner=row["owner"],
        agent=row["agent"],
        spec_digest=row["spec_digest"],
        state=row["state"],
        manifest=row["manifest"],
        ttl_s=row["ttl_s"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        last_used_at=datetime.fromtimestamp(row["last_used_at"], UTC),
    )
