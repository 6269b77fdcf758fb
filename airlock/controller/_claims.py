"""Claims: which controller replica runs which job, fenced, under a lease it renews.

A replica registers in ``replicas`` and renews its heartbeat; a replica whose heartbeat is
older than the lease is dead, and any survivor adopts its jobs. A replica claims a queued job
by setting ``claimed_by`` and incrementing the job's ``fence`` (its fencing token), in one
transaction that skips rows another replica is claiming (``FOR UPDATE SKIP LOCKED``). Each
write of a job this replica holds first checks that the job is still claimed by it with the
same token (:meth:`Claims.check`): a replica that was paused or partitioned past its lease,
whose jobs were adopted since, is refused with :class:`LeaseLost` and lets go.

The operations run on SQLite (one replica; its write transaction holds the whole file) and
PostgreSQL alike.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from airlock.errors import AirlockError
from airlock.jobs import ACTIVE_STATES, JobState
from airlock.state import Op, Row, Statement, execute, fetch_all, fetch_one, fetch_one_shared, lock

from ._store_rows import HELD, HELD_ARGS

#: Queued jobs per queue key the claim looks at (the oldest of each key).
CLAIM_WINDOW = 8

_ACTIVE = tuple(sorted(s.value for s in ACTIVE_STATES))
_MARKS = ", ".join("?" * len(_ACTIVE))

_CANDIDATES = """
SELECT id, queue, session, tenant FROM (
    SELECT id, queue, session, tenant, n, ROW_NUMBER() OVER (PARTITION BY queue ORDER BY n) AS r
    FROM jobs WHERE state = 'queued' AND origin = 'submit' AND claimed_by IS NULL
) AS heads WHERE r <= ? ORDER BY queue, n
"""

#: Another job of the session holds (or is about to hold) a worker somewhere.
_SESSION_BUSY = (
    f"SELECT 1 FROM jobs WHERE tenant = ? AND session = ? AND id != ? AND (state IN ({_MARKS}) "
    "OR (state = 'queued' AND claimed_by IS NOT NULL)) LIMIT 1"
)

#: A job and its descendants.
_TREE = (
    "WITH RECURSIVE tree(id) AS (SELECT ? UNION SELECT j.id FROM jobs j JOIN tree t ON j.parent_id = t.id) "
    "SELECT id FROM tree"
)


class LeaseLost(AirlockError):
    """This replica wrote a job it no longer holds: another replica adopted it (this one was
    paused or cut off past its lease) or its claim was revoked. Nothing was written; the job's
    run here lets go of it."""

    def __init__(self, job_id: str, why: str) -> None:
        super().__init__(f"job {job_id}: this controller no longer holds it ({why}); nothing was written")
        self.job_id = job_id


def new_replica_id() -> str:
    """This process's replica id: host, pid and a random suffix (a restarted process is new)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Claim:
    """A job this replica claimed, and the fencing token of the claim."""

    job_id: str
    fence: int
    queue: str


@dataclass(frozen=True)
class Adopted:
    """A job taken over from a dead replica (or found held by none), now fenced for this one."""

    job_id: str
    fence: int
    state: JobState


def fair_order(rows: Sequence[Row], after: str | None) -> list[Row]:
    """Candidates in turn order: queue keys round-robin, starting after ``after`` (the key
    this replica served last), oldest first within a key."""
    keys = sorted({row["queue"] for row in rows})
    if after is not None:
        keys = [k for k in keys if k > after] + [k for k in keys if k <= after]
    rank = {key: i for i, key in enumerate(keys)}
    return sorted(rows, key=lambda row: rank[row["queue"]])  # stable: oldest first within a key


class Claims:
    """This replica's id and the jobs it holds, with each claim's fencing token.

    Args:
        replica: this replica's id (default: a new one).
    """

    def __init__(self, replica: str | None = None) -> None:
        self.replica = replica or new_replica_id()
        self._fences: dict[str, int] = {}
        #: Jobs this replica lost while its runs of them may still be winding down: their
        #: writes stay refused until the run lets go (:meth:`release`) or the job is claimed again.
        self._lost: set[str] = set()
        self._last_key: str | None = None

    def holds(self, job_id: str) -> bool:
        """Whether this replica holds ``job_id`` (as far as it knows)."""
        return job_id in self._fences

    def held(self) -> dict[str, int]:
        """The jobs this replica holds, with their tokens."""
        return dict(self._fences)

    def hold(self, job_id: str, fence: int) -> None:
        """Record a committed claim."""
        self._fences[job_id] = fence
        self._lost.discard(job_id)

    def drop(self, job_ids: Iterable[str]) -> None:
        """Forget claims (released)."""
        for job_id in job_ids:
            self._fences.pop(job_id, None)

    def lose(self, job_ids: Iterable[str]) -> None:
        """Forget claims another replica took (or that were revoked): this replica's writes of
        those jobs are refused until its runs of them let go."""
        for job_id in job_ids:
            self._fences.pop(job_id, None)
            self._lost.add(job_id)

    def lost_here(self, job_id: str) -> bool:
        """Whether this replica lost ``job_id`` and its run of it has not let go yet."""
        return job_id in self._lost

    # -- operations ----------------------------------------------------------------------------

    def check(self, job_id: str) -> Op[None]:
        """Refuse (:class:`LeaseLost`) a write of a job this replica holds, if it no longer does
        (or lost, and its run has not let go yet)."""
        if job_id in self._lost:
            raise LeaseLost(job_id, "another replica took it over")
        fence = self._fences.get(job_id)
        if fence is None:
            return
        # Kept unchanged to the end of the write's transaction: an adoption waits for it.
        row = yield from fetch_one_shared("SELECT claimed_by, fence FROM jobs WHERE id = ?", job_id)
        if row is None or row[0] != self.replica or int(row[1]) != fence:
            self.lose([job_id])
            why = "claimed by another replica" if row is not None and row[0] else "its claim was revoked"
            raise LeaseLost(job_id, why)

    def claim(self) -> Op[Claim | None]:
        """Claim the next queued job in turn order (None: nothing claimable now).

        Only the row taken is locked (the first free one in turn order, skipping rows another
        replica is claiming), so replicas claiming at once each take a different job.
        """
        rows = yield from fetch_all(_CANDIDATES, CLAIM_WINDOW)
        # A job this replica still holds or lost, free in the store (adopted elsewhere, then
        # queued again), waits until its run here let go: claimed now, the old run would pass
        # the new fence and two runs would write one job.
        here = self._lost | self._fences.keys()
        ordered = fair_order([row for row in rows if row["id"] not in here], self._last_key)
        by_id = {row["id"]: row for row in ordered}
        while ordered:
            ids = tuple(row["id"] for row in ordered)
            marks = ", ".join("?" * len(ids))
            turn = " ".join(f"WHEN ? THEN {i}" for i in range(len(ids)))
            free = yield Statement(
                f"SELECT id FROM jobs WHERE id IN ({marks}) AND state = 'queued' AND claimed_by IS NULL "
                f"ORDER BY CASE id {turn} END LIMIT 1",
                (*ids, *ids),
                skip_locked=True,
            )
            if not free:
                return None
            row = by_id[free[0][0]]
            ordered = [r for r in ordered if r["id"] != row["id"]]
            if row["session"] is not None:
                yield from lock(f"session:{row['tenant']}:{row['session']}")
                busy = yield from fetch_one(_SESSION_BUSY, row["tenant"], row["session"], row["id"], *_ACTIVE)
                if busy is not None:
                    continue  # its session's earlier job still runs; later ones wait too
            done = yield from fetch_one(
                "UPDATE jobs SET claimed_by = ?, fence = fence + 1 WHERE id = ? RETURNING fence",
                self.replica,
                row["id"],
            )
            assert done is not None
            self._last_key = row["queue"]
            return Claim(row["id"], int(done[0]), row["queue"])
        return None

    def hold_child(self, child_id: str) -> Op[int]:
        """Claim a child this replica's job just recorded (children run in their parent's worker)."""
        row = yield from fetch_one(
            "UPDATE jobs SET claimed_by = ?, fence = fence + 1 WHERE id = ? RETURNING fence",
            self.replica,
            child_id,
        )
        assert row is not None
        return int(row[0])

    def release(self, job_id: str) -> Op[list[str]]:
        """Let go of a job and its descendants this replica holds (and forget those it lost:
        its run of them ended); the ids of those it held."""
        tree = yield from fetch_all(_TREE, job_id)
        self._lost.difference_update(row[0] for row in tree)
        ids = [row[0] for row in tree if row[0] in self._fences]
        for held in ids:
            yield from execute(
                "UPDATE jobs SET claimed_by = NULL WHERE id = ? AND claimed_by = ? AND fence = ?",
                held,
                self.replica,
                self._fences[held],
            )
        return ids

    def register(self, address: str, now: float) -> Op[None]:
        """Join (or rejoin) the replicas, heartbeat ``now``."""
        yield from execute(
            "INSERT INTO replicas (id, address, started_at, heartbeat_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET address = excluded.address, heartbeat_at = excluded.heartbeat_at",
            self.replica,
            address,
            now,
            now,
        )

    def heartbeat(self, now: float) -> Op[bool]:
        """Renew this replica's lease; False when it was declared dead (its jobs adopted)."""
        row = yield from fetch_one(
            "UPDATE replicas SET heartbeat_at = ? WHERE id = ? RETURNING id", now, self.replica
        )
        return row is not None

    def lost(self) -> Op[list[str]]:
        """Jobs this replica holds whose claim is no longer its own (adopted, or revoked)."""
        held = self.held()
        if not held:
            return []
        marks = ", ".join("?" * len(held))
        rows = yield from fetch_all(f"SELECT id, claimed_by, fence FROM jobs WHERE id IN ({marks})", *held)
        found = {row[0]: (row[1], int(row[2])) for row in rows}
        return [job_id for job_id, fence in held.items() if found.get(job_id) != (self.replica, fence)]

    def expired(self, before: float, *, everyone_else: bool) -> Op[list[str]]:
        """Replicas whose heartbeat is older than ``before`` (or, with ``everyone_else``, every
        other replica: one controller per SQLite file)."""
        if everyone_else:
            rows = yield from fetch_all("SELECT id FROM replicas WHERE id != ?", self.replica)
        else:
            rows = yield from fetch_all(
                "SELECT id FROM replicas WHERE heartbeat_at < ? AND id != ?", before, self.replica
            )
        return [row[0] for row in rows]

    def adopt(self, dead: Sequence[str], *, orphans: bool = False) -> Op[list[Adopted]]:
        """Take over the jobs of ``dead`` replicas (with ``orphans``, also held jobs claimed by
        none: a store written before claims existed), fenced anew for this replica; forget the
        dead."""
        clauses: list[str] = []
        args: list[object] = [self.replica]
        if orphans:
            clauses.append(f"(claimed_by IS NULL AND ({HELD}))")
            args.extend(HELD_ARGS)
        if dead:
            yield from lock("replicas:adopt")
            clauses.append(f"claimed_by IN ({', '.join('?' * len(dead))})")
            args.extend(dead)
        if not clauses:
            return []
        where = " OR ".join(clauses)
        rows = yield from fetch_all(
            f"UPDATE jobs SET claimed_by = ?, fence = fence + 1 WHERE {where} RETURNING id, fence, state",
            *args,
        )
        if dead:
            yield from execute(f"DELETE FROM replicas WHERE id IN ({', '.join('?' * len(dead))})", *dead)
        return sorted(
            (Adopted(row[0], int(row[1]), JobState(row[2])) for row in rows), key=lambda a: a.job_id
        )

    def end_lease(self) -> Op[None]:
        """Mark this replica's lease as long past: every other replica finds it dead."""
        yield from execute("UPDATE replicas SET heartbeat_at = 0 WHERE id = ?", self.replica)

    def leave(self) -> Op[None]:
        """Leave the replicas (a clean stop; whatever it still holds was released)."""
        yield from execute("DELETE FROM replicas WHERE id = ?", self.replica)


__all__ = ["Adopted", "Claim", "Claims", "LeaseLost", "fair_order", "new_replica_id"]
