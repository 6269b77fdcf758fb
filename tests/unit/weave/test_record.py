"""RecordDraft and TurnRecord: validation, JSON form, timeless comparison."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from pydantic import ValidationError

from airlock.weave import RecordDraft, RecordType, TurnRecord, Weave, record_hash

from .helpers import T0, draft


def test_a_draft_is_frozen_and_refuses_unknown_fields() -> None:
    d = draft("j")
    with pytest.raises(ValidationError):
        d.kind = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="extra"):
        RecordDraft.model_validate({**d.model_dump(), "extra_field": 1})


def test_time_must_be_aware_and_is_kept_in_utc() -> None:
    with pytest.raises(ValidationError, match="time zone"):
        RecordDraft(job="j", agent="a", type=RecordType.SPEECH, kind="k", time=datetime(2025, 1, 1))
    plus2 = timezone(timedelta(hours=2))
    d = RecordDraft(
        job="j", agent="a", type=RecordType.SPEECH, kind="k", time=datetime(2025, 1, 1, 14, tzinfo=plus2)
    )
    assert d.time.utcoffset() == timedelta(0)
    assert d.time.hour == 12


def test_cost_is_a_decimal_string_in_json_and_floats_are_refused() -> None:
    d = RecordDraft(job="j", agent="a", type=RecordType.SPEECH, kind="k", time=T0, cost=Decimal("0.0125"))
    assert d.model_dump(mode="json")["cost"] == "0.0125"
    assert RecordDraft.model_validate_json(d.model_dump_json()).cost == Decimal("0.0125")
    with pytest.raises(ValidationError):
        RecordDraft.model_validate({**d.model_dump(), "cost": 0.1})


def test_nan_content_is_refused() -> None:
    with pytest.raises(ValidationError):
        draft("j", content={"x": float("nan")})


def test_a_record_round_trips_through_json_with_the_same_hash() -> None:
    w = Weave(key=b"k")
    first = w.record(draft("j", content={"text": "héllo", "n": 1.5, "list": [1, None]}))
    second = w.record(
        RecordDraft(
            job="j",
            agent="agent-j",
            type=RecordType.SPEECH,
            kind="model_response",
            cost=Decimal("0.0030"),
            tokens_in=10,
            tokens_out=3,
            state_hash_pre="sha256:aa",
            state_hash_post="sha256:bb",
            content="text",
            time=T0,
        )
    )
    for record in (first, second):
        back = TurnRecord.model_validate(record.model_dump(mode="json"))
        assert back == record
        assert record_hash(back) == record.hash
    assert second.cost == Decimal("0.0030")


def test_timeless_drops_time_and_the_chain_fields_only() -> None:
    def run(offset: float) -> list[TurnRecord]:
        w = Weave()
        w.record(draft("j", seconds=offset))
        w.record(draft("j", seconds=offset + 1))
        return w.records

    a, b = run(0), run(100)
    assert [r.timeless() for r in a] == [r.timeless() for r in b]
    assert [r.hash for r in a] != [r.hash for r in b]
    keys = set(a[1].timeless())
    assert keys.isdisjoint({"time", "hash", "prev_hash", "seal"})
    assert {"id", "n", "clock", "digest", "content", "depends_on", "cost"} <= keys
