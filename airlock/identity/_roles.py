"""Roles: named sets of grants. Four are built in; ``auth.roles`` defines more or narrows them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field

from ._principal import Grant, Permission, Principal

#: The built-in roles (issue-level contract: submitter, viewer, approver, admin).
BUILTIN_ROLES: Mapping[str, tuple[Permission, ...]] = {
    "submitter": (Permission.SUBMIT, Permission.OWN_JOBS),
    "viewer": (Permission.READ,),
    "approver": (Permission.APPROVE,),
    "admin": (Permission.ADMIN,),
}


class RoleDefinition(BaseModel):
    """A role of ``auth.roles``: the built-in roles it combines, limited to ``agents`` (globs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Built-in roles whose permissions it grants.
    grants: tuple[str, ...] = Field(min_length=1)
    #: The agents its submit and approve permissions reach (globs; default every agent).
    agents: tuple[str, ...] = ("*",)


class RoleBook:
    """Resolves role names to grants: the built-ins, and ``definitions`` over them."""

    def __init__(self, definitions: Mapping[str, RoleDefinition] | None = None) -> None:
        self._roles: dict[str, tuple[Grant, ...]] = {
            name: tuple(Grant(p) for p in permissions) for name, permissions in BUILTIN_ROLES.items()
        }
        for name, role in (definitions or {}).items():
            self._roles[name] = tuple(
                Grant(p, role.agents) for base in role.grants for p in BUILTIN_ROLES[base]
            )

    @property
    def names(self) -> frozenset[str]:
        """Every role name known."""
        return frozenset(self._roles)

    def unknown(self, roles: Iterable[str]) -> list[str]:
        """The names among ``roles`` that no role has."""
        return sorted(set(roles) - self._roles.keys())

    def grants(self, roles: Iterable[str]) -> tuple[Grant, ...]:
        """The grants of ``roles`` (unknown names grant nothing)."""
        return tuple(g for r in roles for g in self._roles.get(r, ()))

    def resolve(self, principal: Principal) -> Principal:
        """``principal`` with its roles' grants."""
        return replace(principal, grants=self.grants(principal.roles))


def allows(principal: Principal, permission: Permission, agent: str | None = None) -> bool:
    """Whether ``principal`` holds ``permission`` (for ``agent`` when given). Admin holds all."""
    for grant in principal.grants:
        if grant.permission is Permission.ADMIN:
            return True
        if grant.permission is permission and (
            agent is None or any(fnmatchcase(agent, glob) for glob in grant.agents)
        ):
            return True
    return False
