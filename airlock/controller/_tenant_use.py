"""What a tenant uses now, read from the job store in the caller's transaction."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation

from airlock.jobs import JobState
from airlock.state import Op, fetch_all, fetch_one

#: States in which a submitted job counts against ``concurrent_jobs`` (it holds, or waits
#: for, a worker and a sandbox; one waiting for a person holds neither).
COUNTED_STATES = (
    JobState.QUEUED.value,
    JobState.PROVISIONING.value,
    JobState.RUNNING.value,
    JobState.APPLYING_EFFECTS.value,
)


@dataclass(frozen=True)
class Usage:
    """A tenant's use of what its quotas limit."""

    concurrent_jobs: int
    jobs_last_minute: int
    cost_today: Decimal
    artifact_bytes: int


def day_start(now: datetime) -> datetime:
    """Midnight UTC of ``now``'s day (``cost_per_day`` counts from it)."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


#: What :func:`measure` can count, by quota.
COUNTED = frozenset({"concurrent_jobs", "jobs_per_minute", "cost_per_day", "artifact_bytes"})


def measure(tenant: str, now: datetime, counted: frozenset[str] = COUNTED) -> Op[Usage]:
    """``tenant``'s use as of ``now`` (submitted jobs only: children run inside their root), of
    the quotas in ``counted`` (the others read 0: a submit pays only for the limits it has)."""
    concurrent = recent = stored = 0
    cost = Decimal(0)
    if "concurrent_jobs" in counted:
        marks = ", ".join("?" * len(COUNTED_STATES))
        concurrent = yield from _count(
            f"SELECT COUNT(*) FROM jobs WHERE tenant = ? AND state IN ({marks}) AND origin = 'submit'",
            tenant,
            *COUNTED_STATES,
        )
    if "jobs_per_minute" in counted:
        recent = yield from _count(
            "SELECT COUNT(*) FROM jobs WHERE tenant = ? AND created_at >= ? AND origin = 'submit'",
            tenant,
            (now - timedelta(seconds=60)).timestamp(),
        )
    if "cost_per_day" in counted:
        costs = yield from fetch_all(
            "SELECT cost FROM jobs WHERE tenant = ? AND finished_at >= ? AND cost IS NOT NULL",
            tenant,
            day_start(now).timestamp(),
        )
        cost = sum((stored_money(c[0]) for c in costs), Decimal(0))
    if "artifact_bytes" in counted:
        stored = yield from _count(
            "SELECT COALESCE(SUM(f.size), 0) FROM jobs j JOIN job_files f ON f.job_id = j.id "
            "WHERE j.tenant = ? AND f.kind = 'artifact'",
            tenant,
        )
    return Usage(concurrent, recent, cost, stored)


def _count(sql: str, *args: object) -> Op[int]:
    row = yield from fetch_one(sql, *args)
    return int(row[0]) if row is not None else 0


def stored_money(value: object) -> Decimal:
    """A cost as stored (decimal text, or None), as a Decimal (0 when absent or unreadable)."""
    try:
        return Decimal(str(value)) if value is not None else Decimal(0)
    except InvalidOperation:
        return Decimal(0)
