"""How the controller authenticates callers: its ``auth:`` settings made into an
:class:`~airlock.identity.Authenticator` over the key store, OIDC and the bootstrap token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from airlock.identity import Authenticator, AuthSettings, KeyStore, OidcVerifier, RoleBook

#: The API key store in the data directory.
KEYS_FILE = "keys.db"


def authenticator(
    settings: AuthSettings, keys: KeyStore | None, token: str | Callable[[], Awaitable[str]]
) -> Authenticator:
    """The authenticator of ``settings``: API keys in ``keys``, OIDC tokens when configured,
    and ``token`` (or a function answering the current one) as the bootstrap administrator's."""
    roles = RoleBook(settings.roles)
    oidc = OidcVerifier(settings.oidc, roles) if settings.oidc is not None else None
    return Authenticator(keys, oidc, roles, bootstrap=token, bootstrap_name=settings.bootstrap_name)
