"""How the controller authenticates callers: its ``auth:`` settings made into an
:class:`~airlock.identity.Authenticator` over the key store, OIDC and the bootstrap token."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path

from airlock.errors import ConfigError
from airlock.identity import Authenticator, AuthSettings, KeyStore, RoleBook
from airlock.state import PostgresDatabase

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
    stack: contextlib.AsyncExitStack,
    settings: AuthSettings,
    data_dir: Path,
    token: Bootstrap,
    *,
    db: PostgresDatabase | None = None,
) -> tuple[KeyStore, Authenticator]:
    """The key store (opened on ``stack``: in ``db`` when the controller shares PostgreSQL, else
    a SQLite file) and the authenticator of ``settings``: API keys, OIDC tokens when configured
    (its HTTP client closed with ``stack``), ``token``.

    Raises:
        ConfigError: ``auth.keys_file`` with a PostgreSQL store (replicas share its keys).
    """
    roles = RoleBook(settings.roles)
    if db is not None:
        if settings.keys_file is not None:
            raise ConfigError(
                "auth.keys_file names a SQLite key store, but this controller keeps its records in "
                "PostgreSQL, where its API keys live (shared by every replica): remove auth.keys_file"
            )
        keys = await stack.enter_async_context(KeyStore.on(db, roles))
    else:
        keys = await stack.enter_async_context(KeyStore(settings.keys_file or data_dir / KEYS_FILE, roles))
    oidc = None
    if settings.oidc is not None:
        from airlock.identity import OidcVerifier  # loads an HTTP client: only when configured

        oidc = OidcVerifier(settings.oidc, roles)
        stack.push_async_callback(oidc.aclose)
    return keys, Authenticator(keys, oidc, roles, bootstrap=token, bootstrap_name=settings.bootstrap_name)
