"""KeptSandboxes over a real SQLite job store, without boxes: what a restart, the idle sweep
and a changed agent do to the rows (the boxes themselves: tests/integration/test_sandboxes_controller.py
and tests/unit/cli/test_cli_sandboxes.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from airlock.config import load_config
from airlock.controller import AgentRunner, SqliteJobStore
from airlock.controller import _store_sandboxes as rows
from airlock.controller._blobs import DirBlobStore
from airlock.controller._sandboxes import KeptSandboxes, SandboxRefused, spec_digest
from airlock.jobs import SandboxInfo, utcnow


def _config(tmp_path: Path, system: str) -> AgentRunner:
    (tmp_path / "s.yaml").write_text("steps: []\n")
    agent = {"provider": {"kind": "scripted", "script": "s.yaml"}, "backend": "process", "system": system}
    (tmp_path / "airlock.yaml").write_text(yaml.safe_dump({"version": 1, "agents": {"a": agent}}))
    return AgentRunner(load_config(tmp_path / "airlock.yaml"))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteJobStore]:
    async with SqliteJobStore(tmp_path / "jobs.db") as opened:
        yield opened


async def _row(store: SqliteJobStore, runner: AgentRunner, sandbox_id: str, **changes: object) -> SandboxInfo:
    now = utcnow()
    info = SandboxInfo(
        id=sandbox_id,
        agent="a",
        tenant="t",
        owner="o",
        state="running",
        created_at=now,
        last_used_at=now,
        spec_digest=spec_digest(runner.agent("a")),
    ).model_copy(update=changes)
    await store.run(rows.insert(info, "gone-replica"))
    return info


def _kept(store: SqliteJobStore, runner: AgentRunner, tmp_path: Path, **options: float) -> KeptSandboxes:
    return KeptSandboxes(store, runner, DirBlobStore(tmp_path / "blobs"), "r1", shared=False, **options)


async def test_after_a_restart_every_running_sandbox_is_paused_with_its_last_snapshot(
    tmp_path: Path, store: SqliteJobStore
) -> None:
    runner = _config(tmp_path, "one")
    await _row(store, runner, "sbx-1", manifest="sha256:" + "a" * 64)
    await _row(store, runner, "sbx-2", state="paused")
    kept = _kept(store, runner, tmp_path)
    await kept.recover()
    listed = {s.id: (s.state, s.manifest) for s in await kept.listed("t")}
    assert listed == {"sbx-1": ("paused", "sha256:" + "a" * 64), "sbx-2": ("paused", None)}


async def test_the_sweep_removes_only_sandboxes_idle_past_their_ttl(
    tmp_path: Path, store: SqliteJobStore
) -> None:
    runner = _config(tmp_path, "one")
    old = utcnow() - timedelta(hours=2)
    await _row(store, runner, "sbx-idle", ttl_s=3600.0, last_used_at=old, state="paused")
    await _row(store, runner, "sbx-fresh", ttl_s=3600.0, state="paused")
    await _row(store, runner, "sbx-forever", last_used_at=old, state="paused")
    kept = _kept(store, runner, tmp_path, sweep_s=0.05)
    kept.start()
    try:
        deadline = time.monotonic() + 10
        while "sbx-idle" in {s.id for s in await kept.listed(None)}:
            assert time.monotonic() < deadline, "the sweep never removed the idle sandbox"
            await asyncio.sleep(0.05)
    finally:
        await kept.aclose()
    assert sorted(s.id for s in await kept.listed(None)) == ["sbx-forever", "sbx-fresh"]


async def test_a_changed_agent_no_longer_runs_in_its_sandbox_and_replicas_refuse_them(
    tmp_path: Path, store: SqliteJobStore
) -> None:
    await _row(store, _config(tmp_path, "one"), "sbx-1", state="paused")
    changed = _config(tmp_path, "two")  # the agent's system prompt changed since
    kept = _kept(store, changed, tmp_path)
    with pytest.raises(SandboxRefused, match="configuration changed since"):
        await kept.admit("sbx-1", changed.agent("a"), "t")
    with pytest.raises(SandboxRefused, match="configuration changed since"):
        await kept.resume("sbx-1", "t")
    shared = KeptSandboxes(store, changed, DirBlobStore(tmp_path / "blobs"), "r1", shared=True)
    with pytest.raises(SandboxRefused, match="single controller"):
        await shared.create("a", ttl_s=None, tenant="t", owner="o")
    with pytest.raises(SandboxRefused, match="TTL must be positive"):
        await kept.create("a", ttl_s=0, tenant="t", owner="o")
