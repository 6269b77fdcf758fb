"""The weave: a job tree's records as a Mazurkiewicz trace (records of different threads with
no causal link commute)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence

from pydantic import BaseModel, ConfigDict

from ._chain import record_hash, verify
from ._hashing import content_digest, seal_of
from ._record import RecordDraft, TurnRecord


class ConeMetrics(BaseModel):
    """How much of the weave an agent's causal cone holds."""

    model_config = ConfigDict(frozen=True)

    cone_size: int
    total: int
    compression_ratio: float


class Weave:
    """The records of one job tree, in insertion order, with their causal order.

    A record causally follows its ``depends_on`` and the previous record of its thread (its
    job): program order. Two records are independent when they are in different threads and
    neither follows the other transitively; a trace is every order that keeps all dependent
    pairs in place. Records given at construction are verified (``verify``) first; a broken
    chain raises ValueError naming its first break.
    """

    def __init__(self, records: Iterable[TurnRecord] = (), *, key: bytes | None = None) -> None:
        self._key = key
        self._records: list[TurnRecord] = []
        self._index: dict[str, int] = {}
        self._jobs: dict[str, list[int]] = {}
        self._agents: dict[str, list[int]] = {}
        self._preds: list[frozenset[str]] = []
        # For each record: job -> the highest n of that job in its causal past (itself included).
        # A record's past within one thread is a prefix of it, so this is its whole past.
        self._vclock: list[dict[str, int]] = []
        self._tip: int | None = None
        self._agent_tips: dict[str, int] = {}
        given = list(records)
        report = verify(given, key)
        if report.first_break is not None:
            bad = report.first_break
            raise ValueError(
                f"the records do not form a valid weave: at position {bad.position}: {bad.problem}"
            )
        for record in given:
            self._add(record)

    # --- building ---------------------------------------------------------------------------

    def _add(self, record: TurnRecord) -> None:
        i = len(self._records)
        thread = self._jobs.setdefault(record.job, [])
        preds = set(record.depends_on)
        if thread:
            preds.add(self._records[thread[-1]].id)
        vclock: dict[str, int] = {}
        for pred in preds:
            for job, n in self._vclock[self._index[pred]].items():
                if vclock.get(job, 0) < n:
                    vclock[job] = n
        vclock[record.job] = record.n
        self._records.append(record)
        self._index[record.id] = i
        thread.append(i)
        self._agents.setdefault(record.agent, []).append(i)
        self._preds.append(frozenset(preds))
        self._vclock.append(vclock)
        if self._tip is None or self._order(i) > self._order(self._tip):
            self._tip = i
        best = self._agent_tips.get(record.agent)
        if best is None or self._order(i) > self._order(best):
            self._agent_tips[record.agent] = i

    def record(self, draft: RecordDraft) -> TurnRecord:
        """Append ``draft`` to its job's thread and return the record made of it.

        Its dependencies are exactly the draft's; when the draft names none and its thread
        already has records, the thread's previous record. Each must be in the weave
        (ValueError otherwise). Its clock exceeds its dependencies' and its predecessor's.
        """
        deps = draft.depends_on
        if len(set(deps)) != len(deps):
            raise ValueError(f"depends_on lists a record twice: {list(deps)}")
        unknown = [d for d in deps if d not in self._index]
        if unknown:
            raise ValueError(f"depends_on names records not in the weave: {unknown}")
        thread = self._jobs.get(draft.job, [])
        prev = self._records[thread[-1]] if thread else None
        if not deps and prev is not None:
            deps = (prev.id,)
        clocks = [self._records[self._index[d]].clock for d in deps]
        if prev is not None:
            clocks.append(prev.clock)
        n = len(thread) + 1
        fields = {name: getattr(draft, name) for name in RecordDraft.model_fields}
        fields.update(
            depends_on=deps,
            id=f"{draft.job}:{n}",
            n=n,
            clock=max(clocks, default=0) + 1,
            digest=content_digest(draft.content),
            prev_hash=prev.hash if prev is not None else None,
            hash="",
        )
        unhashed = TurnRecord.model_validate(fields)
        hashed = record_hash(unhashed)
        seal = seal_of(hashed, self._key) if self._key is not None else None
        record = unhashed.model_copy(update={"hash": hashed, "seal": seal})
        self._add(record)
        return record

    # --- access ------------------------------------------------------------------------------

    @property
    def records(self) -> list[TurnRecord]:
        """Every record, in insertion (storage) order."""
        return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[TurnRecord]:
        return iter(list(self._records))

    def __contains__(self, record_id: object) -> bool:
        return record_id in self._index

    def get(self, record_id: str) -> TurnRecord | None:
        """The record with this id, or None."""
        i = self._index.get(record_id)
        return None if i is None else self._records[i]

    def threads(self) -> list[str]:
        """The job ids, in the order of their first record."""
        return list(self._jobs)

    def thread(self, agent: str) -> list[TurnRecord]:
        """Every record of ``agent`` (all its jobs), in insertion order."""
        return [self._records[i] for i in self._agents.get(agent, [])]

    def job_thread(self, job: str) -> list[TurnRecord]:
        """The records of one job, in ``n`` order."""
        return [self._records[i] for i in self._jobs.get(job, [])]

    def tip(self, agent: str | None = None) -> TurnRecord | None:
        """The latest record of ``agent`` (or of the weave) by (clock, insertion), or None."""
        i = self._tip if agent is None else self._agent_tips.get(agent)
        return None if i is None else self._records[i]

    def knot(self, agents: Iterable[str]) -> tuple[str, ...]:
        """The ids of these agents' tips: the ``depends_on`` of a record that joins them."""
        tips: list[str] = []
        for agent in agents:
            tip = self.tip(agent)
            if tip is None:
                raise ValueError(f"agent {agent!r} has no record in the weave")
            tips.append(tip.id)
        return tuple(dict.fromkeys(tips))

    # --- causal order ------------------------------------------------------------------------

    def _at(self, record_id: str) -> int:
        i = self._index.get(record_id)
        if i is None:
            raise ValueError(f"no record {record_id!r} in the weave")
        return i

    def _order(self, i: int) -> tuple[int, int]:
        return (self._records[i].clock, i)

    def _precedes(self, i: int, j: int) -> bool:
        """Whether record ``i`` is in the causal past of record ``j`` (``i != j``)."""
        r = self._records[i]
        return i != j and self._vclock[j].get(r.job, 0) >= r.n

    def _dependent(self, i: int, j: int) -> bool:
        return self._records[i].job == self._records[j].job or self._precedes(i, j) or self._precedes(j, i)

    def braid(self) -> dict[str, frozenset[str]]:
        """The causal DAG: each record's id -> its direct predecessors (its ``depends_on`` and
        the previous record of its thread)."""
        return {r.id: self._preds[i] for i, r in enumerate(self._records)}

    def dependencies(self, record_id: str) -> frozenset[str]:
        """Every record ``record_id`` causally follows, transitively (itself excluded)."""
        i = self._at(record_id)
        found = {self._records[k].id for job, n in self._vclock[i].items() for k in self._jobs[job][:n]}
        found.discard(record_id)
        return frozenset(found)

    def independent(self, a_id: str, b_id: str) -> bool:
        """Whether two records commute: different threads, neither depending on the other."""
        return not self._dependent(self._at(a_id), self._at(b_id))

    def linearize(self, subset: Iterable[str] | None = None) -> list[TurnRecord]:
        """A topological order of every record (or of ``subset``, in the order the weave
        induces on it): Kahn's algorithm taking the ready record of least (clock, insertion).

        Every record's clock exceeds its predecessors', so the least remaining record is
        always ready: that order is the (clock, insertion) order.
        """
        if subset is None:
            chosen: Iterable[int] = range(len(self._records))
        else:
            chosen = {self._at(record_id) for record_id in subset}
        return [self._records[i] for i in sorted(chosen, key=self._order)]

    def equivalent(self, order_a: Sequence[str], order_b: Sequence[str]) -> bool:
        """Whether two orders of the same records are the same trace: every dependent pair (one
        follows the other, or both in one thread) keeps its relative order. Orders of different
        records are not; a record listed twice or not in the weave raises ValueError."""
        a = [self._at(record_id) for record_id in order_a]
        b = [self._at(record_id) for record_id in order_b]
        for order, name in ((a, "order_a"), (b, "order_b")):
            if len(set(order)) != len(order):
                raise ValueError(f"{name} lists a record twice")
        if set(a) != set(b):
            return False
        a_ok, b_ok = self._is_linear_extension(a), self._is_linear_extension(b)
        if a_ok or b_ok:
            return a_ok and b_ok
        where = {i: p for p, i in enumerate(b)}
        return not any(
            where[x] > where[y] and self._dependent(x, y) for p, x in enumerate(a) for y in a[p + 1 :]
        )

    def _is_linear_extension(self, order: list[int]) -> bool:
        """Whether ``order`` puts every record after its causal past (within ``order``)."""
        present: dict[str, list[int]] = {}
        for i in order:
            present.setdefault(self._records[i].job, []).append(self._records[i].n)
        for ns in present.values():
            ns.sort()
        seen = dict.fromkeys(present, 0)
        for i in order:
            r = self._records[i]
            if present[r.job][seen[r.job]] != r.n:
                return False
            for job, n in self._vclock[i].items():
                if job != r.job and job in present and seen[job] < bisect_right(present[job], n):
                    return False
            seen[r.job] += 1
        return True

    # --- cones -------------------------------------------------------------------------------

    def cone_of(self, record_id: str) -> list[TurnRecord]:
        """The record and its causal past, linearized."""
        return self.linearize({record_id, *self.dependencies(record_id)})

    def cone(self, agent: str) -> list[TurnRecord]:
        """The causal cone of ``agent``: its tip and the tip's causal past, linearized (empty
        when the agent has no record)."""
        tip = self.tip(agent)
        return [] if tip is None else self.cone_of(tip.id)

    def cone_metrics(self, agent: str) -> ConeMetrics:
        """The agent's cone size against the weave's: ``1 - cone/total`` is what it leaves out."""
        size, total = len(self.cone(agent)), len(self._records)
        ratio = 1 - size / total if total else 0.0
        return ConeMetrics(cone_size=size, total=total, compression_ratio=ratio)
