"""``/api/v1/jobs/{id}/egress``: the job's egress ledger, every decision of its egress proxy
(allowed or denied) with destination, rule and the bytes of the connection once it closed;
for a denied one, the allow rule that would permit it, as text to copy (never applied)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter

from airlock.jobs import SandboxActivity
from airlock.proxy import EgressEvent

from ._auth import Caller
from ._deps import Service, job_for

router = APIRouter(prefix="/api/v1/jobs", tags=["egress"])


def allow_rule(host: str, port: int) -> str:
    """The agent configuration lines that would allow ``host:port`` (YAML)."""
    return f"network:\n  allow:\n    - {{destination: {json.dumps(host)}, port: {port}}}\n"


def ledger(events: list[EgressEvent]) -> list[dict[str, Any]]:
    """The decisions, in order, each with its connection's bytes (from its ``closed`` event)."""
    rows: list[dict[str, Any]] = []
    open_rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    for e in events:
        key = (e.client, e.host, e.port)
        if e.phase == "closed":
            row = open_rows.pop(key, None)
            if row is not None:
                row.update(bytes_up=e.bytes_up, bytes_down=e.bytes_down, duration_ms=e.duration_ms)
            continue
        row = e.model_dump(mode="json", exclude={"type", "phase", "client"})
        row["suggested_rule"] = None if e.allowed else allow_rule(e.host, e.port)
        rows.append(row)
        if e.allowed:
            open_rows[key] = row
    return rows


@router.get("/{job_id}/egress")
async def job_egress(job_id: str, principal: Caller, service: Service) -> dict[str, Any]:
    """The job's egress decisions so far (``suggested_rule``: null when allowed)."""
    await job_for(service, principal, job_id, "see")
    events = [
        e.data.event
        for e in await service.store.events(job_id, kind="sandbox")
        if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, EgressEvent)
    ]
    return {"decisions": ledger(events)}
