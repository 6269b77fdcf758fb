"""How the controller authenticates callers: its ``auth:`` settings made into an
:class:`~airlock.identity.Authenticator` over the key store, OIDC and the bootstrap token."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from airlock.identity import Authenticator, AuthSettings, KeyStore, RoleBook

#: The API key store in the data directory (unless ``auth.keys_file`` names another).
KEYS_FILE = "keys.db"

#: The bootstrap administrator's token, or an async function answering the current one.
Bootstrap = str | Callable[[], Awaitable[str]]


def authenticator(settings: AuthSettings, keys: KeyStore | None, token: Bootstrap) -> Authenticator:
    """The authenticator of ``settings`` without OIDC: API keys in ``keys`` (None: none) and
    ``token`` as the bootstrap administrator's."""
    roles = RoleBook(settings.roles)
    return Authenticator(keys, None, roles, bootstrap=token, bootstrap_name=settings.bootstrap_name)


async def open_identity(
    stack: contextlib.AsyncExitStack, settings: AuthSettings, data_dir: Path, token: Bootstrap
) -> tuple[KeyStore, Authenticator]:
    """The key store (opened on ``stack``) and the authenticator of ``settings``: API keys,
    OIDC tokens when configured (its HTTP client closed with ``stack``), ``token``."""
    roles = RoleBook(settings.roles)
    keys = await stack.enter_async_context(KeyStore(settings.keys_file or data_dir / KEYS_FILE, roles))
    oidc = None
    if settings.oidc is not None:
        from airlock.identity import OidcVerifier  # loads an HTTP client: only when configured

        oidc = OidcVerifier(settings.oidc, roles)
        stack.push_async_callback(oidc.aclose)
    return keys, Authenticator(keys, oidc, roles, bootstrap=token, bootstrap_name=settings.bootstrap_name)
