"""Authenticator: the ``authorization`` metadata of a call → the principal that made it."""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from airlock.wire import bearer_credentials

from ._errors import Unauthenticated
from ._key_record import KEY_PREFIX
from ._keys import KeyStore
from ._principal import DEFAULT_TENANT, Principal
from ._roles import RoleBook

if TYPE_CHECKING:  # its module loads an HTTP client: only a controller with OIDC needs it
    from ._oidc import OidcVerifier

#: A JWS in compact form: three base64url parts.
_JWT = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
MISSING = "missing credentials: send 'authorization: Bearer <key or token>' metadata"
INVALID = "invalid credentials"


class Authenticator:
    """Answers who presented an ``authorization`` value: the bootstrap administrator (the
    controller's token, compared in constant time), an API key's principal (``ak_…``) or an
    OIDC token's (a JWT, when OIDC is configured). Principals come back with their grants.

    ``bootstrap`` is the token, or an async function answering the current one (a rotated file).
    """

    def __init__(
        self,
        keys: KeyStore | None,
        oidc: OidcVerifier | None,
        roles: RoleBook,
        bootstrap: str | Callable[[], Awaitable[str]],
        bootstrap_name: str = "admin",
    ) -> None:
        self._keys = keys
        self._oidc = oidc
        self._roles = roles
        self._bootstrap = bootstrap
        self._admin = roles.resolve(Principal(bootstrap_name, DEFAULT_TENANT, ("admin",), "bootstrap"))

    async def authenticate(self, authorization: str) -> Principal:
        """The principal of ``authorization`` (the metadata value, e.g. ``Bearer ak_…``).

        Raises:
            Unauthenticated: no credentials, another scheme, or credentials no path accepts;
                an API key's refusal never tells whether the key exists.
        """
        presented = authorization.strip()
        credentials = bearer_credentials(presented)
        if credentials is None:
            raise Unauthenticated(MISSING if presented.lower() in ("", "bearer") else INVALID)
        if await self._is_bootstrap(credentials):
            return self._admin
        if credentials.startswith(KEY_PREFIX) and self._keys is not None:
            record = await self._keys.verify(credentials)
            return self._roles.resolve(record.principal())
        if self._oidc is not None and _JWT.fullmatch(credentials):
            return await self._oidc.verify(credentials)
        raise Unauthenticated(INVALID)

    async def _is_bootstrap(self, credentials: str) -> bool:
        expected = self._bootstrap if isinstance(self._bootstrap, str) else await self._bootstrap()
        return bool(expected) and hmac.compare_digest(credentials.encode(), expected.encode())
