"""Canonical JSON and the hashes over it."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from pydantic import JsonValue

from airlock.weave import RecordType, canonical_json, content_digest, state_hash


def test_keys_are_sorted_without_spaces_and_text_is_utf8() -> None:
    value = {"b": 1, "a": [1, "é", None, True], "c": {"z": 1.5, "y": "x"}}
    assert canonical_json(value) == '{"a":[1,"é",null,true],"b":1,"c":{"y":"x","z":1.5}}'.encode()


def test_key_order_does_not_change_the_bytes() -> None:
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1})
    assert state_hash({"a": 1, "b": 2}) == state_hash({"b": 2, "a": 1})


def test_decimal_is_its_plain_string() -> None:
    assert canonical_json(Decimal("1.50")) == b'"1.50"'
    assert canonical_json(Decimal("1E+2")) == b'"100"'
    assert canonical_json(Decimal("0.00000012")) == b'"0.00000012"'


def test_datetime_is_iso_utc_with_microseconds() -> None:
    paris = timezone(timedelta(hours=1))
    assert canonical_json(datetime(2025, 1, 1, 13, 0, tzinfo=paris)) == b'"2025-01-01T12:00:00.000000+00:00"'
    assert (
        canonical_json(datetime(2025, 1, 1, 12, 0, 0, 5, tzinfo=UTC)) == b'"2025-01-01T12:00:00.000005+00:00"'
    )


def test_tuples_and_enums_are_plain_json() -> None:
    assert canonical_json((1, RecordType.SPEECH)) == b'[1,"speech"]'


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), -float("inf"), Decimal("NaN"), Decimal("Infinity")]
)
def test_nan_and_infinity_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        canonical_json({"x": [bad]})


def test_a_naive_datetime_is_refused() -> None:
    with pytest.raises(ValueError, match="time zone"):
        canonical_json(datetime(2025, 1, 1))


@pytest.mark.parametrize("bad", [{1, 2}, b"x", {1: "a"}, object()])
def test_non_json_is_refused(bad: object) -> None:
    with pytest.raises(TypeError):
        canonical_json(bad)


def test_state_hash_is_sha256_of_the_canonical_json() -> None:
    value: JsonValue = {"files": {"a.py": "print(1)"}, "n": 3}
    expected = "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()
    assert state_hash(value) == expected
    assert content_digest(value) == expected
    assert state_hash({"n": 4}) != state_hash({"n": 3})
