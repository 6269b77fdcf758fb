"""``/api/v1/jobs``: list (filters, pages), show, submit, cancel."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request

from airlock.controller import require_permission, scoped_filter
from airlock.errors import ConfigError
from airlock.identity import Permission
from airlock.jobs import Job, JobFilter, JobState
from airlock.policy import FileRefused, FilesOverCap
from layer0 import TurnInput

from ._audit import audited
from ._auth import Caller
from ._deps import Service, job_for
from ._errors import ApiError, invalid
from ._models import CancelBody, ForkBody, SubmitBody
from ._pages import make_token, read_token

router = APIRouter(prefix="/api/v1/jobs", tags=["jobs"])


def job_json(job: Job) -> dict[str, Any]:
    """A job as the API shows it."""
    return job.model_dump(mode="json")


@router.get("")
async def list_jobs(
    principal: Caller,
    service: Service,
    state: Annotated[list[JobState] | None, Query()] = None,
    agent: Annotated[str | None, Query(min_length=1)] = None,
    tenant: Annotated[str | None, Query(min_length=1)] = None,
    page_size: Annotated[int, Query(ge=1, le=1000)] = 50,
    page_token: Annotated[str | None, Query()] = None,
) -> dict[str, Any]:
    """Jobs the caller may see, most recent first (an administrator: any tenant)."""
    scope = {"state": sorted(state or []), "agent": agent, "tenant": tenant}
    after = read_token(scope, page_token)
    where = JobFilter(states=frozenset(state or ()), agent=agent, tenant=tenant, limit=page_size)
    where = scoped_filter(principal, where.model_copy(update={"before_id": after}))
    jobs = await service.find(where)
    token = make_token(scope, jobs[-1].id) if len(jobs) == page_size else ""
    return {"jobs": [job_json(j) for j in jobs], "next_page_token": token}


@router.get("/{job_id}")
async def show_job(job_id: str, principal: Caller, service: Service) -> dict[str, Any]:
    """One job."""
    return job_json(await job_for(service, principal, job_id, "see"))


@router.post("", status_code=201)
async def submit_job(
    request: Request, body: SubmitBody, principal: Caller, service: Service
) -> dict[str, Any]:
    """Submit a job to an agent as the caller (in the caller's tenant)."""
    async with audited(request, principal, "SubmitJob") as note:
        note.detail = f"agent {body.agent}"
        require_permission(principal, Permission.SUBMIT, f"submit to agent {body.agent!r}", body.agent)
        try:
            job = await service.submit(
                body.agent,
                TurnInput.new(body.message, session=body.session),
                queue=body.queue,
                max_duration_ms=body.max_duration_ms,
                files=_files(body),
                tenant=principal.tenant,
                owner=principal.name,
            )
        except FilesOverCap as e:
            raise ApiError(413, "FILES_OVER_CAP", f"files: {e}") from None
        except FileRefused as e:
            raise invalid("files", str(e)) from None
        except ConfigError as e:
            if "unknown agent" in str(e):
                raise ApiError(404, "NOT_FOUND", str(e)) from None
            raise ApiError(422, "INVALID_ARGUMENT", str(e)) from None
        note.target = job.id
        return job_json(job)


def _files(body: SubmitBody) -> list[tuple[str, bytes]]:
    files = []
    for at, f in enumerate(body.files):
        try:
            files.append((f.path, base64.b64decode(f.content_base64, validate=True)))
        except (binascii.Error, ValueError):
            raise invalid(f"files.{at}.content_base64", "not base64") from None
    return files


@router.post("/{job_id}/cancel")
async def cancel_job(
    request: Request,
    job_id: str,
    principal: Caller,
    service: Service,
    body: Annotated[CancelBody | None, Body()] = None,
) -> dict[str, Any]:
    """Cancel a job the caller submitted (an administrator: any)."""
    async with audited(request, principal, "CancelJob") as note:
        note.target = job_id
        job = await job_for(service, principal, job_id, "steer")
        note.tenant = job.tenant
        return job_json(await service.cancel(job_id, body.reason if body else ""))


@router.post("/{job_id}/fork")
async def fork_job(
    request: Request,
    job_id: str,
    principal: Caller,
    service: Service,
    body: Annotated[ForkBody | None, Body()] = None,
) -> dict[str, Any]:
    """Start a new job from a job's conversation and workspace at one of its checkpoints."""
    body = body or ForkBody()
    async with audited(request, principal, "ForkJob") as note:
        note.target = job_id
        original = await job_for(service, principal, job_id, "see")
        note.tenant = original.tenant
        agent = body.agent or original.agent
        require_permission(principal, Permission.SUBMIT, f"fork a job to agent {agent!r}", agent)
        try:
            job = await service.fork(
                job_id,
                at=body.at or None,
                message=body.message or None,
                agent=agent,
                tenant=original.tenant,
                owner=principal.name,
            )
        except ConfigError as e:
            raise ApiError(404, "NOT_FOUND", str(e)) from None
        note.detail = f"fork of {job_id} to agent {agent}"
        return job_json(job)
