"""An API key as stored: its record (no secret), its text format and its row."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ._principal import Principal

if TYPE_CHECKING:
    from airlock.state import Row

#: ``ak_<id>_<secret>``: the id is 12 hex digits (public), the secret 43 url-safe characters.
KEY_PREFIX = "ak_"
_KEY_TEXT = re.compile(r"^ak_([0-9a-f]{12})_([A-Za-z0-9_-]{20,128})$")

COLUMNS = "id, name, tenant, roles, created_at, created_by, expires_at, revoked_at, revoked_by, last_used"


@dataclass(frozen=True)
class ApiKeyRecord:
    """What is known of a key, never its secret (the fields of the ``ApiKey`` message)."""

    id: str
    name: str
    tenant: str
    roles: tuple[str, ...]
    created_at: datetime
    created_by: str
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    last_used: datetime | None = None

    def usable_at(self, now: datetime) -> bool:
        """Neither revoked nor expired at ``now``."""
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def principal(self) -> Principal:
        """The principal the key authenticates as (its grants not yet resolved)."""
        return Principal(self.name, self.tenant, self.roles, "key", key_id=self.id)


def new_key() -> tuple[str, str]:
    """A fresh key id (12 hex digits) and secret (256 random bits, url-safe)."""
    return secrets.token_hex(6), secrets.token_urlsafe(32)


def key_text(key_id: str, secret: str) -> str:
    """The whole key a client sends."""
    return f"{KEY_PREFIX}{key_id}_{secret}"


def parse_key(text: str) -> tuple[str, str] | None:
    """The id and secret of a key's text; None when it is not shaped like a key."""
    found = _KEY_TEXT.fullmatch(text)
    return (found.group(1), found.group(2)) if found else None


def digest(salt: bytes, secret: str) -> bytes:
    """SHA-256 over salt + secret. A 256-bit random secret cannot be guessed from its hash,
    so no slow KDF is needed (and a call pays about a microsecond, not tens of ms)."""
    return hashlib.sha256(salt + secret.encode()).digest()


def ts(value: datetime | None) -> float | None:
    """A time as stored (epoch seconds)."""
    return value.timestamp() if value is not None else None


def _dt(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def record_of(row: Row) -> ApiKeyRecord:
    """The record of a row selected with :data:`COLUMNS`."""
    created = _dt(row["created_at"])
    assert created is not None
    return ApiKeyRecord(
        id=row["id"],
        name=row["name"],
        tenant=row["tenant"],
        roles=tuple(json.loads(row["roles"])),
        created_at=created,
        created_by=row["created_by"],
        expires_at=_dt(row["expires_at"]),
        revoked_at=_dt(row["revoked_at"]),
        revoked_by=row["revoked_by"],
        last_used=_dt(row["last_used"]),
    )
