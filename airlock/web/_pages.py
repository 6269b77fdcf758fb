"""Page tokens of the HTTP API's lists: opaque to clients, tied to the filters they answered
(a token reused with other filters, altered, or not made here is a 422 on ``page_token``)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json

from ._errors import invalid

_VERSION = 1
_INVALID = "not a page token of this request (pass a previous response's next_page_token unchanged)"


def _fingerprint(scope: object) -> str:
    text = json.dumps(scope, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_token(scope: object, position: str) -> str:
    """The token of the page after ``position`` for a request of ``scope`` (its filters)."""
    raw = json.dumps([_VERSION, _fingerprint(scope), position], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_token(scope: object, token: str | None) -> str | None:
    """Where the page ``token`` begins (after this key); None: the first page.

    Raises:
        ApiError: 422, not a token of a request of ``scope``.
    """
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        version, fingerprint, position = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise invalid("page_token", _INVALID) from None
    if version != _VERSION or fingerprint != _fingerprint(scope) or not isinstance(position, str):
        raise invalid("page_token", _INVALID)
    return position
