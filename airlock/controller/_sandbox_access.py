"""Authorization on long-lived sandboxes, read through their tenant as jobs are: another
tenant's sandbox is :class:`SandboxNotFound`, word for word an unknown id's; seeing one takes
``jobs.read`` (or being its creator, with ``jobs.own``); steering it (pause, resume, remove,
running jobs in it) takes being its creator, or an administrator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from airlock.identity import Permission, Principal, allows
from airlock.jobs import SandboxInfo

from ._access import denied
from ._sandboxes import SandboxNotFound

__all__ = ["SandboxUse", "sandbox_for"]

#: What a call does with a sandbox: read it, or steer it (and run jobs in it).
SandboxUse = Literal["see", "steer"]


async def sandbox_for(
    principal: Principal,
    sandbox_id: str,
    use: SandboxUse,
    get: Callable[[str, str | None], Awaitable[SandboxInfo]],
) -> SandboxInfo:
    """The sandbox if ``principal`` may ``use`` it.

    Raises:
        SandboxNotFound: unknown, or another tenant's.
        PermissionDenied: of its tenant, but the roles do not allow ``use``.
    """
    info = await get(sandbox_id, None if principal.is_admin else principal.tenant)
    if not principal.is_admin and info.tenant != principal.tenant:
        raise SandboxNotFound(f"no sandbox {sandbox_id}")
    own = info.owner == principal.name and allows(principal, Permission.OWN_JOBS)
    if own or principal.is_admin:
        return info
    if use == "see" and allows(principal, Permission.READ):
        return info
    permission = Permission.READ if use == "see" else Permission.OWN_JOBS
    raise denied(
        principal, permission, f"{'see' if use == 'see' else 'use'} sandbox {sandbox_id} (not its creator)"
    )
