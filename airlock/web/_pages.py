"""Page tokens of the HTTP API's lists: opaque to clients, tied to the filters they answered
(a token reused with other filters, altered, or not made here is a 422 on ``page_token``)."""

from __future__ import annotations

import hashlib
import json

from airlock.jobs import decode_page_token, encode_page_token

from ._errors import invalid


def _fingerprint(scope: object) -> str:
    text = json.dumps(scope, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_token(scope: object, position: str) -> str:
    """The token of the page after ``position`` for a request of ``scope`` (its filters)."""
    return encode_page_token(_fingerprint(scope), position)


def read_token(scope: object, token: str | None) -> str | None:
    """Where the page ``token`` begins (after this key); None: the first page.

    Raises:
        ApiError: 422, not a token of a request of ``scope``.
    """
    try:
        return decode_page_token(token or "", _fingerprint(scope))
    except ValueError as e:
        raise invalid("page_token", str(e)) from None
