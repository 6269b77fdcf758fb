"""JobStore: the durable job record, on SQLite (one process) or PostgreSQL (replicas).

Every change of a job and the event that reports it are written in one transaction, so a
crash never leaves a state without its event or an event without its state. Each method is
one operation (a generator of SQL statements, ``airlock.state``) that the database runs: the
logic is written once for both engines. Writes to one job take its lock (``job:<id>``), so two
replicas never number its events alike; admissions of one tenant take ``tenant:<name>``. A write
of a job this replica holds is fenced (:mod:`._claims`): refused with ``LeaseLost`` once another
replica has adopted it.

An event's ``data`` column holds its :data:`~airlock.jobs.JobEventData` as JSON
(the ``kind`` column repeats its tag, for filtering) and is read back through
``JOB_EVENT_DATA``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Self, TypeVar

from pydantic import JsonValue

from airlock.jobs import (
    ACTIVE_STATES,
    JOB_EVENT_DATA,
    ApprovalWait,
    AuditRecord,
    EventKind,
    FixedPointRun,
    Job,
    JobError,
    JobEvent,
    JobEventData,
    JobFilter,
    JobOrigin,
    JobState,
    LogLine,
    StateChanged,
    StoredFile,
    utcnow,
)
from airlock.policy import WorkspaceManifest
from airlock.state import (
    Database,
    DatabaseError,
    Op,
    Row,
    execute,
    execute_many,
    fetch_all,
    fetch_one,
    lock,
    returning,
)
from layer0 import TurnInput, TurnOutput

from . import _audit_log
from . import _store_workspace as _ws
from ._audit_log import AuditFilter
from ._claims import Adopted, Claim, Claims
from ._fork_point import ForkSeed
from ._job_usage import FinishedUse, finished_uses
from ._observer import controller_observer
from ._retention import Cutoffs, PruneReport, prune_batch
from ._store_anchors import seal_tip
from ._store_rows import (
    COLUMNS,
    MARKS,
    JobStoreError,
    dump,
    event_of,
    governance_columns,
    job_of,
    new_job_id,
    new_row,
)
from ._tenant_use import COUNTED, Usage, measure
from ._workspace_usage import WorkspaceUsage, workspace_usage

T = TypeVar("T")

#: What runs first in the transaction that records a submitted job (a tenant's quotas).
Admission = Callable[[], Op[None]]


def _append(job_id: str, data: JobEventData, when: datetime) -> Op[JobEvent]:
    row = yield from fetch_one(
        "INSERT INTO events (job_id, seq, time, kind, data) "
        "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM events WHERE job_id = ? RETURNING seq",
        job_id,
        when.timestamp(),
        data.kind,
        JOB_EVENT_DATA.dump_json(data).decode(),
        job_id,
    )
    assert row is not None
    return JobEvent(job_id=job_id, seq=int(row[0]), time=when, data=data)


def _put_files(job_id: str, kind: str, files: Iterable[tuple[str, bytes]]) -> Op[None]:
    yield from execute("DELETE FROM job_files WHERE job_id = ? AND kind = ?", job_id, kind)
    yield from execute_many(
        "INSERT INTO job_files (job_id, kind, path, size, sha256, data) VALUES (?, ?, ?, ?, ?, ?)",
        [(job_id, kind, path, len(data), hashlib.sha256(data).hexdigest(), data) for path, data in files],
    )


def _changes(
    row: Row,
    state: JobState,
    now: datetime,
    *,
    output: TurnOutput | None,
    error: JobError | None,
    effects: JsonValue,
    resumed: bool,
) -> dict[str, Any]:
    """The columns a transition of the job in ``row`` (its state, start and resumes) sets."""
    sets: dict[str, Any] = {"state": state.value}
    if state in ACTIVE_STATES and row["started_at"] is None:
        sets["started_at"] = now.timestamp()
    if state.terminal:
        sets["finished_at"] = now.timestamp()
    if output is not None:
        sets["output"] = output.model_dump_json()
        sets["cost"] = str(output.metadata.cost)
    if error is not None:
        sets["error"] = error.model_dump_json()
    if effects is not None:
        sets["effects"] = dump(effects)
    if resumed:
        sets["resumes"] = row["resumes"] + 1
    return sets


def _ledger_entry(root: str, key: str, value: str) -> Op[None]:
    yield from execute(
        "INSERT INTO effect_ledger (root, address, outcome) VALUES (?, ?, ?)", root, key, value
    )


def _one_job(job_id: str) -> Op[Job | None]:
    row = yield from fetch_one(f"SELECT {COLUMNS} FROM jobs WHERE id = ?", job_id)
    return job_of(row) if row is not None else None


def _jobs(sql: str, *args: Any) -> Op[list[Job]]:
    rows = yield from fetch_all(sql, *args)
    return [job_of(r) for r in rows]


class JobStore:
    """Jobs, their events, checkpoints, files, signals and the audit log in one database.

    Use as an async context manager, or call :meth:`aclose`.

    Args:
        db: where the tables live (``SqliteJobStore`` and ``PostgresJobStore`` open one).
        claims: this replica's claims (default: a new replica id).
    """

    def __init__(self, db: Database, claims: Claims | None = None) -> None:
        self._db = db
        self._closed = False
        #: The jobs this replica holds, fenced.
        self.claims = claims or Claims()

    @property
    def shared(self) -> bool:
        """Whether other controller processes may share this store (PostgreSQL)."""
        return self._db.dialect != "sqlite"

    @property
    def where(self) -> str:
        """The database, as messages name it."""
        return self._db.where

    async def __aenter__(self) -> Self:
        await self._open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _open(self) -> None:
        """Create or upgrade the tables."""

    async def aclose(self) -> None:
        """Refuse further calls (idempotent)."""
        self._closed = True

    async def run(self, op: Op[T]) -> T:
        """Run a collaborator's operation on this store's database, in one transaction.

        Raises:
            JobStoreError: the database refused or could not be reached.
        """
        return await self._run(op)

    async def _run(self, op: Op[T]) -> T:
        if self._closed:
            op.close()
            raise JobStoreError(f"job store {self.where} is closed")
        began = time.monotonic()
        try:
            return await self._db.transact(op)
        except DatabaseError as e:
            controller_observer().store_failed("jobs", self._db.dialect)
            raise JobStoreError(f"job store: {e}") from e
        finally:
            controller_observer().store_operation("jobs", self._db.dialect, time.monotonic() - began)

    # -- writing -------------------------------------------------------------------------

    async def create(
        self,
        *,
        agent: str,
        input: TurnInput,
        queue: str | None = None,
        parent_id: str | None = None,
        origin: JobOrigin = "submit",
        workflow: str | None = None,
        max_duration_ms: int | None = None,
        state: JobState = JobState.QUEUED,
        fixed_point: FixedPointRun | None = None,
        files: Sequence[tuple[str, bytes]] = (),
        tenant: str = "default",
        owner: str | None = None,
        admit: Admission | None = None,
        ledger: tuple[str, str] | None = None,
        fork: ForkSeed | None = None,
        sandbox: str | None = None,
    ) -> tuple[Job, JobEvent]:
        """Record a new job (with its input ``files``, and its first ``state`` event) durably;
        return both. ``admit`` runs first in the same transaction (a tenant's quotas): what it
        raises leaves nothing written, and no two admissions of a tenant interleave. ``ledger``
        (a tree's root and a key) records, in the same transaction, which effect created it.
        A ``fork`` starts from its seed: the checkpoint (and workspace) it resumes from; a job
        with a ``sandbox`` runs in that long-lived sandbox."""
        job_id = new_job_id()
        now = utcnow()
        job = Job(
            id=job_id,
            agent=agent,
            state=state,
            input=input,
            queue=queue or agent,
            parent_id=parent_id,
            origin=origin,
            workflow=workflow or job_id,
            created_at=now,
            max_duration_ms=max_duration_ms,
            fixed_point=fixed_point,
            tenant=tenant,
            owner=owner,
            forked_from=fork.forked_from if fork is not None else None,
            fork_point=fork.point if fork is not None else None,
            sandbox=sandbox,
        )

        held_parent = parent_id is not None and self.claims.holds(parent_id)
        extras = _Extras(files, admit, ledger, fork)
        event, fence = await self._run(self._create(job, extras, held_parent))
        if held_parent:
            self.claims.hold(job_id, fence)
        return job, event

    def _create(self, job: Job, extras: _Extras, held_parent: bool) -> Op[tuple[JobEvent, int]]:
        """The transaction of :meth:`create`: the job's row and all that comes with it."""
        if extras.admit is not None:
            yield from lock(f"tenant:{job.tenant}")
            yield from extras.admit()
        yield from execute(f"INSERT INTO jobs ({COLUMNS}) VALUES ({MARKS})", *new_row(job))
        if job.parent_id is not None:
            yield from self._add_child(job.parent_id, job.id)
        # Children run in their parent's worker: held where it is.
        fence = (yield from self.claims.hold_child(job.id)) if held_parent else 0
        if extras.ledger is not None:
            yield from _ledger_entry(*extras.ledger, job.id)
        yield from _put_files(job.id, "input", extras.files)
        if extras.fork is not None:
            yield from _seeded(job.id, extras.fork)
        return (yield from _append(job.id, StateChanged(state=job.state), job.created_at)), fence

    def _add_child(self, parent_id: str, child_id: str) -> Op[None]:
        """Add ``child_id`` to its parent's children (fenced, when this replica holds the parent)."""
        yield from lock(f"job:{parent_id}")
        yield from self.claims.check(parent_id)
        row = yield from fetch_one("SELECT children FROM jobs WHERE id = ?", parent_id)
        if row is not None:
            children = [*json.loads(row[0]), child_id]
            yield from execute("UPDATE jobs SET children = ? WHERE id = ?", dump(children), parent_id)

    async def save_artifacts(self, job_id: str, files: Iterable[tuple[str, bytes]]) -> None:
        """Keep ``files`` as the job's artifacts (replacing those of an earlier execution)."""
        await self._run(self._fenced(job_id, _put_files(job_id, "artifact", list(files))))

    def _fenced(self, job_id: str, op: Op[T]) -> Op[T]:
        """``op`` on a job, after its lock and this replica's claim (if it holds the job) are checked."""
        yield from self.fence(job_id)
        return (yield from op)

    def fence(self, job_id: str) -> Op[None]:
        """The check every write of a job makes first, in the write's transaction: the job's
        lock, then (if this replica holds the job) its claim, which cannot change until the
        transaction ends. Raises ``LeaseLost`` once another replica adopted the job."""
        yield from lock(f"job:{job_id}")
        yield from self.claims.check(job_id)

    @property
    def database(self) -> Database:
        """Where the job tables live (another store's write can share a transaction with them)."""
        return self._db

    async def files(self, job_id: str, kind: Literal["input", "artifact"]) -> list[StoredFile]:
        """The job's input files or artifacts (without their content), in path order."""

        def op() -> Op[list[StoredFile]]:
            rows = yield from fetch_all(
                "SELECT path, size, sha256 FROM job_files WHERE job_id = ? AND kind = ? ORDER BY path",
                job_id,
                kind,
            )
            return [StoredFile(path=r[0], size=r[1], sha256=r[2]) for r in rows]

        return await self._run(op())

    async def file_data(self, job_id: str, kind: Literal["input", "artifact"], path: str) -> bytes | None:
        """The content of one of the job's files (None: no such file)."""

        def op() -> Op[bytes | None]:
            row = yield from fetch_one(
                "SELECT data FROM job_files WHERE job_id = ? AND kind = ? AND path = ?", job_id, kind, path
            )
            return None if row is None else bytes(row[0])

        return await self._run(op())

    async def input_files(self, job_id: str) -> list[tuple[str, bytes]]:
        """The job's input files with their content, in path order."""

        def op() -> Op[list[tuple[str, bytes]]]:
            rows = yield from fetch_all(
                "SELECT path, data FROM job_files WHERE job_id = ? AND kind = 'input' ORDER BY path", job_id
            )
            return [(r[0], bytes(r[1])) for r in rows]

        return await self._run(op())

    async def transition(
        self,
        job_id: str,
        state: JobState,
        *,
        detail: str | None = None,
        output: TurnOutput | None = None,
        error: JobError | None = None,
        effects: JsonValue = None,
        only_from: Iterable[JobState] | None = None,
        approval: ApprovalWait | None = None,
        fixed_point: FixedPointRun | None = None,
        resumed: bool = False,
        revoke: bool = False,
    ) -> tuple[Job, JobEvent] | None:
        """Move a job to ``state`` (with its ``state`` event) and return both.

        Entering an active state first sets ``started_at``; entering a terminal one sets
        ``finished_at``. ``approval`` / ``fixed_point`` replace the job's; ``resumed`` counts
        one more resume. With ``only_from``, nothing happens (None is returned) unless the
        job is in one of those states: a cancel and a finishing worker cannot both win. With
        ``revoke``, the replica that holds the job loses its claim (its next write is refused).

        Raises:
            JobStoreError: no such job.
        """
        allowed = {s.value for s in only_from} if only_from is not None else None

        def op() -> Op[tuple[Job, JobEvent] | None]:
            row = yield from fetch_one("SELECT state, started_at, resumes FROM jobs WHERE id = ?", job_id)
            if row is None:
                raise JobStoreError(f"no job {job_id}")
            if allowed is not None and row["state"] not in allowed:
                return None
            now = utcnow()
            sets = _changes(row, state, now, output=output, error=error, effects=effects, resumed=resumed)
            sets.update(governance_columns(approval, fixed_point))
            assignments = ", ".join(f"{k} = ?" for k in sets)
            if revoke:
                assignments += ", claimed_by = NULL, fence = fence + 1"
            fresh = yield from fetch_one(
                f"UPDATE jobs SET {assignments} WHERE id = ? RETURNING {COLUMNS}", *sets.values(), job_id
            )
            assert fresh is not None
            changed = StateChanged(state=state, previous=JobState(row["state"]), detail=detail, error=error)
            event = yield from _append(job_id, changed, now)
            if state.terminal:
                yield from seal_tip(job_id)
            return job_of(fresh), event

        return await self._run(self._fenced(job_id, op()))

    async def append(self, job_id: str, data: JobEventData) -> JobEvent:
        """Append one event to a job's record."""

        return await self._run(self._fenced(job_id, _append(job_id, data, utcnow())))

    async def update(
        self, job_id: str, *, approval: ApprovalWait | None = None, fixed_point: FixedPointRun | None = None
    ) -> Job:
        """Replace a job's approval wait and/or fixed-point record (its state unchanged).

        Raises:
            JobStoreError: no such job.
        """
        sets = governance_columns(approval, fixed_point)

        def op() -> Op[Job]:
            if sets:
                assignments = ", ".join(f"{k} = ?" for k in sets)
                yield from execute(f"UPDATE jobs SET {assignments} WHERE id = ?", *sets.values(), job_id)
            job = yield from _one_job(job_id)
            if job is None:
                raise JobStoreError(f"no job {job_id}")
            return job

        return await self._run(self._fenced(job_id, op()))

    async def save_checkpoint(
        self,
        job_id: str,
        state: str,
        started: Iterable[str],
        manifest: str | None = None,
        *,
        logged: tuple[str, str | None] | None = None,
    ) -> None:
        """Keep ``state`` (a SessionState's JSON, every message) as the job's latest checkpoint,
        with the open step's calls that were started and the workspace's manifest digest
        (None: the previous checkpoint's stays). ``logged`` (the checkpoint as received, and
        the job's latest record) is appended to the job's log in the same transaction."""
        started = list(started)

        def op() -> Op[None]:
            yield from _ws.save_checkpoint(job_id, state, started, manifest)
            if logged is not None:
                yield from _ws.log_checkpoint(job_id, logged[0], started, manifest, logged[1])

        await self._run(self._fenced(job_id, op()))

    async def save_started(self, job_id: str, started: Iterable[str]) -> None:
        """Keep which calls of the job's open step started (their checkpoint unchanged)."""
        started_json = json.dumps(sorted(started))
        save = execute("UPDATE checkpoints SET started = ? WHERE job_id = ?", started_json, job_id)
        await self._run(self._fenced(job_id, save))

    async def clear_checkpoint(self, job_id: str) -> None:
        """Forget the job's checkpoint (its next execution starts the turn anew)."""
        await self._run(self._fenced(job_id, execute("DELETE FROM checkpoints WHERE job_id = ?", job_id)))

    async def checkpoint(self, job_id: str) -> tuple[str, list[str]] | None:
        """The job's latest checkpoint: the state's JSON and the open step's started calls."""

        def op() -> Op[tuple[str, list[str]] | None]:
            row = yield from fetch_one("SELECT state, started FROM checkpoints WHERE job_id = ?", job_id)
            return (row[0], list(json.loads(row[1]))) if row is not None else None

        return await self._run(op())

    async def record_signal(
        self,
        workflow: str,
        signal_type: str,
        data: JsonValue,
        source_job: str | None,
        ledger: tuple[str, str] | None = None,
    ) -> int:
        """Record a signal for ``workflow``; return how many that workflow has received. With
        ``ledger`` (a tree's root and a key), a signal that key already records is not recorded
        again (a replayed effect), and the key is recorded with a new one. A signal a job sends
        is fenced to the replica holding ``source_job``."""

        def op() -> Op[int]:
            if source_job is not None:
                yield from self.fence(source_job)
            yield from lock(f"workflow:{workflow}")
            if ledger is not None:
                seen = yield from fetch_one(
                    "SELECT 1 FROM effect_ledger WHERE root = ? AND address = ?", *ledger
                )
                if seen is not None:
                    row = yield from fetch_one("SELECT COUNT(*) FROM signals WHERE workflow = ?", workflow)
                    assert row is not None
                    return int(row[0])
                yield from _ledger_entry(*ledger, workflow)
            yield from execute(
                "INSERT INTO signals (workflow, signal_type, data, source_job, time) VALUES (?, ?, ?, ?, ?)",
                workflow,
                signal_type,
                dump(data),
                source_job,
                time.time(),
            )
            row = yield from fetch_one("SELECT COUNT(*) FROM signals WHERE workflow = ?", workflow)
            assert row is not None
            return int(row[0])

        return await self._run(op())

    async def recover(self, job_ids: Sequence[str], detail: str, log: str | None = None) -> list[Job]:
        """Mark the jobs ``job_ids`` (this replica adopted them: their controller is gone)
        interrupted, those not already terminal. With ``log``, a ``log`` event (source
        ``controller``) is written before the terminal ``state`` event, in the same
        transaction. Returns the jobs, interrupted.
        """
        error = JobError.of("interrupted", detail)

        def one(job_id: str, now: datetime) -> Op[Job | None]:
            row = yield from fetch_one("SELECT state FROM jobs WHERE id = ?", job_id)
            if row is None or JobState(row[0]).terminal:
                return None
            if log is not None:
                yield from _append(job_id, LogLine(level="warn", message=log, source="controller"), now)
            fresh = yield from fetch_one(
                f"UPDATE jobs SET state = ?, finished_at = ?, error = ? WHERE id = ? RETURNING {COLUMNS}",
                JobState.INTERRUPTED.value,
                now.timestamp(),
                error.model_dump_json(),
                job_id,
            )
            assert fresh is not None
            changed = StateChanged(
                state=JobState.INTERRUPTED, previous=JobState(row[0]), detail=detail, error=error
            )
            yield from _append(job_id, changed, now)
            yield from seal_tip(job_id)
            return job_of(fresh)

        def op() -> Op[list[Job]]:
            now = utcnow()
            jobs = []
            for job_id in job_ids:
                job = yield from self._fenced(job_id, one(job_id, now))
                if job is not None:
                    jobs.append(job)
            return jobs

        return await self._run(op())

    async def check_claim(self, job_id: str) -> None:
        """Refuse (``LeaseLost``) when this replica held ``job_id`` and no longer does."""
        await self._run(self._fenced(job_id, returning(None)))

    # -- the effect ledger -------------------------------------------------------------------

    async def effects_applied(self, root: str) -> dict[str, str]:
        """The outcomes (JSON) of the effects applied for the job tree ``root``, by address."""
        rows = await self._run(fetch_all("SELECT address, outcome FROM effect_ledger WHERE root = ?", root))
        return {row[0]: row[1] for row in rows}

    async def effect_applied(self, root: str, address: str, outcome: str) -> None:
        """Record that the effect at ``address`` of the tree ``root`` was applied (its outcome,
        JSON), by the replica that holds ``root`` (refused once it no longer does)."""
        record = execute(
            "INSERT INTO effect_ledger (root, address, outcome) VALUES (?, ?, ?)", root, address, outcome
        )
        await self._run(self._fenced(root, record))

    # -- claims ------------------------------------------------------------------------------

    async def claim(self) -> Claim | None:
        """Claim the next queued job in turn order for this replica (None: nothing claimable)."""
        claimed = await self._run(self.claims.claim())
        if claimed is not None:
            self.claims.hold(claimed.job_id, claimed.fence)
        return claimed

    async def release(self, job_id: str) -> None:
        """Let go of a job this replica held (its run here ended), with its children."""
        if self.claims.holds(job_id) or self.claims.lost_here(job_id):
            self.claims.drop(await self._run(self.claims.release(job_id)))

    async def register(self, address: str) -> None:
        """Join the replicas sharing this store."""
        await self._run(self.claims.register(address, time.time()))

    async def heartbeat(self) -> bool:
        """Renew this replica's lease; False when others declared it dead (its jobs adopted)."""
        return await self._run(self.claims.heartbeat(time.time()))

    async def lost_claims(self) -> list[str]:
        """Jobs this replica holds whose claim is no longer its own; forgotten here."""
        lost = await self._run(self.claims.lost())
        self.claims.lose(lost)
        return lost

    async def dead_replicas(self, lease_s: float) -> list[str]:
        """Replicas past their lease (on SQLite: every other, one controller per file)."""
        return await self._run(self.claims.expired(time.time() - lease_s, everyone_else=not self.shared))

    async def adopt(self, dead: Sequence[str], *, orphans: bool = False) -> list[Adopted]:
        """Take over the jobs of ``dead`` replicas (and, with ``orphans``, held jobs claimed by
        none), now held by this replica."""
        adopted = await self._run(self.claims.adopt(dead, orphans=orphans))
        for job in adopted:
            self.claims.hold(job.job_id, job.fence)
        return adopted

    async def leave(self) -> None:
        """Leave the replicas (a clean stop)."""
        await self._run(self.claims.leave())

    async def end_lease(self) -> None:
        """End this replica's lease now (a stop that leaves its jobs to the others to adopt)."""
        await self._run(self.claims.end_lease())

    # -- reading ---------------------------------------------------------------------------

    async def get(self, job_id: str, tenant: str | None = None) -> Job | None:
        """The job, or None (also when it is not ``tenant``'s, decided by the same query)."""
        if tenant is None:
            return await self._run(_one_job(job_id))
        found = await self._run(
            _jobs(f"SELECT {COLUMNS} FROM jobs WHERE id = ? AND tenant = ?", job_id, tenant)
        )
        return found[0] if found else None

    async def find(self, where: JobFilter | None = None) -> list[Job]:
        """Jobs matching ``where``, most recent first."""
        f = where or JobFilter()
        clauses: list[str] = []
        args: list[Any] = []
        if f.states:
            clauses.append(f"state IN ({', '.join('?' * len(f.states))})")
            args.extend(sorted(s.value for s in f.states))
        for column, value in (
            ("agent", f.agent),
            ("session", f.session),
            ("parent_id", f.parent_id),
            ("workflow", f.workflow),
            ("tenant", f.tenant),
            ("owner", f.owner),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        if f.before_id is not None:
            clauses.append("n < (SELECT n FROM jobs WHERE id = ?)")
            args.append(f.before_id)
        sql = f"SELECT {COLUMNS} FROM jobs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY n DESC LIMIT ?"
        args.append(max(1, min(f.limit, 1000)))
        return await self._run(_jobs(sql, *args))

    async def tenant_use(self, tenant: str, counted: frozenset[str] = COUNTED) -> Usage:
        """What ``tenant`` uses now of what its quotas limit (of the quotas in ``counted``)."""
        return await self._run(measure(tenant, utcnow(), counted))

    async def record_audit(self, entry: AuditRecord) -> int:
        """Append one entry to the audit log; its ``seq``."""
        return await self._run(_audit_log.insert(entry))

    async def audit_quotas(self, quotas: str, source: str) -> AuditRecord | None:
        """Audit the tenants' ``quotas`` (JSON) if they changed since last audited."""

        def op() -> Op[AuditRecord | None]:
            yield from lock("audit:quotas")
            return (yield from _audit_log.quota_change(quotas, source, utcnow()))

        return await self._run(op())

    async def audit(self, where: AuditFilter) -> list[AuditRecord]:
        """Audit entries matching ``where``, newest first."""
        return await self._run(_audit_log.select(where))

    async def queued(self) -> list[Job]:
        """Submitted jobs waiting for a worker, oldest first."""
        sql = f"SELECT {COLUMNS} FROM jobs WHERE state = ? AND origin = 'submit' ORDER BY n"
        return await self._run(_jobs(sql, JobState.QUEUED.value))

    async def finished_uses(self, where: JobFilter, since: datetime, until: datetime) -> list[FinishedUse]:
        """What the jobs matching ``where`` that finished in ``[since, until)`` used, oldest
        first (at most ``where.limit``)."""
        return await self._run(finished_uses(where, since, until))

    async def census(self) -> dict[tuple[JobState, str, str], int]:
        """Jobs not yet finished, store-wide (every replica's), by state, agent and tenant."""
        live = sorted(s.value for s in JobState if not s.terminal)
        sql = (
            "SELECT state, agent, tenant, COUNT(*) FROM jobs "
            f"WHERE state IN ({', '.join('?' * len(live))}) GROUP BY state, agent, tenant"
        )
        rows = await self._run(fetch_all(sql, *live))
        return {(JobState(r[0]), str(r[1]), str(r[2])): int(r[3]) for r in rows}

    async def events(
        self, job_id: str, *, after_seq: int = 0, kind: EventKind | None = None
    ) -> list[JobEvent]:
        """A job's events after ``after_seq`` (of one ``kind``, if given), in order."""
        sql = "SELECT job_id, seq, time, kind, data FROM events WHERE job_id = ? AND seq > ?"
        args: list[Any] = [job_id, after_seq]
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        sql += " ORDER BY seq"

        def op() -> Op[list[JobEvent]]:
            rows = yield from fetch_all(sql, *args)
            return [event_of(r) for r in rows]

        return await self._run(op())

    async def signals(self, workflow: str) -> list[dict[str, JsonValue]]:
        """The signals recorded for ``workflow``, oldest first."""

        def op() -> Op[list[dict[str, JsonValue]]]:
            rows = yield from fetch_all(
                "SELECT signal_type, data, source_job, time FROM signals WHERE workflow = ? ORDER BY n",
                workflow,
            )
            return [
                {"signal_type": r[0], "data": json.loads(r[1]), "source_job": r[2], "time": r[3]}
                for r in rows
            ]

        return await self._run(op())

    async def prune(self, cutoffs: Cutoffs, limit: int = 100, *, dry_run: bool = False) -> PruneReport:
        """Remove up to ``limit`` finished job trees due under ``cutoffs``, in one transaction
        (dry: count them only); see :mod:`._retention`."""
        return await self._run(prune_batch(cutoffs, limit, dry_run=dry_run))

    # Workspaces (issue 40): the ops live in ``_store_workspace``.

    async def checkpoint_manifest(self, job_id: str) -> str | None:
        """The manifest digest of the job's latest checkpoint (None: none)."""
        return await self._run(_ws.checkpoint_manifest(job_id))

    async def log_checkpoint(
        self, job_id: str, delta: str, started: Iterable[str], manifest: str | None, record: str | None
    ) -> int:
        """Append a checkpoint (the delta as received) to the job's log; its seq."""
        return await self._run(
            self._fenced(job_id, _ws.log_checkpoint(job_id, delta, started, manifest, record))
        )

    async def checkpoint_log(self, job_id: str, upto: int | None = None) -> list[_ws.LoggedCheckpoint]:
        """The job's logged checkpoints in order (up to seq ``upto``)."""
        return await self._run(_ws.checkpoint_log(job_id, upto))

    async def put_manifest(self, tenant: str, manifest: WorkspaceManifest) -> None:
        """Keep a workspace manifest of the tenant (idempotent)."""
        await self._run(_ws.put_manifest(tenant, manifest))

    async def manifest(self, tenant: str, digest: str) -> WorkspaceManifest | None:
        """The tenant's manifest of that digest (None: unknown)."""
        return await self._run(_ws.manifest(tenant, digest))

    async def note_blob(self, tenant: str, sha256: str, size: int, stored: int) -> None:
        """Note a blob the tenant's blob store holds."""
        await self._run(_ws.note_blob(tenant, sha256, size, stored))

    async def workspace_usage(self) -> WorkspaceUsage:
        """Workspace bytes stored by tenant and named by agent (``airlock store usage``)."""
        return await self._run(workspace_usage())


__all__ = ["Admission", "JobStore", "JobStoreError", "new_job_id"]


def _seeded(job_id: str, fork: ForkSeed) -> Op[None]:
    """A fork's first checkpoint: the state (and workspace) it starts from."""
    yield from execute(
        "INSERT INTO checkpoints (job_id, state, started, time, manifest) VALUES (?, ?, ?, ?, ?)",
        job_id,
        fork.state,
        "[]",
        time.time(),
        fork.manifest,
    )


@dataclass(frozen=True)
class _Extras:
    """What a new job's transaction writes besides its row."""

    files: Sequence[tuple[str, bytes]]
    admit: Admission | None
    ledger: tuple[str, str] | None
    fork: ForkSeed | None
