"""Shared by every store: key validation, the scope's canonical text and JSON values."""

from __future__ import annotations

import json
import math
from typing import Any

from layer0 import Scope, StateError

_MAX_DEPTH = 256


def scope_text(scope: Scope) -> str:
    """The scope's canonical wire JSON (``{"session":"s1"}``), used as a storage key."""
    wire = scope.model_dump(mode="json")
    return json.dumps(wire, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def check_key(key: str) -> str:
    """Return ``key`` if every store can hold it, else raise ``StateError.serialization``.

    A key is a non-empty string of valid Unicode (encodable as UTF-8) without NUL.
    """
    if not isinstance(key, str):
        raise StateError.serialization(f"a key must be a str, got {type(key).__name__}")
    if not key:
        raise StateError.serialization("a key must not be empty")
    if "\x00" in key:
        raise StateError.serialization(f"a key must not contain NUL: {key!r}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as e:
        raise StateError.serialization(f"a key must be valid Unicode: {key!r}") from e
    return key


def check_prefix(prefix: str) -> str:
    """Validate a list prefix (like a key, but may be empty)."""
    return check_key(prefix) if prefix else prefix


def _check_json(value: Any, depth: int, path: str) -> None:
    if depth > _MAX_DEPTH:
        raise StateError.serialization(f"value nested deeper than {_MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StateError.serialization(f"{path}: {value!r} is not a JSON number")
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, depth + 1, f"{path}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise StateError.serialization(f"{path}: object key {k!r} is not a string")
            _check_json(item, depth + 1, f"{path}.{k}")
        return
    raise StateError.serialization(f"{path}: {type(value).__name__} is not JSON")


def encode_value(value: Any) -> str:
    """The value as compact JSON text (keys sorted). Raises ``StateError.serialization``
    for anything that is not JSON: sets, tuples, bytes, NaN/inf, non-string keys, …"""
    _check_json(value, 0, "value")
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as e:
        raise StateError.serialization(str(e)) from e


def decode_value(text: str) -> Any:
    """Parse stored JSON text. Raises ``StateError.serialization`` if it is corrupt."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise StateError.serialization(f"stored value is not valid JSON: {e}") from e
