"""Who calls: a principal (a name in a tenant, holding roles) and what it may do (permissions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

#: The tenant of the bootstrap administrator and of every job made before tenants existed.
DEFAULT_TENANT = "default"

#: How a principal proved who it is.
Method = Literal["bootstrap", "key", "oidc"]


class Permission(StrEnum):
    """One thing a role allows. ``PERMISSION_DENIED`` names the missing one."""

    #: Submit jobs to the agents the role lists (globs).
    SUBMIT = "jobs.submit"
    #: See, watch, steer and cancel the principal's own jobs.
    OWN_JOBS = "jobs.own"
    #: Read every job of the tenant: records, events, logs, artifacts, weave.
    READ = "jobs.read"
    #: Decide the gated calls of jobs of the agents the role lists (globs).
    APPROVE = "jobs.approve"
    #: Everything of every tenant: keys, quotas, the audit log, the controller's state.
    ADMIN = "controller.admin"


@dataclass(frozen=True)
class Grant:
    """A permission, limited to agents matching one of ``agents`` (globs) when it names agents."""

    permission: Permission
    agents: tuple[str, ...] = ("*",)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. ``grants`` are its roles resolved (see :class:`RoleBook`)."""

    name: str
    tenant: str
    roles: tuple[str, ...]
    method: Method
    grants: tuple[Grant, ...] = field(default=(), repr=False)
    #: The API key's id (``key`` principals), for ``last_used`` and the audit log.
    key_id: str | None = None

    @property
    def is_admin(self) -> bool:
        """Holds :attr:`Permission.ADMIN` (every tenant, every agent)."""
        return any(g.permission is Permission.ADMIN for g in self.grants)
