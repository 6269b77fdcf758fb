"""The audit log: every state-changing call on the controller's API (who, tenant, when, from
where, on what, how it ended), a table of the job store (upgraded with it). Its operations run
on SQLite and PostgreSQL alike (``airlock.state`` operations)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from airlock.jobs import AuditRecord
from airlock.state import Op, fetch_all, fetch_one

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    principal TEXT NOT NULL,
    tenant TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    peer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_tenant ON audit(tenant, seq);
"""

#: Characters of ``detail`` kept (a refusal's message, the quotas; never a credential).
DETAIL_LIMIT = 8000


class AuditFilter(BaseModel):
    """Which entries :func:`select` returns (all given conditions hold), newest first."""

    model_config = ConfigDict(frozen=True)

    tenant: str | None = None
    principal: str | None = None
    action: str | None = None
    since: datetime | None = None
    #: Only entries older than this ``seq`` (paging).
    before_seq: int | None = None
    limit: int = 100


def insert(entry: AuditRecord) -> Op[int]:
    """Append ``entry``; its ``seq``."""
    row = yield from fetch_one(
        "INSERT INTO audit (time, principal, tenant, action, target, peer, outcome, detail) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
        entry.time.timestamp(),
        entry.principal,
        entry.tenant,
        entry.action,
        entry.target,
        entry.peer,
        entry.outcome,
        entry.detail[:DETAIL_LIMIT],
    )
    assert row is not None
    return int(row[0])


def select(where: AuditFilter) -> Op[list[AuditRecord]]:
    """The entries matching ``where``, newest first."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (("tenant", where.tenant), ("principal", where.principal), ("action", where.action)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    if where.since is not None:
        clauses.append("time >= ?")
        args.append(where.since.timestamp())
    if where.before_seq is not None:
        clauses.append("seq < ?")
        args.append(where.before_seq)
    sql = "SELECT seq, time, principal, tenant, action, target, peer, outcome, detail FROM audit"
    if clauses:
        sql += " WHERE " + " AND ".join(clauses)
    sql += " ORDER BY seq DESC LIMIT ?"
    args.append(max(1, min(where.limit, 1000)))
    rows = yield from fetch_all(sql, *args)
    return [
        AuditRecord(
            seq=r[0],
            time=datetime.fromtimestamp(r[1], UTC),
            principal=r[2],
            tenant=r[3],
            action=r[4],
            target=r[5],
            peer=r[6],
            outcome=r[7],
            detail=r[8],
        )
        for r in rows
    ]


#: The audit action of a change of the tenants' quotas (they come from ``auth:``).
QUOTAS_CHANGED = "QuotasChanged"


def quota_change(quotas: str, source: str, now: datetime) -> Op[AuditRecord | None]:
    """An entry for ``quotas`` (the tenants' quotas as JSON) when they differ from the last
    audited ones (a new or edited ``auth:``), written now; None when unchanged."""
    last = yield from fetch_one(
        "SELECT detail FROM audit WHERE action = ? ORDER BY seq DESC LIMIT 1", QUOTAS_CHANGED
    )
    if last is not None and last[0] == quotas:
        return None
    entry = AuditRecord(
        time=now, principal=source, tenant="", action=QUOTAS_CHANGED, outcome="OK", detail=quotas
    )
    yield from insert(entry)
    return entry
