"""Page tokens of the controller's list RPCs (AIP-158): opaque to clients, tied to the request.

A token carries where the previous page ended and a fingerprint of the request it answered
(every field but the page token and the page size), so that a token reused with other filters,
altered, or not made by this controller is refused: INVALID_ARGUMENT with a violation on
``page_token``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TypeVar

from google.protobuf.message import Message

from airlock import wire
from airlock.jobs import decode_page_token, encode_page_token

__all__ = ["make_token", "page_of", "page_size", "read_token"]

_T = TypeVar("_T")


def _fingerprint(request: Message) -> str:
    scope = type(request)()
    scope.CopyFrom(request)
    for name in ("page_token", "page_size"):
        if name in scope.DESCRIPTOR.fields_by_name:
            scope.ClearField(name)
    return hashlib.sha256(scope.SerializeToString(deterministic=True)).hexdigest()[:16]


def make_token(request: Message, position: str) -> str:
    """The token of the page after ``position`` (the last item's key) for ``request``."""
    return encode_page_token(_fingerprint(request), position)


def read_token(request: Message, token: str) -> str | None:
    """Where the page ``token`` asks for begins (after this key); None: the first page.

    Raises:
        MalformedMessage: not a token of this request (path ``page_token``).
    """
    try:
        return decode_page_token(token, _fingerprint(request))
    except ValueError as e:
        raise wire.MalformedMessage(str(e), path="page_token") from None


def page_size(requested: int, default: int = 100, cap: int = 1000) -> int:
    """A request's page size (0: ``default``; at most ``cap``)."""
    return min(requested or default, cap)


def page_of(
    request: Message, items: Sequence[_T], key: Callable[[_T], str], size: int
) -> tuple[list[_T], str]:
    """One page of ``items`` (sorted by ``key``) for ``request`` and the next page's token.

    Raises:
        MalformedMessage: the request's page token is not one of its own.
    """
    after = read_token(request, getattr(request, "page_token", ""))
    rest = [item for item in items if after is None or key(item) > after]
    page = rest[:size]
    more = len(rest) > size
    return page, make_token(request, key(page[-1])) if more and page else ""
