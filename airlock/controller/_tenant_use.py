"""What a tenant uses now, read from the job store in the caller's transaction (SQLite)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from airlock.jobs import JobState

#: States in which a submitted job counts against ``concurrent_jobs`` (it holds, or waits
#: for, a worker and a sandbox; one waiting for a person holds neither).
COUNTED_STATES = (
    JobState.QUEUED.value,
    JobState.PROVISIONING.value,
    JobState.RUNNING.value,
    JobState.APPLYING_EFFECTS.value,
)


@dataclass(frozen=True)
class TenantUse:
    """A tenant's use of what its quotas limit."""

    concurrent_jobs: int
    jobs_last_minute: int
    cost_today: Decimal
    artifact_bytes: int


def day_start(now: datetime) -> datetime:
    """Midnight UTC of ``now``'s day (``cost_per_day`` counts from it)."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def measure(conn: sqlite3.Connection, tenant: str, now: datetime) -> TenantUse:
    """``tenant``'s use as of ``now`` (submitted jobs only: children run inside their root)."""
    marks = ", ".join("?" * len(COUNTED_STATES))
    concurrent = conn.execute(
        f"SELECT COUNT(*) FROM jobs WHERE tenant = ? AND origin = 'submit' AND state IN ({marks})",
        (tenant, *COUNTED_STATES),
    ).fetchone()[0]
    recent = conn.execute(
        "SELECT COUNT(*) FROM jobs WHERE tenant = ? AND origin = 'submit' AND created_at >= ?",
        (tenant, (now - timedelta(seconds=60)).timestamp()),
    ).fetchone()[0]
    costs = conn.execute(
        "SELECT json_extract(output, '$.metadata.cost') FROM jobs "
        "WHERE tenant = ? AND output IS NOT NULL AND finished_at >= ?",
        (tenant, day_start(now).timestamp()),
    ).fetchall()
    stored = conn.execute(
        "SELECT COALESCE(SUM(f.size), 0) FROM job_files f JOIN jobs j ON j.id = f.job_id "
        "WHERE j.tenant = ? AND f.kind = 'artifact'",
        (tenant,),
    ).fetchone()[0]
    return TenantUse(
        int(concurrent), int(recent), sum((_money(c[0]) for c in costs), Decimal(0)), int(stored)
    )


def _money(value: object) -> Decimal:
    try:
        return Decimal(str(value)) if value is not None else Decimal(0)
    except InvalidOperation:
        return Decimal(0)
