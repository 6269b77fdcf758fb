"""Approvals: the pending ones, and approve or reject (recorded as the authenticated principal)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from airlock.controller import PermissionDenied, check_use
from airlock.identity import Permission, Principal, allows
from airlock.jobs import Job, JobFilter, JobState

from ._audit import audited
from ._auth import Caller
from ._deps import Service, job_for
from ._jobs import job_json
from ._models import ApproveBody, RejectBody

router = APIRouter(prefix="/api/v1", tags=["approvals"])


#: Pending jobs listed at most.
MAX_PENDING = 1000


@router.get("/approvals")
async def pending_approvals(principal: Caller, service: Service) -> dict[str, Any]:
    """Jobs waiting on a person that the caller may see (its tenant's: those it may read, or
    decide on, as the job routes allow), with whether it may decide."""
    where = JobFilter(states=frozenset({JobState.AWAITING_APPROVAL}), limit=MAX_PENDING)
    if not principal.is_admin:
        where = where.model_copy(update={"tenant": principal.tenant})
    jobs = [j for j in await service.find(where) if _sees(principal, j)]
    return {
        "pending": [
            {**job_json(j), "may_decide": allows(principal, Permission.APPROVE, j.agent)} for j in jobs
        ]
    }


def _sees(principal: Principal, job: Job) -> bool:
    try:
        check_use(principal, job, "see")
    except PermissionDenied:
        return False
    return True


@router.post("/jobs/{job_id}/approve")
async def approve_job(
    request: Request,
    job_id: str,
    principal: Caller,
    service: Service,
    body: Annotated[ApproveBody | None, Body()] = None,
) -> dict[str, Any]:
    """Approve the calls the job waits for (409: it waits for none)."""
    async with audited(request, principal, "ApproveJob") as note:
        note.target = job_id
        note.tenant = (await job_for(service, principal, job_id, "approve")).tenant
        return job_json(await service.approve(job_id, principal.name, body.comment if body else ""))


@router.post("/jobs/{job_id}/reject")
async def reject_job(
    request: Request, job_id: str, body: RejectBody, principal: Caller, service: Service
) -> dict[str, Any]:
    """Reject the calls the job waits for; ``reason`` is what the model reads."""
    async with audited(request, principal, "RejectJob") as note:
        note.target = job_id
        note.tenant = (await job_for(service, principal, job_id, "approve")).tenant
        return job_json(await service.reject(job_id, principal.name, body.reason))
