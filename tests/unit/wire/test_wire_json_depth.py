"""JSON on the wire is refused past MAX_JSON_DEPTH, before anything recursive sees it."""

from __future__ import annotations

import pytest

from airlock import wire
from airlock._proto.runner.v1 import runner_pb2 as pb
from airlock.wire._primitives import MAX_JSON_DEPTH, json_from_proto


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 2_000, 200_000])
def test_too_deep_is_malformed(depth: int) -> None:
    for opening, closing in (("[", "]"), ('{"a":', "}")):
        with pytest.raises(wire.MalformedMessage, match=f"nested deeper than {MAX_JSON_DEPTH}"):
            json_from_proto(pb.Json(text=opening * depth + "1" + closing * depth))


def test_as_deep_as_allowed_reads() -> None:
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    value = json_from_proto(pb.Json(text=text))
    for _ in range(MAX_JSON_DEPTH - 1):
        assert isinstance(value, list)
        value = value[0]
    assert value == []
