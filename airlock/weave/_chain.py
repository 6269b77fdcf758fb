"""The hash chain: each record's hash, and :func:`verify` of a stored sequence of records."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from ._anchor import ThreadAnchor, anchor_sealed
from ._hashing import canonical_json, content_digest, seal_matches, sha256_of
from ._record import TurnRecord


def record_hash(record: TurnRecord) -> str:
    """``"sha256:<hex>"`` over the canonical JSON of every field but ``hash`` and ``seal``."""
    return sha256_of(canonical_json(record.model_dump(mode="python", exclude={"hash", "seal"})))


class ChainBreak(BaseModel):
    """One problem found in a stored sequence: where (0-based), which record, and what."""

    model_config = ConfigDict(frozen=True)

    position: int
    record_id: str
    problem: str


class ChainReport(BaseModel):
    """What :func:`verify` found: ``ok`` when nothing is broken. ``anchored``: the records
    were checked against their threads' anchors (``anchored_records``: how many the anchors
    say the weave holds)."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    records: int
    breaks: list[ChainBreak]
    anchored: bool = False
    anchored_records: int = 0

    @property
    def first_break(self) -> ChainBreak | None:
        """The earliest problem, or None."""
        return self.breaks[0] if self.breaks else None


def _content_problems(record: TurnRecord, key: bytes | None) -> list[str]:
    """A record's problems on its own: digest, hash, id and (with a key) seal."""
    rid = record.id
    problems = []
    try:
        if content_digest(record.content) != record.digest:
            problems.append(f"record {rid} was modified: its digest does not match its content")
        if record_hash(record) != record.hash:
            problems.append(f"record {rid} was modified: its hash does not match its fields")
    except (TypeError, ValueError) as e:
        problems.append(f"record {rid} cannot be hashed: {e}")
    if rid != f"{record.job}:{record.n}":
        expected = f"{record.job}:{record.n}"
        problems.append(f"record {rid} has the wrong id: its job and n make it {expected}")
    if key is not None:
        if record.seal is None:
            problems.append(f"record {rid} is unsealed: it has no seal but the chain is verified with a key")
        elif not seal_matches(record.seal, record.hash, key):
            problems.append(
                f"record {rid} is forged: its seal does not match its hash under the key "
                "(the record was changed and its hash recomputed without the key)"
            )
    return problems


def _missing(job: str, first: int, last: int) -> str:
    """``job:first is`` / ``job:first to job:last are`` (the records a thread lacks)."""
    return f"{job}:{first} is" if first == last else f"{job}:{first} to {job}:{last} are"


def _first_problems(record: TurnRecord) -> list[str]:
    """What is wrong with the first stored record of its thread."""
    problems = []
    if record.n != 1:
        missing = _missing(record.job, 1, record.n - 1)
        problems.append(f"record {record.id} is the first of thread {record.job}: {missing} missing")
    if record.prev_hash is not None:
        problems.append(
            f"record {record.id} is the first of thread {record.job} "
            "but its prev_hash names a previous record"
        )
    return problems


def _thread_problems(record: TurnRecord, prev: TurnRecord) -> list[str]:
    """What is wrong with ``record`` as the successor of ``prev`` in its thread."""
    rid, problems = record.id, []
    if record.n > prev.n + 1:
        problems.append(
            f"record {rid} follows {prev.id}: {_missing(record.job, prev.n + 1, record.n - 1)} missing"
        )
    elif record.n <= prev.n:
        problems.append(f"record {rid} comes after {prev.id}: thread {record.job} is out of order")
    if record.prev_hash != prev.hash:
        problems.append(
            f"record {rid}'s prev_hash does not match the hash of {prev.id}, "
            f"the record before it in thread {record.job}"
        )
    if record.clock <= prev.clock:
        problems.append(
            f"record {rid} has clock {record.clock}, not greater than the clock {prev.clock} "
            f"of {prev.id}, the record before it in thread {record.job}"
        )
    return problems


def _dependency_problems(record: TurnRecord, where: dict[str, int], clocks: dict[str, int]) -> list[str]:
    """What is wrong with ``record``'s dependencies (``clocks``: the records before it)."""
    rid, problems = record.id, []
    for dep in record.depends_on:
        if dep == rid:
            problems.append(f"record {rid} depends on itself")
        elif dep not in where:
            problems.append(f"record {rid} depends on {dep}, which is missing")
        elif dep not in clocks:
            problems.append(f"record {rid} depends on {dep}, which comes later (position {where[dep]})")
        elif record.clock <= clocks[dep]:
            problems.append(
                f"record {rid} has clock {record.clock}, not greater than the clock {clocks[dep]} "
                f"of its dependency {dep}"
            )
    return problems


def _records_missing(count: int) -> str:
    return f"{count} record{'s' if count != 1 else ''} missing"


def _anchor_problems(anchor: ThreadAnchor, held: list[TurnRecord]) -> list[str]:
    """What is wrong with the records ``held`` of the thread ``anchor`` describes."""
    job, n = anchor.job, anchor.n
    if not held:
        return [f"thread {job} is missing: its anchor says {n} records, the store holds none"]
    last = max(r.n for r in held)
    if last < n:
        return [
            f"thread {job}: {_records_missing(n - last)} after #{last} "
            f"(anchor says {n}, store holds {len(held)}): the thread was truncated"
        ]
    tip = next((r for r in held if r.n == n), None)
    if tip is not None and tip.hash != anchor.hash:
        return [f"thread {job}: record {tip.id} does not match its anchor's hash (the thread was rewritten)"]
    return []


def cross_check(
    records: Sequence[TurnRecord], anchors: Sequence[ThreadAnchor], root: str, key: bytes | None = None
) -> list[ChainBreak]:
    """The problems of ``records`` against their threads' ``anchors``: a thread cut short
    (its newest records deleted), a thread missing entirely, a tip that is not the anchored
    one, and (with ``key``) an anchor whose seal does not match. A thread with more records
    than its anchor is not a problem (its anchor is written just after each record)."""
    threads: dict[str, list[TurnRecord]] = {}
    for record in records:
        threads.setdefault(record.job, []).append(record)
    breaks: list[ChainBreak] = []
    for anchor in sorted(anchors, key=lambda a: a.job):
        problems = []
        if key is not None and not anchor_sealed(root, anchor, key):
            problems.append(f"the anchor of thread {anchor.job} is forged: its seal does not match")
        problems += _anchor_problems(anchor, threads.get(anchor.job, []))
        breaks.extend(
            ChainBreak(position=len(records), record_id=anchor.record_id, problem=p) for p in problems
        )
    return breaks


def verify(
    records: Sequence[TurnRecord],
    key: bytes | None = None,
    *,
    anchors: Sequence[ThreadAnchor] | None = None,
    root: str = "",
) -> ChainReport:
    """Re-check ``records`` in their storage order.

    Each record's digest and hash must match its fields, its ``n`` must follow its thread's
    previous ``n``, its ``prev_hash`` must be that record's hash, every dependency must come
    earlier, its clock must exceed its dependencies' and its thread predecessor's, and with a
    ``key`` its seal must match. Without a key seals are not checked. A thread's last records
    cut off the end of the sequence leave no trace in the chain: with ``anchors`` (each
    thread's tip kept elsewhere, for the weave of ``root``) they are named too
    (:func:`cross_check`).
    """
    breaks: list[ChainBreak] = []
    seen: dict[str, int] = {}  # id -> position of its first occurrence
    last: dict[str, TurnRecord] = {}  # job -> its thread's latest stored record
    clocks: dict[str, int] = {}  # id -> clock
    where = {r.id: i for i, r in reversed(list(enumerate(records)))}  # id -> first position

    for position, record in enumerate(records):
        rid = record.id
        problems = _content_problems(record, key)
        if rid in seen:
            problems.append(f"record {rid} appears twice (first at position {seen[rid]})")
        prev = last.get(record.job)
        problems += _first_problems(record) if prev is None else _thread_problems(record, prev)
        problems += _dependency_problems(record, where, clocks)
        breaks.extend(ChainBreak(position=position, record_id=rid, problem=p) for p in problems)
        seen.setdefault(rid, position)
        clocks.setdefault(rid, record.clock)
        last[record.job] = record

    if anchors is not None:
        breaks += cross_check(records, anchors, root, key)
    anchored = sum(a.n for a in anchors or ())
    return ChainReport(
        ok=not breaks,
        records=len(records),
        breaks=breaks,
        anchored=anchors is not None,
        anchored_records=anchored,
    )
