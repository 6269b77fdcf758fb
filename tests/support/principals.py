"""A stand-in authenticator for servers under test: each bearer token names a principal.

It speaks what :class:`airlock.identity.Authenticator` speaks (``authenticate(header)`` →
a resolved Principal, :class:`Unauthenticated` otherwise) without keys or tokens to mint; the
suites that test keys and OIDC use the real one."""

from __future__ import annotations

from airlock.identity import DEFAULT_TENANT, Principal, RoleBook, Unauthenticated


def principal(
    name: str, *roles: str, tenant: str = DEFAULT_TENANT, book: RoleBook | None = None
) -> Principal:
    """``name`` of ``tenant`` holding ``roles``, resolved by ``book`` (default: the built-ins)."""
    return (book or RoleBook()).resolve(Principal(name, tenant, roles, "key"))


def token_of(name: str, tenant: str = DEFAULT_TENANT) -> str:
    """The bearer token :class:`Principals` maps to ``name`` of ``tenant``."""
    return f"tok-{tenant}-{name}"


class Principals:
    """Tokens ``tok-<tenant>-<name>`` → the principals given."""

    def __init__(self, *principals: Principal) -> None:
        self._by_token = {token_of(p.name, p.tenant): p for p in principals}

    async def authenticate(self, authorization: str) -> Principal:
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential:
            raise Unauthenticated("missing credentials")
        found = self._by_token.get(credential.strip())
        if found is None:
            raise Unauthenticated("invalid credentials")
        return found
