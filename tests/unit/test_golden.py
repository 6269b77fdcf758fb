"""Every golden vector from the Rust layer0 crate round-trips byte for byte."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

import layer0

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (GOLDEN / name).read_text().splitlines() if line.strip()]


def _raw_json(line: str) -> str:
    """The exact bytes after ``"json":`` up to the line's closing brace."""
    start = line.index('"json":') + len('"json":')
    return line[start : line.rstrip().rindex("}")]


@cache
def adapter(type_name: str) -> TypeAdapter[Any]:
    return TypeAdapter(getattr(layer0, type_name))


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def roundtrip(type_name: str, data: Any) -> str:
    ta = adapter(type_name)
    return dumps(ta.dump_python(ta.validate_python(data), mode="json", by_alias=True))


VECTOR_LINES = [line for line in (GOLDEN / "vectors.jsonl").read_text().splitlines() if line.strip()]
DECODE_CASES = _lines("decode-cases.jsonl")


def test_counts() -> None:
    assert len(VECTOR_LINES) == 204
    assert len(DECODE_CASES) == 38


@pytest.mark.parametrize(
    "line", VECTOR_LINES, ids=[f"{json.loads(x)['type_name']}:{json.loads(x)['case']}" for x in VECTOR_LINES]
)
def test_vector_roundtrips_byte_for_byte(line: str) -> None:
    record = json.loads(line)
    assert roundtrip(record["type_name"], record["json"]) == _raw_json(line)


@pytest.mark.parametrize("case", DECODE_CASES, ids=[f"{c['type_name']}:{c['case']}" for c in DECODE_CASES])
def test_decode_case_behaves_as_rust(case: dict[str, Any]) -> None:
    if case["ok"]:
        assert roundtrip(case["type_name"], case["input"]) == dumps(case["reserialized"])
    else:
        with pytest.raises(ValidationError):
            adapter(case["type_name"]).validate_python(case["input"])


def test_every_type_name_is_exported() -> None:
    names = {json.loads(x)["type_name"] for x in VECTOR_LINES} | {c["type_name"] for c in DECODE_CASES}
    assert len(names) >= 37
    missing = [n for n in names if not hasattr(layer0, n)]
    assert missing == []
