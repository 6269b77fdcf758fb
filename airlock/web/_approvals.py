"""Approvals: the pending ones, and approve or reject (recorded as the authenticated principal)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from airlock.controller import scoped_filter
from airlock.identity import Permission, allows
from airlock.jobs import JobFilter, JobState

from ._audit import audited
from ._auth import Caller
from ._deps import Service, job_for
from ._jobs import job_json
from ._models import ApproveBody, RejectBody

router = APIRouter(prefix="/api/v1", tags=["approvals"])


@router.get("/approvals")
async def pending_approvals(principal: Caller, service: Service) -> dict[str, Any]:
    """Jobs of the caller's scope waiting on a person, with whether the caller may decide."""
    where = scoped_filter(principal, JobFilter(states=frozenset({JobState.AWAITING_APPROVAL}), limit=1000))
    jobs = await service.find(where)
    return {
        "pending": [
            {**job_json(j), "may_decide": allows(principal, Permission.APPROVE, j.agent)} for j in jobs
        ]
    }


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
