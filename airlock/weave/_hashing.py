"""Canonical JSON and the hashes built on it (SHA-256 digests, HMAC-SHA256 seals)."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from typing import Any

from pydantic import JsonValue

SHA256 = "sha256:"
HMAC_SHA256 = "hmac-sha256:"


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data: Decimal and datetime as text, tuples as lists."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, Enum):
        return _plain(value.value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a JSON number")
        return float(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"Decimal {value} is not finite")
        return format(value, "f")
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"datetime {value.isoformat()} has no time zone")
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"object key {key!r} is not a string")
            out[str(key)] = _plain(item)
        return out
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    raise TypeError(f"{type(value).__name__} is not JSON")


def canonical_json(value: Any) -> bytes:
    """The one byte form of ``value``: keys sorted, no spaces, UTF-8, Decimal as its plain
    string, datetime as ISO-8601 UTC with microseconds. NaN or infinity raise ValueError,
    anything else that is not JSON raises TypeError."""
    text = json.dumps(
        _plain(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def sha256_of(data: bytes) -> str:
    """``"sha256:<hex>"`` of ``data``."""
    return SHA256 + hashlib.sha256(data).hexdigest()


def state_hash(value: JsonValue) -> str:
    """``"sha256:<hex>"`` of a state's canonical JSON."""
    return sha256_of(canonical_json(value))


def content_digest(content: JsonValue) -> str:
    """``"sha256:<hex>"`` of a record's content (its canonical JSON)."""
    return sha256_of(canonical_json(content))


def seal_of(record_hash: str, key: bytes) -> str:
    """``"hmac-sha256:<hex>"``: HMAC-SHA256 of a record's hash under ``key``."""
    return HMAC_SHA256 + hmac.new(key, record_hash.encode("utf-8"), hashlib.sha256).hexdigest()


def seal_matches(seal: str, record_hash: str, key: bytes) -> bool:
    """Whether ``seal`` is the seal of ``record_hash`` under ``key`` (constant time)."""
    return hmac.compare_digest(seal.encode("utf-8"), seal_of(record_hash, key).encode("utf-8"))


#: The state hash of an empty session (no messages, no finished calls): where a thread starts.
EMPTY_STATE = state_hash({"messages": [], "completed": []})


def folded_state(pre: str, digest: str) -> str:
    """The state after a record that reports no state of its own (an input, an effect, a
    yield): the state before it (``pre``) folded with the record's content ``digest``."""
    return state_hash({"after": pre, "record": digest})
