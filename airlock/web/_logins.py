"""Console logins: an opaque id in an HttpOnly cookie, mapped server-side to the credential
that logged in (checked again on every request, so a revoked key ends its logins) and a CSRF
token, until it expires or logs out."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

#: How long a login lasts after login.
LOGIN_TTL_S = 8 * 3600.0
#: Logins kept at once (the oldest is dropped beyond it: login cannot exhaust memory).
MAX_LOGINS = 10_000


@dataclass(frozen=True)
class Login:
    """One login: its credential (never sent back), its CSRF token and when it ends."""

    credential: str
    csrf: str
    expires: float


class LoginBook:
    """The live logins of one server (in memory: a restart logs everyone out)."""

    def __init__(self, ttl_s: float = LOGIN_TTL_S, limit: int = MAX_LOGINS) -> None:
        self._ttl_s = ttl_s
        self._limit = limit
        self._logins: dict[str, Login] = {}

    def open(self, credential: str) -> tuple[str, Login]:
        """A new login for ``credential``: its id and itself."""
        now = time.monotonic()
        self._logins = {k: s for k, s in self._logins.items() if s.expires > now}
        while len(self._logins) >= self._limit:
            del self._logins[next(iter(self._logins))]
        login_id = secrets.token_urlsafe(32)
        login = Login(credential, secrets.token_urlsafe(32), now + self._ttl_s)
        self._logins[login_id] = login
        return login_id, login

    def find(self, login_id: str) -> Login | None:
        """The live login ``login_id`` (None: unknown or expired)."""
        login = self._logins.get(login_id)
        if login is None or login.expires <= time.monotonic():
            self._logins.pop(login_id, None)
            return None
        return login

    def close(self, login_id: str) -> None:
        """End ``login_id`` (nothing if unknown)."""
        self._logins.pop(login_id, None)
