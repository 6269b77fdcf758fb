"""Console logins, sealed in their cookie: the credential that logged in (checked again on every
request, so a revoked key ends its logins), the login's CSRF token and its end, encrypted and
authenticated with AES-GCM under a key the server holds. Any server with the same key reads the
cookie, so a login survives a restart and is good on every replica; without one given, a key of
this process's own (a restart logs everyone out). A logout ends the login on the server that
served it (and deletes the cookie); ending a credential's logins everywhere is revoking it."""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

#: How long a login lasts after login.
LOGIN_TTL_S = 8 * 3600.0
#: Logged-out logins remembered at once (the oldest is dropped beyond it).
MAX_CLOSED = 10_000
#: The largest cookie a browser is sure to keep.
MAX_COOKIE = 4000
#: Bound into every sealed login: a cookie sealed for something else never opens as one.
_PURPOSE = b"airlock console login v1"
_NONCE = 12


class LoginTooLarge(ValueError):
    """The credential does not fit in a login cookie."""


@dataclass(frozen=True)
class Login:
    """One login: its id, its credential (never sent back in clear), CSRF token and end."""

    id: str
    credential: str
    csrf: str
    expires: float


class LoginBook:
    """Seals and opens logins with a 32-byte ``key`` (None: a random one of this process)."""

    def __init__(self, key: bytes | None = None, ttl_s: float = LOGIN_TTL_S, limit: int = MAX_CLOSED) -> None:
        self._aead = AESGCM(key if key is not None else AESGCM.generate_key(bit_length=256))
        self._ttl_s = ttl_s
        self._limit = limit
        self._closed: OrderedDict[str, float] = OrderedDict()

    def open(self, credential: str) -> tuple[str, Login]:
        """A new login for ``credential``: its cookie value and itself.

        Raises:
            LoginTooLarge: the sealed login would exceed :data:`MAX_COOKIE` bytes.
        """
        login = Login(
            secrets.token_urlsafe(16), credential, secrets.token_urlsafe(32), time.time() + self._ttl_s
        )
        plain = json.dumps({"i": login.id, "c": credential, "x": login.csrf, "e": login.expires}).encode()
        nonce = os.urandom(_NONCE)
        sealed = base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, plain, _PURPOSE)).decode()
        if len(sealed) > MAX_COOKIE:
            raise LoginTooLarge(
                f"a credential of {len(credential)} characters does not fit in a login cookie"
            )
        return sealed, login

    def find(self, cookie: str) -> Login | None:
        """The live login sealed in ``cookie`` (None: not one of this key's, expired or closed)."""
        try:
            raw = base64.urlsafe_b64decode(cookie.encode())
            fields = json.loads(self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _PURPOSE))
            login = Login(str(fields["i"]), str(fields["c"]), str(fields["x"]), float(fields["e"]))
        except (InvalidTag, ValueError, binascii.Error, KeyError, TypeError):
            return None
        if login.expires <= time.time() or login.id in self._closed:
            return None
        return login

    def close(self, cookie: str) -> None:
        """End the login in ``cookie`` here (nothing if it is not a live one)."""
        login = self.find(cookie)
        if login is None:
            return
        now = time.time()
        for login_id, expires in list(self._closed.items()):
            if expires <= now:
                del self._closed[login_id]
        self._closed[login.id] = login.expires
        while len(self._closed) > self._limit:
            self._closed.popitem(last=False)
