"""``GET /api/v1/agents/{name}/usage``: an agent's cost and tokens over time, in buckets of an
hour or a day, counted from the jobs (of the caller's tenant) that finished in the window."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Annotated, Any, Literal, Protocol

from fastapi import APIRouter, Query

from airlock.controller import scoped_filter
from airlock.jobs import JobFilter

from ._auth import Caller
from ._deps import Service
from ._errors import ApiError, invalid

router = APIRouter(prefix="/api/v1/agents", tags=["agents"])

Bucket = Literal["hour", "day"]
STEPS: dict[str, timedelta] = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
#: The default window, and the most buckets one answer has.
DEFAULT_WINDOW = timedelta(days=7)
MAX_BUCKETS = 1000
#: The most finished jobs one answer counts (beyond: ``truncated``).
MAX_JOBS = 20_000


class Use(Protocol):
    """What one finished job used."""

    @property
    def finished_at(self) -> datetime: ...
    @property
    def cost(self) -> Decimal: ...
    @property
    def tokens_in(self) -> int: ...
    @property
    def tokens_out(self) -> int: ...


def floor(moment: datetime, bucket: str) -> datetime:
    """The start of ``moment``'s bucket (UTC)."""
    moment = moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return moment.replace(hour=0) if bucket == "day" else moment


@dataclass
class _Sum:
    jobs: int = 0
    cost: Decimal = Decimal(0)
    tokens_in: int = 0
    tokens_out: int = 0

    def add(self, use: Use) -> None:
        self.jobs += 1
        self.cost += use.cost
        self.tokens_in += use.tokens_in
        self.tokens_out += use.tokens_out

    def json(self, **more: str) -> dict[str, Any]:
        return {
            **more,
            "jobs": self.jobs,
            "cost_usd": str(self.cost),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
        }


def buckets(
    uses: list[Use], since: datetime, until: datetime, bucket: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every bucket from ``since``'s to the one holding ``until`` (empty ones too), each with
    its jobs, cost (decimal text) and tokens; and the totals."""
    step, start = STEPS[bucket], floor(since, bucket)
    count = max(math.ceil((until - start) / step), 1)
    sums, total = [_Sum() for _ in range(count)], _Sum()
    for use in uses:
        sums[min(int((use.finished_at - start) / step), count - 1)].add(use)
        total.add(use)
    rows = [s.json(start=(start + i * step).isoformat()) for i, s in enumerate(sums)]
    return rows, total.json()


def _utc(moment: datetime) -> datetime:
    """``moment`` in UTC (a time without a zone is taken as UTC)."""
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def window(
    since: datetime | None, until: datetime | None, bucket: Bucket | None
) -> tuple[datetime, datetime, str]:
    """The window asked for (default: the last 7 days up to now) and its bucket (default: hours
    for up to two days, else days).

    Raises:
        ApiError: 422 naming the parameter: a window that ends before it starts, or has more
            than :data:`MAX_BUCKETS` buckets.
    """
    end = _utc(until) if until is not None else datetime.now(UTC)
    start = _utc(since) if since is not None else end - DEFAULT_WINDOW
    if start >= end:
        raise invalid("since", "must be before until")
    size = bucket or ("hour" if end - start <= timedelta(days=2) else "day")
    if (end - floor(start, size)) / STEPS[size] > MAX_BUCKETS:
        raise invalid(
            "bucket", f"the window has more than {MAX_BUCKETS} buckets of a {size}: choose a larger bucket"
        )
    return start, end, size


@router.get("/{name}/usage")
async def agent_usage(
    name: str,
    principal: Caller,
    service: Service,
    since: Annotated[datetime | None, Query()] = None,
    until: Annotated[datetime | None, Query()] = None,
    bucket: Annotated[Bucket | None, Query()] = None,
    tenant: Annotated[str | None, Query(min_length=1)] = None,
) -> dict[str, Any]:
    """``name``'s cost and tokens per bucket, from the jobs the caller may see."""
    if name not in service.runner.config.agents:
        raise ApiError(404, "NOT_FOUND", f"no agent {name!r}")
    start, end, size = window(since, until, bucket)
    where = scoped_filter(principal, JobFilter(agent=name, tenant=tenant, limit=MAX_JOBS + 1))
    uses = await service.store.finished_uses(where, start, end)
    rows, totals = buckets(list(uses[:MAX_JOBS]), start, end, size)
    return {
        "agent": name,
        "since": start.isoformat(),
        "until": end.isoformat(),
        "bucket": size,
        "buckets": rows,
        "totals": totals,
        "truncated": len(uses) > MAX_JOBS,
    }
