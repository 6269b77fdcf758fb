"""``airlock store backup|restore --store DSN``: a PostgreSQL store's tables (jobs, state, API
keys) copied consistently into one SQLite file while replicas write, and loaded back into a
database whose controllers are stopped (identical rows; a newer copy, a running replica and a
database holding records refused; what ``--replace`` replaces is kept)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import stat
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.controller import (
    JobStoreError,
    PostgresJobStore,
    _migrate,
    backup_postgres_store,
    restore_postgres_store,
)
from airlock.identity import KeyStore, RoleBook
from airlock.jobs import AuditRecord, LogLine, utcnow
from airlock.policy import ManifestEntry, WorkspaceManifest, sha256_hex
from airlock.state import DatabaseError, PostgresDatabase, PostgresStateStore
from layer0 import LogLevel, Scope, TurnInput
from tests.support import postgres

TABLES = (
    "jobs",
    "events",
    "signals",
    "checkpoints",
    "job_files",
    "audit",
    "replicas",
    "state",
    "api_keys",
    "checkpoint_log",
    "workspace_manifests",
    "workspace_blobs",
)
BINARY = bytes(range(256)) * 3
#: The job tables' version of an airlock newer than this one.
NEWER = _migrate.SCHEMA_VERSION + 1


@pytest.fixture
def second_dsn(postgres_server: postgres.PostgresServer) -> Iterator[str]:
    """Another fresh database on the session's server (where backups are restored)."""
    yield from postgres.fresh_database(postgres_server)


@dataclass
class Site:
    jobs: PostgresJobStore
    state: PostgresStateStore
    keys: KeyStore


@contextlib.asynccontextmanager
async def opened(dsn: str) -> AsyncIterator[Site]:
    """The stores of a replica on ``dsn`` (tables created or upgraded)."""
    async with (
        PostgresDatabase(dsn) as db,
        PostgresJobStore(db) as jobs,
        PostgresStateStore(db) as state,
        KeyStore.on(db, RoleBook({})) as keys,
    ):
        yield Site(jobs, state, keys)


async def populate(dsn: str, text: str = "hello") -> str:
    """Records of every kind in ``dsn``: the id of the job written (and the API key's text)."""
    async with opened(dsn) as site:
        job, _ = await site.jobs.create(
            agent="a", input=TurnInput.new(text), files=[("in/data.bin", BINARY), ("notes.txt", b"n")]
        )
        await site.jobs.append(job.id, LogLine(level=LogLevel.INFO, message="é ✓", source="test"))
        manifest = WorkspaceManifest.of([ManifestEntry(path="a.txt", sha256=sha256_hex(b"a"), size=1)])
        await site.jobs.save_checkpoint(job.id, '{"messages": []}', ["call-1"], manifest=manifest.digest)
        await site.jobs.log_checkpoint(
            job.id, '{"d": 1}', ["call-1"], manifest=manifest.digest, record=f"{job.id}:2"
        )
        await site.jobs.put_manifest("acme", manifest)
        await site.jobs.note_blob("acme", sha256_hex(b"a"), 1, 9)
        await site.jobs.record_signal("wf-1", "go", {"n": 1}, job.id)
        await site.jobs.record_audit(
            AuditRecord(time=utcnow(), principal="ann", tenant="acme", action="SubmitJob", outcome="OK")
        )
        await site.state.write(Scope.session("s1"), "k", {"v": [1, 2.5, "x"]})
        await site.keys.create("alice", "acme", ["viewer"], created_by="admin", expires_at=None)
        return job.id


async def rows(dsn: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every airlock table's rows (sorted), and the schema versions."""
    import psycopg

    found: dict[str, list[tuple[Any, ...]]] = {}
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        for table in (*TABLES, "airlock_schema"):
            cursor = await conn.execute(f"SELECT * FROM {table}")
            found[table] = sorted(await cursor.fetchall(), key=repr)
    return found


async def _tables(dsn: str) -> list[str]:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cursor = await conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        return [r[0] for r in await cursor.fetchall()]


async def sql(dsn: str, statement: str, *args: Any) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(statement, args or None)


async def test_a_round_trip_into_an_empty_database_gives_identical_rows(
    postgres_dsn: str, second_dsn: str, tmp_path: Path
) -> None:
    job_id = await populate(postgres_dsn)
    async with opened(postgres_dsn) as site:
        await site.jobs.register("10.0.0.1:7000")
        await site.jobs.leave()
        await site.jobs.register("10.0.0.2:7000")  # a replica that died (its heartbeat is kept)
    made = await backup_postgres_store(postgres_dsn, tmp_path / "copy.bak")
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o600
    with contextlib.closing(sqlite3.connect(made)) as copy:  # sqlite3 reads it as it is
        assert copy.execute("SELECT id FROM jobs").fetchall() == [(job_id,)]
        assert copy.execute("SELECT data FROM job_files WHERE path = 'in/data.bin'").fetchone() == (BINARY,)
        versions = dict(copy.execute("SELECT component, version FROM airlock_backup").fetchall())
    assert versions == {"jobs": _migrate.SCHEMA_VERSION, "state": 1, "keys": 1}
    assert await restore_postgres_store(second_dsn, made, force=True) is None
    before, after = await rows(postgres_dsn), await rows(second_dsn)
    assert after == before and all(after[t] for t in TABLES)
    async with opened(second_dsn) as site:  # the identity sequences go on past the restored rows
        await site.jobs.create(agent="a", input=TurnInput.new("next"))
        seq = await site.jobs.record_audit(
            AuditRecord(time=utcnow(), principal="bob", tenant="acme", action="X", outcome="OK")
        )
        assert seq == 2 and (await site.jobs.input_files(job_id))[0] == ("in/data.bin", BINARY)
        assert len(await site.keys.list("acme")) == 1


async def test_the_backup_is_one_snapshot_while_writes_go_on(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airlock.state import _pg_backup

    await populate(postgres_dsn)
    copy_table = _pg_backup._copy_table
    async with opened(postgres_dsn) as site:
        written: list[str] = []

        async def meanwhile(conn: Any, writer: Any, table: str) -> None:
            await copy_table(conn, writer, table)
            if table == "jobs":  # a replica records a job (and its first event) mid-copy
                job, _ = await site.jobs.create(agent="a", input=TurnInput.new("late"))
                written.append(job.id)

        monkeypatch.setattr(_pg_backup, "_copy_table", meanwhile)
        made = await backup_postgres_store(postgres_dsn, tmp_path / "copy.bak")
        assert written
    with contextlib.closing(sqlite3.connect(made)) as copy:
        jobs = {r[0] for r in copy.execute("SELECT id FROM jobs")}
        events = {r[0] for r in copy.execute("SELECT job_id FROM events")}
    assert written[0] not in jobs | events and jobs == events


async def test_a_backup_newer_than_this_airlock_is_refused(
    postgres_dsn: str, second_dsn: str, tmp_path: Path
) -> None:
    await populate(postgres_dsn)
    made = await backup_postgres_store(postgres_dsn, tmp_path / "copy.bak")
    with contextlib.closing(sqlite3.connect(made)) as copy, copy:
        copy.execute(f"UPDATE airlock_backup SET version = {NEWER} WHERE component = 'jobs'")
    with pytest.raises(
        ValueError, match=rf"taken by a newer airlock: jobs v{NEWER} \(this airlock: v{NEWER - 1}\)"
    ):
        await restore_postgres_store(second_dsn, made)
    with contextlib.closing(sqlite3.connect(tmp_path / "jobs.db")) as other, other:
        other.execute("CREATE TABLE jobs (n INTEGER)")
    with pytest.raises(ValueError, match=r"jobs\.db is not an airlock store backup: no such table"):
        await restore_postgres_store(second_dsn, tmp_path / "jobs.db", force=True)
    with pytest.raises(ValueError, match="no backup at"):
        await restore_postgres_store(second_dsn, tmp_path / "missing.bak", force=True)
    assert (await rows(postgres_dsn))["jobs"] and not await _tables(second_dsn)


async def test_a_running_replica_refuses_the_restore(
    postgres_dsn: str, second_dsn: str, tmp_path: Path
) -> None:
    await populate(postgres_dsn)
    made = await backup_postgres_store(postgres_dsn, tmp_path / "copy.bak")
    async with opened(second_dsn) as site:
        await site.jobs.register("10.0.0.7:7000")
        replica = site.jobs.claims.replica
        with pytest.raises(
            ValueError, match=f"still running: {replica} \\(10.0.0.7:7000, heartbeat 0 s ago\\)"
        ):
            await restore_postgres_store(second_dsn, made)
        assert await rows(second_dsn) != await rows(postgres_dsn)
    await restore_postgres_store(second_dsn, made, force=True)  # a heartbeat is no record
    restored = await rows(second_dsn)
    assert restored["jobs"] == (await rows(postgres_dsn))["jobs"]


async def test_replace_keeps_the_replaced_rows(postgres_dsn: str, second_dsn: str, tmp_path: Path) -> None:
    await populate(postgres_dsn, "from the backup")
    made = await backup_postgres_store(postgres_dsn, tmp_path / "copy.bak")
    await populate(second_dsn, "already there")
    there = await rows(second_dsn)
    with pytest.raises(DatabaseError, match=r"holds records \(jobs, events, .*\): restore into an empty"):
        await restore_postgres_store(second_dsn, made, force=True)
    assert await rows(second_dsn) == there
    kept = await restore_postgres_store(second_dsn, made, replace=True, force=True)
    assert kept is not None and kept.name.startswith("copy.bak.replaced-")
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    assert await rows(second_dsn) == await rows(postgres_dsn)
    again = await restore_postgres_store(second_dsn, kept, replace=True, force=True)  # and back
    assert again is not None and await rows(second_dsn) == there


async def test_replace_rolls_back_tables_a_newer_airlock_upgraded(
    postgres_dsn: str, second_dsn: str, tmp_path: Path
) -> None:
    job_id = await populate(postgres_dsn)
    made = await backup_postgres_store(postgres_dsn, tmp_path / "copy.bak")
    await restore_postgres_store(second_dsn, made, force=True)
    await sql(second_dsn, "ALTER TABLE jobs ADD COLUMN newer TEXT DEFAULT 'x'")
    await sql(second_dsn, f"UPDATE airlock_schema SET version = {NEWER} WHERE component = 'jobs'")
    with pytest.raises(JobStoreError) as refused:
        async with opened(second_dsn):
            pass
    assert "`airlock store restore --store DSN --replace FILE`" in str(refused.value)
    assert "`airlock store backup --store DSN FILE`" in str(refused.value)
    kept = await restore_postgres_store(second_dsn, made, replace=True, force=True)
    assert kept is not None
    with contextlib.closing(sqlite3.connect(kept)) as copy:  # the newer tables, nothing lost
        assert copy.execute("SELECT version FROM airlock_backup WHERE component = 'jobs'").fetchone() == (
            NEWER,
        )
        assert copy.execute("SELECT newer FROM jobs").fetchall() == [("x",)]
    assert await rows(second_dsn) == await rows(postgres_dsn)
    async with opened(second_dsn) as site:  # this airlock opens the rolled back tables
        assert await site.jobs.get(job_id) is not None


def flat(output: str) -> str:
    """The CLI's output, its line breaks (the console's width) undone."""
    return " ".join(output.split())


def test_the_cli_backs_up_and_restores(
    postgres_dsn: str, second_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asyncio.run(populate(postgres_dsn))
    runner = CliRunner()
    target = tmp_path / "copy.bak"
    made = runner.invoke(app, ["store", "backup", str(target)], env={"AIRLOCK_STORE": postgres_dsn})
    assert made.exit_code == 0, made.output
    assert f"backed up to {target}" in made.output.replace("\n", "")
    again = runner.invoke(app, ["store", "backup", str(target)], env={"AIRLOCK_STORE": postgres_dsn})
    assert again.exit_code == 1 and "exists" in again.output  # never overwritten
    asyncio.run(populate(second_dsn, "already there"))
    refused = runner.invoke(app, ["store", "restore", "--store", second_dsn, str(target)])
    assert refused.exit_code == 1 and "pass --replace" in flat(refused.output)
    done = runner.invoke(app, ["store", "restore", "--store", second_dsn, "--replace", "--yes", str(target)])
    assert done.exit_code == 0, done.output
    assert "the replaced records are kept at" in flat(done.output) and "test:***@" in done.output
    assert asyncio.run(rows(second_dsn)) == asyncio.run(rows(postgres_dsn))
    asyncio.run(
        sql(second_dsn, "INSERT INTO replicas VALUES ('r-live', '10.0.0.9:7000', 0, %s)", time.time())
    )
    running = runner.invoke(
        app, ["store", "restore", "--store", second_dsn, "--replace", "--yes", str(target)]
    )
    assert (
        running.exit_code == 1 and "r-live (10.0.0.9:7000" in running.output and "--force" in running.output
    )
    monkeypatch.chdir(tmp_path)
    default = runner.invoke(app, ["store", "backup", "--store", postgres_dsn])
    assert default.exit_code == 0 and len(list(tmp_path.glob("airlock-store-*.bak"))) == 1
    bad = runner.invoke(app, ["store", "backup", "--store", "mysql://x"])
    assert bad.exit_code == 1 and "not a PostgreSQL URI" in bad.output
