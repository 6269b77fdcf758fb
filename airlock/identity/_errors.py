"""Why a caller is not let in."""

from __future__ import annotations

from airlock.errors import AirlockError


class Unauthenticated(AirlockError):
    """A missing, malformed, wrong, expired or revoked credential (``UNAUTHENTICATED``).

    ``reason`` is safe to send to the caller: for an API key it never says whether the key
    exists.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
