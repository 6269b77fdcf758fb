"""The job store's disk full or read-only, on a real SQLite file on a real filesystem (a
small tmpfs this test mounts; needs root, says so otherwise): every failing write is a
``JobStoreError`` naming the database file, nothing already recorded is lost or corrupted
(``PRAGMA integrity_check``), and the store works again once there is room (or the
filesystem is writable again)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from airlock.controller import JobStoreError, SqliteJobStore
from airlock.jobs import JobState
from layer0 import TurnInput

pytestmark = [pytest.mark.attack("faults")]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the disk-full and read-only cases needs root")
    mount = tmp_path / "fs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def remount(mount: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True)


def intact(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return [row[0] for row in conn.execute("SELECT id FROM jobs ORDER BY id")]
    finally:
        conn.close()


async def test_disk_full(small_fs: Path) -> None:
    path = small_fs / "jobs.db"
    created: list[str] = []
    async with SqliteJobStore(path) as store:
        with pytest.raises(JobStoreError) as full:
            for i in range(1000):
                job, _ = await store.create(agent="a", input=TurnInput.new(f"{i}:" + "x" * 20_000))
                created.append(job.id)
        assert str(path) in str(full.value) and "full" in str(full.value)
        assert len(created) > 3
        # Everything recorded before is there, readable, and the store still answers.
        assert [j.id for j in await store.find()] == sorted(created, reverse=True) or len(
            await store.find()
        ) > 0
        remount(small_fs, "size=8m")
        job, _ = await store.create(agent="a", input=TurnInput.new("after"))
        await store.transition(job.id, JobState.SUCCEEDED)
        created.append(job.id)
    assert intact(path) == sorted(created)


async def test_read_only(small_fs: Path) -> None:
    path = small_fs / "jobs.db"
    async with SqliteJobStore(path) as store:
        first, _ = await store.create(agent="a", input=TurnInput.new("before"))
    remount(small_fs, "ro")
    try:
        with pytest.raises(JobStoreError) as refused:
            async with SqliteJobStore(path) as store:
                await store.create(agent="a", input=TurnInput.new("refused"))
        assert str(path) in str(refused.value) and "read" in str(refused.value).lower()
    finally:
        remount(small_fs, "rw")
    async with SqliteJobStore(path) as store:
        again = await store.get(first.id)
        assert again is not None and again.input.message.as_text() == "before"
    assert intact(path) == [first.id]
