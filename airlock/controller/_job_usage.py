"""What finished jobs used (cost, tokens), by when they finished: what a plot of an agent's
spend over time reads, in the caller's transaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from airlock.jobs import JobFilter
from airlock.state import Op, fetch_all

from ._tenant_use import stored_money


@dataclass(frozen=True)
class FinishedUse:
    """One finished job's use: when it finished, its cost (US dollars) and its tokens."""

    finished_at: datetime
    cost: Decimal
    tokens_in: int
    tokens_out: int


def finished_uses(where: JobFilter, since: datetime, until: datetime) -> Op[list[FinishedUse]]:
    """The jobs matching ``where`` (agent, tenant, owner; every origin) that finished in
    ``[since, until)``, oldest first, at most ``where.limit``."""
    clauses = ["finished_at >= ?", "finished_at < ?"]
    args: list[Any] = [since.timestamp(), until.timestamp()]
    for column, value in (("agent", where.agent), ("tenant", where.tenant), ("owner", where.owner)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    sql = "SELECT finished_at, cost, output FROM jobs WHERE " + " AND ".join(clauses)
    sql += " ORDER BY finished_at LIMIT ?"
    rows = yield from fetch_all(sql, *args, max(1, where.limit))
    return [_use(float(r[0]), r[1], r[2]) for r in rows]


def _use(finished_at: float, cost: object, output: object) -> FinishedUse:
    metadata: dict[str, Any] = {}
    if isinstance(output, str):
        try:
            found = json.loads(output).get("metadata")
        except (ValueError, AttributeError):
            found = None
        metadata = found if isinstance(found, dict) else {}
    return FinishedUse(
        datetime.fromtimestamp(finished_at, UTC),
        stored_money(cost if cost is not None else metadata.get("cost")),
        _count(metadata.get("tokens_in")),
        _count(metadata.get("tokens_out")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
