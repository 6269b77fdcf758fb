"""Thread anchors: verify() against each thread's tip kept outside the chain names a thread
cut short, a record missing in the middle, a whole thread missing and a forged anchor."""

from __future__ import annotations

from airlock.weave import ChainReport, ThreadAnchor, TurnRecord, Weave, anchor_of, anchor_sealed, verify

from .helpers import draft

KEY = b"k" * 32
ROOT = "root"


def tree(key: bytes | None = KEY) -> Weave:
    """Thread ``root`` of 10 records; child ``kid`` (2 records) between root:3 and root:4."""
    w = Weave(key=key)
    for _ in range(3):
        w.record(draft(ROOT))
    w.record(draft("kid", "root:3"))
    w.record(draft("kid"))
    for _ in range(7):
        w.record(draft(ROOT))
    return w


def anchors(w: Weave, key: bytes | None = KEY) -> list[ThreadAnchor]:
    """Every thread's anchor, as written after each append."""
    return [anchor_of(ROOT, w.job_thread(job)[-1], key) for job in w.threads()]


def check(records: list[TurnRecord], w: Weave, key: bytes | None = KEY) -> ChainReport:
    return verify(records, key, anchors=anchors(w, key), root=ROOT)


def problems(report: ChainReport) -> list[str]:
    return [b.problem for b in report.breaks]


def test_an_anchored_intact_weave_verifies() -> None:
    for key in (KEY, None):
        w = tree(key)
        report = check(w.records, w, key)
        assert report.ok and report.anchored and report.anchored_records == 12 == report.records


def test_without_anchors_a_cut_tail_passes_as_before() -> None:
    w = tree()
    report = verify(w.records[:-2], KEY)
    assert report.ok and not report.anchored


def test_deleting_the_last_record_is_named() -> None:
    w = tree()
    report = check(w.records[:-1], w)
    assert not report.ok
    assert problems(report) == [
        "thread root: 1 record missing after #9 (anchor says 10, store holds 9): the thread was truncated"
    ]
    assert report.breaks[0].record_id == "root:10"


def test_deleting_the_last_two_records_is_named() -> None:
    w = tree()
    report = check(w.records[:-2], w)
    assert problems(report) == [
        "thread root: 2 records missing after #8 (anchor says 10, store holds 8): the thread was truncated"
    ]


def test_deleting_a_middle_record_is_named_as_a_gap() -> None:
    w = tree()
    records = [r for r in w.records if r.id != "root:6"]
    found = problems(check(records, w))
    assert "record root:7 follows root:5: root:6 is missing" in found
    assert not any("truncated" in p for p in found), "the tip is still there"


def test_deleting_a_whole_child_thread_is_named() -> None:
    w = tree()
    records = [r for r in w.records if r.job != "kid"]
    found = problems(check(records, w))
    assert found == ["thread kid is missing: its anchor says 2 records, the store holds none"]


def test_deleting_a_child_threads_last_record_mid_sequence_is_named() -> None:
    w = tree()
    records = [r for r in w.records if r.id != "kid:2"]
    assert problems(check(records, w)) == [
        "thread kid: 1 record missing after #1 (anchor says 2, store holds 1): the thread was truncated"
    ]


def test_a_thread_longer_than_its_anchor_is_an_interrupted_anchor_write() -> None:
    w = tree()
    stale = [anchor_of(ROOT, w.job_thread(ROOT)[8], KEY), anchor_of(ROOT, w.job_thread("kid")[-1], KEY)]
    assert verify(w.records, KEY, anchors=stale, root=ROOT).ok


def test_a_tip_other_than_the_anchored_one_is_named() -> None:
    w = tree()
    moved = ThreadAnchor(job=ROOT, n=10, hash="sha256:00")
    report = verify(w.records, None, anchors=[moved], root=ROOT)
    assert problems(report) == [
        "thread root: record root:10 does not match its anchor's hash (the thread was rewritten)"
    ]


def test_a_forged_anchor_is_named_with_the_key() -> None:
    w = tree()
    truncated = w.records[:-2]
    forged = [anchor_of(ROOT, w.job_thread(ROOT)[7], None), anchor_of(ROOT, w.job_thread("kid")[-1], KEY)]
    assert verify(truncated, None, anchors=forged, root=ROOT).ok, (
        "without the key an anchor is taken at its word"
    )
    report = verify(truncated, KEY, anchors=forged, root=ROOT)
    assert problems(report) == ["the anchor of thread root is forged: its seal does not match"]


def test_an_anchor_seal_covers_its_root() -> None:
    w = tree()
    anchor = anchor_of(ROOT, w.records[-1], KEY)
    assert anchor_sealed(ROOT, anchor, KEY)
    assert not anchor_sealed("other", anchor, KEY)
    assert not anchor_sealed(ROOT, anchor.model_copy(update={"n": 11}), KEY)
