"""The hash chain: verify() detects modified, removed, reordered and forged records."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from airlock.weave import ChainReport, TurnRecord, Weave, content_digest, record_hash, verify

from .helpers import draft

KEY = b"controller-secret"


def small_weave(key: bytes | None = KEY) -> Weave:
    """x:1..x:4 in thread x; y:1 depends on x:2; y:2 follows y:1; x:4 knots on y:2."""
    w = Weave(key=key)
    w.record(draft("x"))
    w.record(draft("x"))
    w.record(draft("y", "x:2"))
    w.record(draft("x"))
    w.record(draft("y"))
    w.record(draft("x", "x:3", "y:2"))
    return w


def problems(report: ChainReport) -> list[str]:
    return [b.problem for b in report.breaks]


def test_an_intact_chain_verifies() -> None:
    for key in (KEY, None):
        w = small_weave(key)
        report = verify(w.records, key)
        assert report.ok and report.breaks == [] and report.first_break is None
        assert report.records == 6


@pytest.mark.parametrize(
    "change",
    [
        {"content": {"job": "x", "deps": [], "injected": True}},
        {"agent": "mallory"},
        {"kind": "effect"},
        {"tokens_in": 999},
        {"cost": Decimal("12.5")},
        {"state_hash_post": "sha256:feed"},
        {"time": small_weave().records[3].time + timedelta(seconds=1)},
        {"depends_on": ()},
        {"digest": "sha256:00"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_modified_record_is_detected(change: dict[str, Any]) -> None:
    records = small_weave().records
    records[3] = records[3].model_copy(update=change)
    report = verify(records, KEY)
    assert not report.ok
    assert report.first_break is not None
    assert report.first_break.position == 3 and report.first_break.record_id == "x:3"
    assert "modified" in report.first_break.problem
    assert {b.position for b in report.breaks} == {3}


def test_a_modified_content_breaks_the_digest_and_the_hash() -> None:
    records = small_weave(None).records
    records[0] = records[0].model_copy(update={"content": "other"})
    assert problems(verify(records)) == [
        "record x:1 was modified: its digest does not match its content",
        "record x:1 was modified: its hash does not match its fields",
    ]


def test_a_removed_record_is_detected() -> None:
    records = small_weave().records
    del records[1]  # x:2
    report = verify(records, KEY)
    assert not report.ok
    assert "record x:3 follows x:1: x:2 is missing" in problems(report)
    assert "record y:1 depends on x:2, which is missing" in problems(report)
    assert report.first_break is not None and report.first_break.record_id == "y:1"


def test_several_removed_records_are_named() -> None:
    w = Weave()
    for _ in range(5):
        w.record(draft("x"))
    records = w.records
    found = problems(verify([records[0], records[3], records[4]]))
    assert "record x:4 follows x:1: x:2 to x:3 are missing" in found
    assert problems(verify(records[2:]))[0] == "record x:3 is the first of thread x: x:1 to x:2 are missing"


def test_a_removed_first_record_is_detected() -> None:
    records = small_weave().records
    del records[0]
    assert "record x:2 is the first of thread x: x:1 is missing" in problems(verify(records, KEY))


def test_two_swapped_records_of_a_thread_are_detected() -> None:
    records = small_weave().records
    records[3], records[5] = records[5], records[3]  # x:3 and x:4
    found = problems(verify(records, KEY))
    assert "record x:4 follows x:2: x:3 is missing" in found
    assert "record x:3 comes after x:4: thread x is out of order" in found
    assert "record x:4 depends on x:3, which comes later (position 5)" in found


def test_a_record_moved_before_its_dependency_is_detected() -> None:
    records = small_weave().records
    records[1], records[2] = records[2], records[1]  # y:1 before x:2
    report = verify(records, KEY)
    assert report.first_break is not None
    assert report.first_break.position == 1
    assert report.first_break.problem == "record y:1 depends on x:2, which comes later (position 2)"


def test_swapping_independent_records_of_different_threads_is_the_same_trace() -> None:
    records = small_weave().records
    records[3], records[4] = records[4], records[3]  # x:3 and y:2 are independent
    assert verify(records, KEY).ok


def forge(record: TurnRecord, **change: Any) -> TurnRecord:
    """What someone without the key can do: change a record and recompute its hash."""
    changed = record.model_copy(update=change)
    changed = changed.model_copy(update={"digest": content_digest(changed.content)})
    return changed.model_copy(update={"hash": record_hash(changed)})


def test_a_forged_record_is_detected_only_with_the_key() -> None:
    records = small_weave().records
    records[-1] = forge(records[-1], content={"approved": True})
    assert verify(records).ok  # the tip has no successor whose prev_hash would notice
    report = verify(records, KEY)
    assert not report.ok
    assert report.first_break is not None
    assert report.first_break.record_id == "x:4"
    assert report.first_break.position == 5
    assert "forged" in report.first_break.problem and "x:4" in report.first_break.problem


def test_a_forged_chain_rehashed_to_the_end_is_detected_with_the_key() -> None:
    records = small_weave().records
    records[3] = forge(records[3], tokens_out=1)
    records[5] = forge(records[5], prev_hash=records[3].hash)
    assert verify(records).ok
    report = verify(records, KEY)
    assert [(b.record_id, "forged" in b.problem) for b in report.breaks] == [("x:3", True), ("x:4", True)]


def test_an_unsealed_record_is_a_break_with_a_key_and_seals_are_skipped_without() -> None:
    records = small_weave().records
    records[2] = records[2].model_copy(update={"seal": None})
    assert verify(records).ok
    report = verify(records, KEY)
    assert report.first_break is not None
    assert report.first_break.record_id == "y:1" and "unsealed" in report.first_break.problem
    unkeyed = small_weave(None).records
    assert all(r.seal is None for r in unkeyed)
    assert len(verify(unkeyed, KEY).breaks) == len(unkeyed)


def test_a_wrong_key_fails_every_seal() -> None:
    report = verify(small_weave().records, b"another key")
    assert len(report.breaks) == 6
    assert all("forged" in b.problem for b in report.breaks)


def test_a_clock_not_after_a_dependency_is_detected() -> None:
    records = small_weave(None).records
    records[2] = forge(records[2], clock=records[1].clock)  # y:1's clock equal to x:2's
    found = problems(verify(records))
    assert "record y:1 has clock 2, not greater than the clock 2 of its dependency x:2" in found


def test_a_clock_not_after_the_thread_predecessor_is_detected() -> None:
    w = Weave()
    w.record(draft("x"))
    w.record(draft("x"))
    records = w.records
    records[1] = forge(records[1], clock=1)
    found = problems(verify(records))
    assert (
        "record x:2 has clock 1, not greater than the clock 1 of x:1, the record before it in thread x"
        in found
    )


def test_a_duplicated_record_is_detected() -> None:
    records = small_weave().records
    records.append(records[0])
    found = problems(verify(records, KEY))
    assert "record x:1 appears twice (first at position 0)" in found


def test_a_wrong_id_is_detected() -> None:
    records = small_weave(None).records
    records[0] = forge(records[0], id="x:9")
    found = problems(verify(records))
    assert "record x:9 has the wrong id: its job and n make it x:1" in found


def test_a_weave_refuses_a_broken_chain_and_continues_an_intact_one() -> None:
    records = small_weave().records
    broken = [records[0], *records[2:]]
    with pytest.raises(ValueError, match="position 1"):
        Weave(broken, key=KEY)
    with pytest.raises(ValueError, match="unsealed"):
        Weave(small_weave(None).records, key=KEY)

    reloaded = Weave(records[:4], key=KEY)
    reloaded.record(draft("y"))
    reloaded.record(draft("x", "x:3", "y:2"))
    assert reloaded.records == records
