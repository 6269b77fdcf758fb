"""What the routes share: the job service, and a job the caller may use."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from airlock.controller import JobService, Use, authorized_job
from airlock.identity import Principal
from airlock.jobs import Job


def _service(request: Request) -> JobService:
    service: JobService = request.app.state.service
    return service


#: The controller's job service.
Service = Annotated[JobService, Depends(_service)]


async def job_for(service: JobService, principal: Principal, job_id: str, use: Use) -> Job:
    """The job ``job_id`` if ``principal`` may ``use`` it: another tenant's is 404 exactly as a
    missing one; a missing permission 403 naming it (the gRPC API's rules)."""
    return await authorized_job(principal, job_id, use, service.get)
