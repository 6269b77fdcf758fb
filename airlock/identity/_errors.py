"""The errors of identity: a refused credential, an unknown key, a bad key request."""

from __future__ import annotations

from airlock.errors import AirlockError


class Unauthenticated(AirlockError):
    """A credential is missing, malformed, wrong, revoked or expired (``UNAUTHENTICATED``).

    ``reason`` is safe to send back: for API keys one text whatever the cause, so it never
    tells whether a key exists; for OIDC tokens it says what is wrong with the token.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class KeyNotFound(AirlockError):
    """No API key has this id (``NOT_FOUND``; only administrators manage keys)."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"no API key has id {key_id!r}")
        self.key_id = key_id


class InvalidKeyRequest(AirlockError):
    """A key cannot be created as asked: its name, tenant, roles or expiry (``INVALID_ARGUMENT``)."""


class KeyStoreError(AirlockError):
    """The key store cannot be read or written (the message names the database file)."""
