"""Authorization on the jobs API: what a principal may do with a job, read through its
tenant. A job of another tenant is :class:`JobNotFound`, word for word what an id that never
existed gets; a missing permission is :class:`PermissionDenied` naming it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from airlock.errors import AirlockError
from airlock.identity import Permission, Principal, allows
from airlock.jobs import Job, JobFilter

from ._service_settings import JobNotFound

#: What a call does with a job: read it, steer it (cancel, pause, resume, step), decide its
#: gated calls.
Use = Literal["see", "steer", "approve"]


class PermissionDenied(AirlockError):
    """The caller's roles lack ``permission`` (``PERMISSION_DENIED`` on the wire)."""

    def __init__(self, permission: Permission | str, message: str) -> None:
        super().__init__(message)
        self.permission = str(permission)


def not_found(job_id: str) -> JobNotFound:
    """The one refusal for an unknown id and another tenant's job alike."""
    return JobNotFound(f"no job {job_id!r}")


def in_tenant(principal: Principal, job: Job) -> bool:
    """Whether ``job`` is ``principal``'s tenant's (an administrator's tenant is every one)."""
    return principal.is_admin or job.tenant == principal.tenant


def check(principal: Principal, job: Job, use: Use) -> None:
    """``principal`` may ``use`` ``job`` (already known to be of its tenant).

    Raises:
        PermissionDenied: naming the permission that would allow it.
    """
    own = job.owner == principal.name and allows(principal, Permission.OWN_JOBS)
    if use == "approve":
        if not allows(principal, Permission.APPROVE, job.agent):
            raise denied(principal, Permission.APPROVE, f"decide the gated calls of agent {job.agent!r}")
        return
    if use == "steer":
        if not (own or principal.is_admin):
            raise denied(principal, Permission.OWN_JOBS, f"steer or cancel job {job.id} (not its submitter)")
        return
    if own or allows(principal, Permission.READ) or allows(principal, Permission.APPROVE, job.agent):
        return
    raise denied(principal, Permission.READ, f"read job {job.id}")


def denied(principal: Principal, permission: Permission, what: str) -> PermissionDenied:
    """The refusal of ``what`` to ``principal``, which lacks ``permission``."""
    return PermissionDenied(
        permission,
        f"{principal.name} (tenant {principal.tenant}) may not {what}: needs permission {permission}",
    )


async def job_for(
    principal: Principal, job_id: str, use: Use, get: Callable[[str, str | None], Awaitable[Job]]
) -> Job:
    """The job ``job_id`` if ``principal`` may ``use`` it. ``get(id, tenant)`` looks it up in
    the principal's tenant (any tenant for an administrator): another tenant's job is not found
    by the very query that finds no job at all, so neither answer nor timing tells them apart.

    Raises:
        JobNotFound: unknown, or another tenant's.
        PermissionDenied: of its tenant, but the roles do not allow ``use``.
    """
    try:
        job = await get(job_id, None if principal.is_admin else principal.tenant)
    except JobNotFound:
        raise not_found(job_id) from None
    if not in_tenant(principal, job):  # a getter that ignored the tenant
        raise not_found(job_id)
    check(principal, job, use)
    return job


def scoped_filter(principal: Principal, where: JobFilter) -> JobFilter:
    """``where`` limited to what ``principal`` may list: an administrator any tenant (or the
    one asked), a reader its tenant, a submitter its own jobs.

    Raises:
        PermissionDenied: another tenant asked for, or no permission to list jobs.
    """
    if principal.is_admin:
        return where
    if where.tenant is not None and where.tenant != principal.tenant:
        raise denied(principal, Permission.ADMIN, f"list the jobs of tenant {where.tenant!r}")
    if allows(principal, Permission.READ):
        return where.model_copy(update={"tenant": principal.tenant})
    if allows(principal, Permission.OWN_JOBS):
        return where.model_copy(update={"tenant": principal.tenant, "owner": principal.name})
    raise denied(principal, Permission.READ, "list jobs")


def require(principal: Principal, permission: Permission, what: str, agent: str | None = None) -> None:
    """``principal`` holds ``permission`` (for ``agent``).

    Raises:
        PermissionDenied: it does not.
    """
    if not allows(principal, permission, agent):
        raise denied(principal, permission, what)
