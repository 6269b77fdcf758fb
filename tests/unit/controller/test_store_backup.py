"""An upgrade that changes the job store's schema keeps a copy first, and a rollback can use it.

Without the copy, an older controller started on an upgraded store (``helm rollback``) can
only refuse it, at every restart. With it: the upgrade leaves ``jobs.db.schema-v<N>-TIME.bak``
beside the store (private, consistent), the older controller's refusal names that copy and the
command that puts it back, and ``airlock store restore`` does so, keeping the replaced store.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from airlock.cli import app
from airlock.controller import JobStoreError, SqliteJobStore, _migrate, backups
from tests.unit.controller.test_job_events_typed import _write_old_file


def _schema(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])


async def test_an_upgrade_keeps_a_private_copy_of_the_store_before_it(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    _write_old_file(path)
    async with SqliteJobStore(path) as store:
        assert await store.get("j-old") is not None
    (kept,) = backups(path)
    assert kept.version == 0 and _schema(kept.path) == 0 and _schema(path) == _migrate.SCHEMA_VERSION
    assert stat.S_IMODE(os.stat(kept.path).st_mode) == 0o600
    with sqlite3.connect(kept.path) as conn:
        assert conn.execute("SELECT id FROM jobs").fetchall() == [("j-old",)]
    async with SqliteJobStore(path):  # already upgraded: no second copy
        pass
    assert len(backups(path)) == 1


async def test_a_fresh_store_makes_no_copy(tmp_path: Path) -> None:
    async with SqliteJobStore(tmp_path / "jobs.db"):
        pass
    assert backups(tmp_path / "jobs.db") == []


async def test_an_older_controller_names_the_copy_and_the_restore_command(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    _write_old_file(path)
    async with SqliteJobStore(path):
        pass  # upgraded to this version, with a copy of version 0
    with sqlite3.connect(path) as conn:  # as a newer airlock would leave it
        conn.execute(f"PRAGMA user_version = {_migrate.SCHEMA_VERSION + 1}")
    (kept,) = backups(path)
    store = SqliteJobStore(path)
    try:
        with pytest.raises(JobStoreError) as info:
            await store.get("j-old")
    finally:
        await store.aclose()
    message = str(info.value)
    assert "newer than this airlock's" in message and "roll forward" in message
    assert f"airlock store restore --data-dir {tmp_path} {kept.path.name}" in message
    assert "jobs recorded since are lost" in message


def test_restore_puts_the_copy_back_and_keeps_the_replaced_store(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    _write_old_file(path)
    runner = CliRunner()
    made = runner.invoke(app, ["store", "backup", "--data-dir", str(tmp_path)])
    assert made.exit_code == 0, made.output
    (copy,) = backups(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM jobs")
        conn.execute(f"PRAGMA user_version = {_migrate.SCHEMA_VERSION + 1}")
    listed = runner.invoke(app, ["store", "ls", "--data-dir", str(tmp_path)])
    assert copy.path.name in listed.output
    refused = runner.invoke(
        app, ["store", "restore", "--data-dir", str(tmp_path), copy.path.name], input="n\n"
    )
    assert refused.exit_code == 1 and _schema(path) == _migrate.SCHEMA_VERSION + 1
    done = runner.invoke(app, ["store", "restore", "--yes", "--data-dir", str(tmp_path), copy.path.name])
    assert done.exit_code == 0, done.output
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT id FROM jobs").fetchall() == [("j-old",)]
    (replaced,) = tmp_path.glob("jobs.db.replaced-*")
    assert _schema(replaced) == _migrate.SCHEMA_VERSION + 1, "nothing is lost by a wrong choice"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_restore_refuses_what_is_not_a_store_or_is_too_new(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    _write_old_file(path)
    junk = tmp_path / "junk.bak"
    junk.write_text("not sqlite")
    newer = tmp_path / "newer.bak"
    _write_old_file(newer)
    with sqlite3.connect(newer) as conn:
        conn.execute(f"PRAGMA user_version = {_migrate.SCHEMA_VERSION + 1}")
    runner = CliRunner()
    for bad, says in ((junk, "is not a job store"), (newer, "newer than this airlock's")):
        out = runner.invoke(app, ["store", "restore", "--yes", "--data-dir", str(tmp_path), str(bad)])
        assert out.exit_code == 1 and says in " ".join(out.output.split()), out.output
    assert _schema(path) == 0 and not list(tmp_path.glob("jobs.db.replaced-*"))
