"""``/api/v1/jobs/{id}/weave``: the audited record graph of a job's tree (the job, its
children, theirs): one thread per job with its records in order, each record's dependencies
(those in another thread marked, a record joining several threads a knot), and the tree's
verification (hash chain and, with the audit key, the seals) with each break named."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter

from airlock.weave import ChainReport, RecordType, TurnRecord, WeaveError

from ._auth import Caller
from ._deps import Service, job_for

router = APIRouter(prefix="/api/v1/jobs", tags=["weave"])

#: How much of a record's content the graph shows (the record itself is in the store).
SUMMARY_CHARS = 240


def summary(content: object) -> str:
    """The start of ``content`` as text (shown as text: it may hold what an agent wrote)."""
    text = content if isinstance(content, str) else json.dumps(content, default=str, ensure_ascii=False)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def record_json(record: TurnRecord, threads: dict[str, str]) -> dict[str, Any]:
    """One record as a node of the graph (``threads``: each record id's job)."""
    cross = [d for d in record.depends_on if threads.get(d, record.job) != record.job]
    return {
        "id": record.id,
        "n": record.n,
        "clock": record.clock,
        "type": record.type.value,
        "kind": record.kind,
        "depends_on": list(record.depends_on),
        "cross_thread": cross,
        "yield": record.type is RecordType.YIELD,
        "knot": len({threads.get(d, "") for d in record.depends_on}) > 1,
        "state_hash_pre": record.state_hash_pre[:12],
        "state_hash_post": record.state_hash_post[:12],
        "tokens_in": record.tokens_in,
        "tokens_out": record.tokens_out,
        "cost_usd": str(record.cost),
        "time": record.time.isoformat(),
        "hash": record.hash[:12],
        "sealed": record.seal is not None,
        "summary": summary(record.content),
    }


def graph(
    root: str, records: list[TurnRecord], report: ChainReport, problems: list[str] | None = None
) -> dict[str, Any]:
    """The tree's threads (the root's first, then in order of their first record);
    ``problems``: what kept the records from loading (then there are none to show)."""
    threads = {r.id: r.job for r in records}
    by_job: dict[str, list[TurnRecord]] = {}
    for r in sorted(records, key=lambda r: (r.clock, r.n)):
        by_job.setdefault(r.job, []).append(r)
    order = sorted(by_job, key=lambda job: (job != root, by_job[job][0].clock))
    return {
        "root": root,
        "verification": {
            "ok": report.ok and not problems,
            "records": report.records,
            "breaks": [b.model_dump(mode="json") for b in report.breaks],
            "problems": problems or [],
        },
        "threads": [
            {
                "job": job,
                "agent": by_job[job][0].agent,
                "records": [record_json(r, threads) for r in sorted(by_job[job], key=lambda r: r.n)],
            }
            for job in order
        ],
    }


@router.get("/{job_id}/weave")
async def job_weave(job_id: str, principal: Caller, service: Service) -> dict[str, Any]:
    """The record graph of ``job_id``'s tree and its verification."""
    job = await job_for(service, principal, job_id, "see")
    try:
        root, records = await service.weave(job.id)
        _, report = await service.verify(job.id)
    except WeaveError as e:  # a record the store cannot read back, or one missing: named
        return graph(job.id, [], ChainReport(ok=False, records=0, breaks=[]), [str(e)])
    return graph(root, records, report)
