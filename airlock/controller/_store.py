"""SqliteJobStore: the durable job record (SQLite in WAL mode, one writer thread).

Every change of a job and the event that reports it are written in one transaction, so a
crash never leaves a state without its event or an event without its state. Calls run on a
dedicated thread (sqlite3 blocks); the event loop never waits on the disk.

An event's ``data`` column holds its :data:`~airlock.jobs.JobEventData` as JSON
(the ``kind`` column repeats its tag, for filtering) and is read back through
``JOB_EVENT_DATA``. A file written by an earlier version is upgraded when it is opened
(see ``_migrate``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Self, TypeVar

from pydantic import JsonValue, ValidationError

from airlock.errors import AirlockError
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
from airlock.state import SqliteThread
from layer0 import TurnInput, TurnOutput

from . import _audit_log, _migrate
from ._audit_log import AuditFilter
from ._store_backup import backup_before_upgrade, backups
from ._tenant_use import COUNTED, Usage, measure

T = TypeVar("T")

_log = logging.getLogger("airlock.controller")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    agent TEXT NOT NULL,
    state TEXT NOT NULL,
    queue TEXT NOT NULL,
    parent_id TEXT,
    origin TEXT NOT NULL,
    workflow TEXT NOT NULL,
    session TEXT,
    input TEXT NOT NULL,
    output TEXT,
    error TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    max_duration_ms INTEGER,
    children TEXT NOT NULL DEFAULT '[]',
    effects TEXT,
    resumes INTEGER NOT NULL DEFAULT 0,
    approval TEXT,
    fixed_point TEXT,
    tenant TEXT NOT NULL DEFAULT 'default',
    owner TEXT
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, n);
CREATE INDEX IF NOT EXISTS jobs_session ON jobs(session, n);
CREATE INDEX IF NOT EXISTS jobs_parent ON jobs(parent_id, n);
CREATE INDEX IF NOT EXISTS jobs_workflow ON jobs(workflow, n);
CREATE TABLE IF NOT EXISTS events (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time REAL NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS signals (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow TEXT NOT NULL,
    signal_type TEXT NOT NULL,
    data TEXT NOT NULL,
    source_job TEXT,
    time REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS signals_workflow ON signals(workflow, n);
CREATE TABLE IF NOT EXISTS checkpoints (
    job_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    started TEXT NOT NULL DEFAULT '[]',
    time REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS job_files (
    job_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('input', 'artifact')),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (job_id, kind, path)
);
"""

#: Jobs a worker holds: active, or a child created but not started or waiting for approval
#: (children never queue: their parent's worker runs them).
_HELD = f"state IN ({', '.join('?' * len(ACTIVE_STATES))}) OR (state IN (?, ?) AND origin != 'submit')"
_HELD_ARGS = (
    *sorted(s.value for s in ACTIVE_STATES),
    JobState.QUEUED.value,
    JobState.AWAITING_APPROVAL.value,
)

_COLUMNS = (
    "id, agent, state, queue, parent_id, origin, workflow, session, input, output, error, "
    "created_at, started_at, finished_at, max_duration_ms, children, effects, resumes, approval, "
    "fixed_point, tenant, owner"
)


class JobStoreError(AirlockError):
    """The job store cannot be read or written (the message names the database file)."""


def new_job_id() -> str:
    """A fresh job id: ``j`` + 11 hex digits of milliseconds + 6 random hex digits (sortable)."""
    return f"j{int(time.time() * 1000):011x}{secrets.token_hex(3)}"


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _dt(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if value is not None else None


def _dump(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _governance_columns(approval: ApprovalWait | None, fixed_point: FixedPointRun | None) -> dict[str, str]:
    """The column values that replace a job's approval wait and fixed-point record (those given)."""
    sets = {}
    if approval is not None:
        sets["approval"] = approval.model_dump_json()
    if fixed_point is not None:
        sets["fixed_point"] = fixed_point.model_dump_json()
    return sets


def _job(row: sqlite3.Row) -> Job:
    created = _dt(row["created_at"])
    assert created is not None
    return Job(
        id=row["id"],
        agent=row["agent"],
        state=JobState(row["state"]),
        input=TurnInput.model_validate_json(row["input"]),
        output=TurnOutput.model_validate_json(row["output"]) if row["output"] else None,
        error=JobError.model_validate_json(row["error"]) if row["error"] else None,
        queue=row["queue"],
        parent_id=row["parent_id"],
        origin=row["origin"],
        workflow=row["workflow"],
        created_at=created,
        started_at=_dt(row["started_at"]),
        finished_at=_dt(row["finished_at"]),
        max_duration_ms=row["max_duration_ms"],
        children=json.loads(row["children"]),
        effects=json.loads(row["effects"]) if row["effects"] else None,
        resumes=row["resumes"],
        approval=ApprovalWait.model_validate_json(row["approval"]) if row["approval"] else None,
        fixed_point=FixedPointRun.model_validate_json(row["fixed_point"]) if row["fixed_point"] else None,
        tenant=row["tenant"],
        owner=row["owner"],
    )


def _event(row: sqlite3.Row) -> JobEvent:
    when = _dt(row["time"])
    assert when is not None
    try:
        data = JOB_EVENT_DATA.validate_json(row["data"])
    except ValidationError as e:
        raise JobStoreError(
            f"event {row['seq']} of job {row['job_id']} does not read as an event: {e}"
        ) from e
    return JobEvent(job_id=row["job_id"], seq=row["seq"], time=when, data=data)


def newer_store_message(path: Path, version: int) -> str:
    """Why a store newer than this code is refused, and the two ways out."""
    own = _migrate.SCHEMA_VERSION
    usable = [b for b in backups(path) if b.version <= own]
    text = (
        f"job store {path} has schema version {version}, newer than this airlock's ({own}): a newer "
        "airlock upgraded it. Run that airlock again (roll forward), or roll the store back"
    )
    if not usable:
        return text + f" from a copy made before the upgrade (none found beside {path.name})"
    newest = usable[0]
    when = newest.made_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"{text}: with the controller stopped, `airlock store restore --data-dir {path.parent} "
        f"{newest.path.name}` (the copy made before the upgrade, {when}; jobs recorded since are lost)"
    )


class SqliteJobStore(SqliteThread):
    """Jobs, their events and recorded signals in one SQLite file (WAL, synchronous=NORMAL).

    Use as an async context manager, or call :meth:`aclose`.

    Args:
        path: the database file (created with its directory, mode 0600).
        busy_timeout_s: how long a write waits for another connection's lock.
    """

    _thread_name = "airlock-jobstore"

    async def __aenter__(self) -> Self:
        await self._run(lambda _: None)
        return self

    def _connect(self) -> sqlite3.Connection:
        return self._open_once(self._prepare)

    def _prepare(self, conn: sqlite3.Connection, fresh: bool) -> None:
        conn.executescript(_SCHEMA)
        conn.executescript(_audit_log.SCHEMA)
        self._upgrade(conn, fresh=fresh)

    def _upgrade(self, conn: sqlite3.Connection, *, fresh: bool) -> None:
        """Upgrade a file written by an earlier version (once, in one transaction), after
        copying it (:mod:`._store_backup`) unless it holds no job yet."""
        version = _migrate.schema_version(conn)
        if version == _migrate.SCHEMA_VERSION:
            return
        holds_jobs = conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchone() is not None
        if version < _migrate.SCHEMA_VERSION and not fresh and holds_jobs:
            # Before the write transaction: SQLite's backup reads through its own lock.
            kept = backup_before_upgrade(conn, self._path)
            _log.warning(
                "job store %s: schema version %d -> %d; the store before the upgrade is kept "
                "at %s (airlock store restore, to roll back)",
                self._path, version, _migrate.SCHEMA_VERSION, kept,
            )  # fmt: skip
        self._in_transaction(conn, self._upgrade_now)

    def _upgrade_now(self, conn: sqlite3.Connection) -> None:
        version = _migrate.schema_version(conn)  # another process may have upgraded it
        if version > _migrate.SCHEMA_VERSION:
            raise JobStoreError(newer_store_message(self._path, version))
        if version < _migrate.SCHEMA_VERSION:
            _migrate.upgrade(conn)

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise JobStoreError(f"job store {self._path} is closed")

        try:
            return await self._on_thread(lambda: self._in_transaction(self._connect(), op))
        except (sqlite3.Error, OSError) as e:
            raise JobStoreError(f"job store {self._path}: {type(e).__name__}: {e}") from e

    # -- writing -------------------------------------------------------------------------

    @staticmethod
    def _append(conn: sqlite3.Connection, job_id: str, data: JobEventData, when: datetime) -> JobEvent:
        row = conn.execute(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE job_id = ?", (job_id,)
        ).fetchone()
        seq = int(row[0])
        conn.execute(
            "INSERT INTO events (job_id, seq, time, kind, data) VALUES (?, ?, ?, ?, ?)",
            (job_id, seq, when.timestamp(), data.kind, JOB_EVENT_DATA.dump_json(data).decode()),
        )
        return JobEvent(job_id=job_id, seq=seq, time=when, data=data)

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
        admit: Callable[[sqlite3.Connection], None] | None = None,
    ) -> tuple[Job, JobEvent]:
        """Record a new job (with its input ``files``, and its first ``state`` event) durably;
        return both. ``admit`` runs first in the same transaction (a tenant's quotas): what it
        raises leaves nothing written, and no two admissions interleave."""
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
        )

        def op(conn: sqlite3.Connection) -> JobEvent:
            if admit is not None:
                admit(conn)
            conn.execute(f"INSERT INTO jobs ({_COLUMNS}) VALUES ({', '.join('?' * 22)})", _new_row(job))
            if parent_id is not None:
                row = conn.execute("SELECT children FROM jobs WHERE id = ?", (parent_id,)).fetchone()
                if row is not None:
                    children = [*json.loads(row[0]), job_id]
                    conn.execute("UPDATE jobs SET children = ? WHERE id = ?", (_dump(children), parent_id))
            self._put_files(conn, job_id, "input", files)
            return self._append(conn, job_id, StateChanged(state=state), now)

        return job, await self._run(op)

    @staticmethod
    def _put_files(
        conn: sqlite3.Connection, job_id: str, kind: str, files: Iterable[tuple[str, bytes]]
    ) -> None:
        conn.execute("DELETE FROM job_files WHERE job_id = ? AND kind = ?", (job_id, kind))
        conn.executemany(
            "INSERT INTO job_files (job_id, kind, path, size, sha256, data) VALUES (?, ?, ?, ?, ?, ?)",
            [(job_id, kind, path, len(data), hashlib.sha256(data).hexdigest(), data) for path, data in files],
        )

    async def save_artifacts(self, job_id: str, files: Iterable[tuple[str, bytes]]) -> None:
        """Keep ``files`` as the job's artifacts (replacing those of an earlier execution)."""
        await self._run(lambda conn: self._put_files(conn, job_id, "artifact", list(files)))

    async def files(self, job_id: str, kind: Literal["input", "artifact"]) -> list[StoredFile]:
        """The job's input files or artifacts (without their content), in path order."""

        def op(conn: sqlite3.Connection) -> list[StoredFile]:
            rows = conn.execute(
                "SELECT path, size, sha256 FROM job_files WHERE job_id = ? AND kind = ? ORDER BY path",
                (job_id, kind),
            ).fetchall()
            return [StoredFile(path=r[0], size=r[1], sha256=r[2]) for r in rows]

        return await self._run(op)

    async def file_data(self, job_id: str, kind: Literal["input", "artifact"], path: str) -> bytes | None:
        """The content of one of the job's files (None: no such file)."""

        def op(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute(
                "SELECT data FROM job_files WHERE job_id = ? AND kind = ? AND path = ?", (job_id, kind, path)
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run(op)

    async def input_files(self, job_id: str) -> list[tuple[str, bytes]]:
        """The job's input files with their content, in path order."""

        def op(conn: sqlite3.Connection) -> list[tuple[str, bytes]]:
            rows = conn.execute(
                "SELECT path, data FROM job_files WHERE job_id = ? AND kind = 'input' ORDER BY path",
                (job_id,),
            ).fetchall()
            return [(r[0], bytes(r[1])) for r in rows]

        return await self._run(op)

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
    ) -> tuple[Job, JobEvent] | None:
        """Move a job to ``state`` (with its ``state`` event) and return both.

        Entering an active state first sets ``started_at``; entering a terminal one sets
        ``finished_at``. ``approval`` / ``fixed_point`` replace the job's; ``resumed`` counts
        one more resume. With ``only_from``, nothing happens (None is returned) unless the
        job is in one of those states: a cancel and a finishing worker cannot both win.

        Raises:
            JobStoreError: no such job.
        """
        allowed = {s.value for s in only_from} if only_from is not None else None

        def op(conn: sqlite3.Connection) -> tuple[Job, JobEvent] | None:
            row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise JobStoreError(f"no job {job_id}")
            if allowed is not None and row["state"] not in allowed:
                return None
            now = utcnow()
            sets: dict[str, Any] = {"state": state.value}
            if state in ACTIVE_STATES and row["started_at"] is None:
                sets["started_at"] = now.timestamp()
            if state.terminal:
                sets["finished_at"] = now.timestamp()
            if output is not None:
                sets["output"] = output.model_dump_json()
            if error is not None:
                sets["error"] = error.model_dump_json()
            if effects is not None:
                sets["effects"] = _dump(effects)
            sets.update(_governance_columns(approval, fixed_point))
            if resumed:
                sets["resumes"] = row["resumes"] + 1
            assignments = ", ".join(f"{k} = ?" for k in sets)
            conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*sets.values(), job_id))
            changed = StateChanged(state=state, previous=JobState(row["state"]), detail=detail, error=error)
            event = self._append(conn, job_id, changed, now)
            fresh = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
            return _job(fresh), event

        return await self._run(op)

    async def append(self, job_id: str, data: JobEventData) -> JobEvent:
        """Append one event to a job's record."""
        return await self._run(lambda conn: self._append(conn, job_id, data, utcnow()))

    async def update(
        self, job_id: str, *, approval: ApprovalWait | None = None, fixed_point: FixedPointRun | None = None
    ) -> Job:
        """Replace a job's approval wait and/or fixed-point record (its state unchanged).

        Raises:
            JobStoreError: no such job.
        """
        sets = _governance_columns(approval, fixed_point)

        def op(conn: sqlite3.Connection) -> Job:
            if sets:
                assignments = ", ".join(f"{k} = ?" for k in sets)
                conn.execute(f"UPDATE jobs SET {assignments} WHERE id = ?", (*sets.values(), job_id))
            row = conn.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                raise JobStoreError(f"no job {job_id}")
            return _job(row)

        return await self._run(op)

    async def save_checkpoint(self, job_id: str, state: str, started: Iterable[str]) -> None:
        """Keep ``state`` (a SessionState's JSON, every message) as the job's latest checkpoint,
        with the open step's calls that were started."""
        started_json = json.dumps(sorted(started))

        def op(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO checkpoints (job_id, state, started, time) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(job_id) DO UPDATE SET state = excluded.state, started = excluded.started, "
                "time = excluded.time",
                (job_id, state, started_json, time.time()),
            )

        await self._run(op)

    async def save_started(self, job_id: str, started: Iterable[str]) -> None:
        """Keep which calls of the job's open step started (their checkpoint unchanged)."""
        started_json = json.dumps(sorted(started))
        await self._run(
            lambda conn: conn.execute(
                "UPDATE checkpoints SET started = ? WHERE job_id = ?", (started_json, job_id)
            )
        )

    async def clear_checkpoint(self, job_id: str) -> None:
        """Forget the job's checkpoint (its next execution starts the turn anew)."""
        await self._run(lambda conn: conn.execute("DELETE FROM checkpoints WHERE job_id = ?", (job_id,)))

    async def checkpoint(self, job_id: str) -> tuple[str, list[str]] | None:
        """The job's latest checkpoint: the state's JSON and the open step's started calls."""

        def op(conn: sqlite3.Connection) -> tuple[str, list[str]] | None:
            row = conn.execute(
                "SELECT state, started FROM checkpoints WHERE job_id = ?", (job_id,)
            ).fetchone()
            return (row[0], list(json.loads(row[1]))) if row is not None else None

        return await self._run(op)

    async def record_signal(
        self, workflow: str, signal_type: str, data: JsonValue, source_job: str | None
    ) -> int:
        """Record a signal for ``workflow``; return how many that workflow has received."""

        def op(conn: sqlite3.Connection) -> int:
            conn.execute(
                "INSERT INTO signals (workflow, signal_type, data, source_job, time) VALUES (?, ?, ?, ?, ?)",
                (workflow, signal_type, _dump(data), source_job, time.time()),
            )
            return int(
                conn.execute("SELECT COUNT(*) FROM signals WHERE workflow = ?", (workflow,)).fetchone()[0]
            )

        return await self._run(op)

    async def held(self) -> list[Job]:
        """Jobs a worker holds (provisioning, running, applying effects, or a child not yet
        started), oldest first: at start, the ones :meth:`recover` will interrupt."""
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE {_HELD} ORDER BY n"
        return await self._run(lambda conn: [_job(r) for r in conn.execute(sql, _HELD_ARGS).fetchall()])

    async def recover(self, detail: str, log: str | None = None, keep: Iterable[str] = ()) -> list[Job]:
        """Mark every job a worker held (see :meth:`held`) interrupted, but those in ``keep``
        (the caller resumes them).

        Called once at start: those jobs' controller is gone. With ``log``, a ``log`` event
        (source ``controller``) is written before the terminal ``state`` event, in the same
        transaction. Returns the jobs, interrupted.
        """
        error = JobError.of("interrupted", detail)
        select = f"SELECT {_COLUMNS} FROM jobs WHERE id = ?"
        kept = set(keep)

        def op(conn: sqlite3.Connection) -> list[Job]:
            rows = conn.execute(f"SELECT id, state FROM jobs WHERE {_HELD} ORDER BY n", _HELD_ARGS).fetchall()
            rows = [(job_id, state) for job_id, state in rows if job_id not in kept]
            now = utcnow()
            for job_id, state in rows:
                if log is not None:
                    self._append(conn, job_id, LogLine(level="warn", message=log, source="controller"), now)
                conn.execute(
                    "UPDATE jobs SET state = ?, finished_at = ?, error = ? WHERE id = ?",
                    (JobState.INTERRUPTED.value, now.timestamp(), error.model_dump_json(), job_id),
                )
                changed = StateChanged(
                    state=JobState.INTERRUPTED, previous=JobState(state), detail=detail, error=error
                )
                self._append(conn, job_id, changed, now)
            return [_job(conn.execute(select, (job_id,)).fetchone()) for job_id, _ in rows]

        return await self._run(op)

    # -- reading ---------------------------------------------------------------------------

    async def get(self, job_id: str, tenant: str | None = None) -> Job | None:
        """The job, or None (also when it is not ``tenant``'s, decided by the same query)."""
        sql, args = f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", [job_id]
        if tenant is not None:
            sql, args = sql + " AND tenant = ?", [job_id, tenant]

        def op(conn: sqlite3.Connection) -> Job | None:
            row = conn.execute(sql, args).fetchone()
            return _job(row) if row is not None else None

        return await self._run(op)

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
        sql = f"SELECT {_COLUMNS} FROM jobs"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY n DESC LIMIT ?"
        args.append(max(1, min(f.limit, 1000)))
        return await self._run(lambda conn: [_job(r) for r in conn.execute(sql, args).fetchall()])

    async def tenant_use(self, tenant: str, counted: frozenset[str] = COUNTED) -> Usage:
        """What ``tenant`` uses now of what its quotas limit (of the quotas in ``counted``)."""
        return await self._run(lambda conn: measure(conn, tenant, utcnow(), counted))

    async def record_audit(self, entry: AuditRecord) -> int:
        """Append one entry to the audit log; its ``seq``."""
        return await self._run(lambda conn: _audit_log.insert(conn, entry))

    async def audit_quotas(self, quotas: str, source: str) -> AuditRecord | None:
        """Audit the tenants' ``quotas`` (JSON) if they changed since last audited."""
        return await self._run(lambda conn: _audit_log.quota_change(conn, quotas, source, utcnow()))

    async def audit(self, where: AuditFilter) -> list[AuditRecord]:
        """Audit entries matching ``where``, newest first."""
        return await self._run(lambda conn: _audit_log.select(conn, where))

    async def queued(self) -> list[Job]:
        """Submitted jobs waiting for a worker, oldest first."""
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE state = ? AND origin = 'submit' ORDER BY n"
        return await self._run(lambda conn: [_job(r) for r in conn.execute(sql, (JobState.QUEUED.value,))])

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
        return await self._run(lambda conn: [_event(r) for r in conn.execute(sql, args).fetchall()])

    async def signals(self, workflow: str) -> list[dict[str, JsonValue]]:
        """The signals recorded for ``workflow``, oldest first."""
        sql = "SELECT signal_type, data, source_job, time FROM signals WHERE workflow = ? ORDER BY n"

        def op(conn: sqlite3.Connection) -> list[dict[str, JsonValue]]:
            return [
                {"signal_type": r[0], "data": json.loads(r[1]), "source_job": r[2], "time": r[3]}
                for r in conn.execute(sql, (workflow,)).fetchall()
            ]

        return await self._run(op)


def _new_row(job: Job) -> tuple[Any, ...]:
    """A new job's row, in :data:`_COLUMNS` order."""
    fixed_point = job.fixed_point.model_dump_json() if job.fixed_point is not None else None
    return (
        job.id,
        job.agent,
        job.state.value,
        job.queue,
        job.parent_id,
        job.origin,
        job.workflow,
        job.session,
        job.input.model_dump_json(),
        None,
        None,
        job.created_at.timestamp(),
        None,
        None,
        job.max_duration_ms,
        "[]",
        None,
        0,
        None,
        fixed_point,
        job.tenant,
        job.owner,
    )
