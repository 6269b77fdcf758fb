"""Upgrades of the job store's schema (``PRAGMA user_version``), run when a file is opened.

Version 0 (the first controllers) kept each event as a ``kind`` and free JSON ``data``: a turn
event under ``turn``, proxy events under ``egress`` / ``credential_proxy``, an effect's outcome
flattened with its depth and source. Version 1 keeps each event's ``data`` as the JSON of
:data:`~airlock.jobs.JobEventData` (``kind`` inside it; sandbox events under
``sandbox``). Version 2 adds the jobs' ``resumes``, ``approval`` and ``fixed_point`` columns
(the ``checkpoints`` table is created with the schema). Version 3 adds the jobs' ``tenant``
(``default`` for every earlier job) and ``owner`` (none) columns. Version 4 adds ``cost`` (a
finished job's cost, read from its output: what ``cost_per_day`` sums on either engine).
Version 5 adds the claims of controller replicas: ``claimed_by`` and the fencing token ``fence``
(the ``replicas``, ``controls`` and ``effect_ledger`` tables are created with the schema).
Version 6 adds workspaces: the jobs' ``forked_from``, ``fork_point`` and ``sandbox_id``, the
checkpoints' ``manifest`` (the ``workspace_blobs``, ``workspace_manifests``, ``checkpoint_log``
and ``sandboxes`` tables are created with the schema).
Version 7 adds each weave thread's anchor (the ``weave_anchors`` table, created with the schema)
and the jobs' ``weave_tip`` (a finished job's anchor, sealed into its row).
Upgrading rewrites every old row once, in the opening transaction; a row that does not read as
any event (none written by airlock should) becomes a ``log`` line saying so, with the old row in
its ``data``.
"""

from __future__ import annotations

import json
import sqlite3

from pydantic import JsonValue, ValidationError

from airlock.jobs import JOB_EVENT_DATA, EffectOutcome, JobEventData, LogLine

#: The schema version this code writes.
SCHEMA_VERSION = 7

#: Columns versions 2 to 7 added to ``jobs`` (a file created by version 7 has them already).
_NEW_COLUMNS = {
    "resumes": "INTEGER NOT NULL DEFAULT 0",
    "approval": "TEXT",
    "fixed_point": "TEXT",
    "tenant": "TEXT NOT NULL DEFAULT 'default'",
    "owner": "TEXT",
    "cost": "TEXT",
    "claimed_by": "TEXT",
    "fence": "INTEGER NOT NULL DEFAULT 0",
    "forked_from": "TEXT",
    "fork_point": "TEXT",
    "sandbox_id": "TEXT",
    "weave_tip": "TEXT",
}
#: Columns version 6 added to ``checkpoints`` (the manifest of the latest checkpoint).
_NEW_CHECKPOINT_COLUMNS = {"manifest": "TEXT"}

#: What a tenant's listing and its quotas read (version 3).
_TENANT_INDEXES = {
    "jobs_tenant": "tenant, n",
    "jobs_tenant_state": "tenant, state",
    "jobs_tenant_created": "tenant, created_at",
    "jobs_tenant_finished": "tenant, finished_at",
    "jobs_claimed": "claimed_by",
    "jobs_forked_from": "forked_from",
}

_SANDBOX_KINDS = frozenset({"turn", "egress", "credential_proxy"})


def schema_version(conn: sqlite3.Connection) -> int:
    """The file's schema version."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def upgrade(conn: sqlite3.Connection) -> int:
    """Bring a file at an older version to :data:`SCHEMA_VERSION` (inside the caller's
    transaction); how many event rows were rewritten."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(jobs)").fetchall()}
    for column, kind in _NEW_COLUMNS.items():
        if column not in have:
            conn.execute(f"ALTER TABLE jobs ADD COLUMN {column} {kind}")
    kept = {row[1] for row in conn.execute("PRAGMA table_info(checkpoints)").fetchall()}
    for column, kind in _NEW_CHECKPOINT_COLUMNS.items():
        if column not in kept:
            conn.execute(f"ALTER TABLE checkpoints ADD COLUMN {column} {kind}")
    for name, columns in _TENANT_INDEXES.items():
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON jobs({columns})")
    if "cost" not in have:
        conn.execute(
            "UPDATE jobs SET cost = CAST(json_extract(output, '$.metadata.cost') AS TEXT) "
            "WHERE output IS NOT NULL"
        )
    if schema_version(conn) >= 1:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return 0
    rows = conn.execute("SELECT job_id, seq, kind, data FROM events").fetchall()
    for job_id, seq, kind, text in rows:
        data = event_from_v0(kind, text)
        conn.execute(
            "UPDATE events SET kind = ?, data = ? WHERE job_id = ? AND seq = ?",
            (data.kind, JOB_EVENT_DATA.dump_json(data).decode(), job_id, seq),
        )
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return len(rows)


def event_from_v0(kind: str, text: str) -> JobEventData:
    """A version-0 event row (``kind``, JSON ``text``) as the event it recorded."""
    try:
        value: JsonValue = json.loads(text)
        if kind in _SANDBOX_KINDS:
            return JOB_EVENT_DATA.validate_python({"kind": "sandbox", "event": value})
        if not isinstance(value, dict):
            raise ValueError(f"expected a JSON object, got {type(value).__name__}")
        if kind == "effect":
            outcome = {k: v for k, v in value.items() if k in EffectOutcome.model_fields}
            rest = {k: v for k, v in value.items() if k not in EffectOutcome.model_fields}
            return JOB_EVENT_DATA.validate_python({**rest, "kind": "effect", "outcome": outcome})
        return JOB_EVENT_DATA.validate_python({**value, "kind": kind})
    except (ValueError, ValidationError) as e:
        return LogLine(
            level="warn",
            source="controller",
            message=f"a {kind!r} event recorded by an earlier airlock could not be read: {_first_line(e)}",
            data={"kind": kind, "data": text},
        )


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__
