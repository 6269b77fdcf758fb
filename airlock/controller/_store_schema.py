"""The job store's tables: SQLite's (created, then upgraded by ``_migrate``) and PostgreSQL's
(versioned migrations). Both hold the same columns, so one backup format serves both."""

from __future__ import annotations

from . import _audit_log

#: SQLite: every table, at the current version (``CREATE … IF NOT EXISTS``: an older file
#: gets the missing ones, then ``_migrate.upgrade`` adds the missing columns).
SQLITE_SCHEMA = (
    """
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
    owner TEXT,
    cost TEXT,
    claimed_by TEXT,
    fence INTEGER NOT NULL DEFAULT 0,
    forked_from TEXT,
    fork_point TEXT,
    sandbox_id TEXT,
    weave_tip TEXT
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
    time REAL NOT NULL,
    manifest TEXT
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
CREATE TABLE IF NOT EXISTS replicas (
    id TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    started_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS controls (
    n INTEGER PRIMARY KEY AUTOINCREMENT,
    replica TEXT NOT NULL,
    job_id TEXT NOT NULL,
    call TEXT NOT NULL,
    args TEXT NOT NULL,
    created_at REAL NOT NULL,
    answer TEXT
);
CREATE INDEX IF NOT EXISTS controls_replica ON controls(replica, n);
CREATE TABLE IF NOT EXISTS effect_ledger (
    root TEXT NOT NULL,
    address TEXT NOT NULL,
    outcome TEXT NOT NULL,
    PRIMARY KEY (root, address)
);
CREATE TABLE IF NOT EXISTS workspace_blobs (
    tenant TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    stored INTEGER NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, sha256)
);
CREATE TABLE IF NOT EXISTS workspace_manifests (
    tenant TEXT NOT NULL,
    digest TEXT NOT NULL,
    files INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    entries TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, digest)
);
CREATE TABLE IF NOT EXISTS checkpoint_log (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    delta TEXT NOT NULL,
    started TEXT NOT NULL DEFAULT '[]',
    manifest TEXT,
    record TEXT,
    time REAL NOT NULL,
    PRIMARY KEY (job_id, seq)
);
CREATE TABLE IF NOT EXISTS sandboxes (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    owner TEXT,
    agent TEXT NOT NULL,
    spec_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    manifest TEXT,
    ttl_s REAL,
    created_at REAL NOT NULL,
    last_used_at REAL NOT NULL,
    replica TEXT
);
CREATE INDEX IF NOT EXISTS sandboxes_tenant ON sandboxes(tenant, created_at);
CREATE TABLE IF NOT EXISTS weave_anchors (
    root TEXT NOT NULL,
    job TEXT NOT NULL,
    n INTEGER NOT NULL,
    hash TEXT NOT NULL,
    seal TEXT,
    time REAL NOT NULL,
    PRIMARY KEY (root, job)
);
CREATE INDEX IF NOT EXISTS weave_anchors_job ON weave_anchors(job);
"""
    + _audit_log.SCHEMA
)

#: PostgreSQL: version → DDL, applied in order in one transaction (``PostgresDatabase.migrate``).
#: A PostgreSQL store starts at version 4 (the SQLite version whose columns it has). Version 5
#: adds the claims (``claimed_by``, the fencing token ``fence``), the replicas, the control calls
#: relayed to the replica running a job, the ledger of each job tree's applied effects, and the
#: notifications of new events, queued jobs and relayed calls (``LISTEN airlock_events`` /
#: ``airlock_queue`` / ``airlock_controls`` / ``airlock_answers``). Version 6 adds workspaces
#: (issue 40): the blobs and manifests of each tenant, the log of every checkpoint (fork points),
#: the manifest of the latest checkpoint, a job's fork origin and sandbox, and long-lived sandboxes.
#: Version 7 adds each weave thread's anchor (its tip, outside the chain: truncation shows) and
#: a finished job's tip sealed into its row (``weave_tip``).
POSTGRES_MIGRATIONS: dict[int, str] = {
    4: """
CREATE TABLE jobs (
    n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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
    created_at DOUBLE PRECISION NOT NULL,
    started_at DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    max_duration_ms BIGINT,
    children TEXT NOT NULL DEFAULT '[]',
    effects TEXT,
    resumes INTEGER NOT NULL DEFAULT 0,
    approval TEXT,
    fixed_point TEXT,
    tenant TEXT NOT NULL DEFAULT 'default',
    owner TEXT,
    cost TEXT
);
CREATE INDEX jobs_state ON jobs(state, n);
CREATE INDEX jobs_session ON jobs(session, n);
CREATE INDEX jobs_parent ON jobs(parent_id, n);
CREATE INDEX jobs_workflow ON jobs(workflow, n);
CREATE INDEX jobs_tenant ON jobs(tenant, n);
CREATE INDEX jobs_tenant_state ON jobs(tenant, state);
CREATE INDEX jobs_tenant_created ON jobs(tenant, created_at);
CREATE INDEX jobs_tenant_finished ON jobs(tenant, finished_at);
CREATE TABLE events (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    time DOUBLE PRECISION NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (job_id, seq)
);
CREATE TABLE signals (
    n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow TEXT NOT NULL,
    signal_type TEXT NOT NULL,
    data TEXT NOT NULL,
    source_job TEXT,
    time DOUBLE PRECISION NOT NULL
);
CREATE INDEX signals_workflow ON signals(workflow, n);
CREATE TABLE checkpoints (
    job_id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    started TEXT NOT NULL DEFAULT '[]',
    time DOUBLE PRECISION NOT NULL
);
CREATE TABLE job_files (
    job_id TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('input', 'artifact')),
    path TEXT NOT NULL,
    size BIGINT NOT NULL,
    sha256 TEXT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (job_id, kind, path)
);
CREATE TABLE audit (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time DOUBLE PRECISION NOT NULL,
    principal TEXT NOT NULL,
    tenant TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    peer TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_tenant ON audit(tenant, seq);
""",
    5: """
ALTER TABLE jobs ADD COLUMN claimed_by TEXT;
ALTER TABLE jobs ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;
CREATE INDEX jobs_claimed ON jobs(claimed_by);
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL
);
CREATE FUNCTION airlock_event_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('airlock_events', NEW.job_id);
    RETURN NULL;
END $$;
CREATE TRIGGER events_added AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION airlock_event_added();
CREATE FUNCTION airlock_job_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'queued' AND NEW.origin = 'submit' THEN
        PERFORM pg_notify('airlock_queue', NEW.id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_queued AFTER INSERT OR UPDATE OF state ON jobs
    FOR EACH ROW EXECUTE FUNCTION airlock_job_queued();
CREATE TABLE controls (
    n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    replica TEXT NOT NULL,
    job_id TEXT NOT NULL,
    call TEXT NOT NULL,
    args TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    answer TEXT
);
CREATE INDEX controls_replica ON controls(replica, n);
CREATE TABLE effect_ledger (
    root TEXT NOT NULL,
    address TEXT NOT NULL,
    outcome TEXT NOT NULL,
    PRIMARY KEY (root, address)
);
CREATE FUNCTION airlock_control_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('airlock_controls', NEW.replica);
    ELSE
        PERFORM pg_notify('airlock_answers', NEW.n::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER controls_changed AFTER INSERT OR UPDATE OF answer ON controls
    FOR EACH ROW EXECUTE FUNCTION airlock_control_changed();
""",
    6: """
ALTER TABLE jobs ADD COLUMN forked_from TEXT;
ALTER TABLE jobs ADD COLUMN fork_point TEXT;
ALTER TABLE jobs ADD COLUMN sandbox_id TEXT;
CREATE INDEX jobs_forked_from ON jobs(forked_from);
ALTER TABLE checkpoints ADD COLUMN manifest TEXT;
CREATE TABLE workspace_blobs (
    tenant TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size BIGINT NOT NULL,
    stored BIGINT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, sha256)
);
CREATE TABLE workspace_manifests (
    tenant TEXT NOT NULL,
    digest TEXT NOT NULL,
    files INTEGER NOT NULL,
    bytes BIGINT NOT NULL,
    entries TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (tenant, digest)
);
CREATE TABLE checkpoint_log (
    job_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    delta TEXT NOT NULL,
    started TEXT NOT NULL DEFAULT '[]',
    manifest TEXT,
    record TEXT,
    time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (job_id, seq)
);
CREATE TABLE sandboxes (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    owner TEXT,
    agent TEXT NOT NULL,
    spec_digest TEXT NOT NULL,
    state TEXT NOT NULL,
    manifest TEXT,
    ttl_s DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    last_used_at DOUBLE PRECISION NOT NULL,
    replica TEXT
);
CREATE INDEX sandboxes_tenant ON sandboxes(tenant, created_at);
""",
    7: """
CREATE TABLE IF NOT EXISTS weave_anchors (
    root TEXT NOT NULL,
    job TEXT NOT NULL,
    n BIGINT NOT NULL,
    hash TEXT NOT NULL,
    seal TEXT,
    time DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (root, job)
);
CREATE INDEX IF NOT EXISTS weave_anchors_job ON weave_anchors(job);
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS weave_tip TEXT;
""",
}

#: Every table of the job store, in the order a backup copies them.
TABLES = (
    "jobs",
    "events",
    "signals",
    "checkpoints",
    "job_files",
    "audit",
    "replicas",
    "controls",
    "effect_ledger",
    "workspace_blobs",
    "workspace_manifests",
    "checkpoint_log",
    "sandboxes",
    "weave_anchors",
)

#: What the migrations create in PostgreSQL besides the tables (a restore drops it with them).
POSTGRES_DROP = """
DROP FUNCTION IF EXISTS airlock_event_added() CASCADE;
DROP FUNCTION IF EXISTS airlock_job_queued() CASCADE;
DROP FUNCTION IF EXISTS airlock_control_changed() CASCADE;
"""
