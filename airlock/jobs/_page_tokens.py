"""Page tokens of the jobs API's lists (gRPC and HTTP): opaque to clients, tied to the request
they answered by a fingerprint each server computes from its own request form."""

from __future__ import annotations

import base64
import binascii
import json

_VERSION = 1
#: What a refused token's error says (each server raises its own error with it).
INVALID_PAGE_TOKEN = "not a page token of this request (pass a previous response's next_page_token unchanged)"


def encode_page_token(fingerprint: str, position: str) -> str:
    """The token of the page after ``position`` (the last item's key) of the request whose
    fingerprint is ``fingerprint``."""
    raw = json.dumps([_VERSION, fingerprint, position], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_page_token(token: str, fingerprint: str) -> str | None:
    """Where the page ``token`` asks for begins (after this key); None for no token.

    Raises:
        ValueError: not a token of the request whose fingerprint is ``fingerprint``.
    """
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        version, found, position = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise ValueError(INVALID_PAGE_TOKEN) from None
    if version != _VERSION or found != fingerprint or not isinstance(position, str):
        raise ValueError(INVALID_PAGE_TOKEN)
    return position
