"""``airlock store usage``: bytes stored by tenant (each blob once) and the bytes each agent's
snapshots name (each content once per agent), read offline from the job store."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from airlock.cli import app
from airlock.controller import SqliteJobStore
from airlock.policy import ManifestEntry, WorkspaceManifest, sha256_hex
from airlock.state import execute
from layer0 import TurnInput


def manifest(*files: tuple[str, bytes]) -> WorkspaceManifest:
    return WorkspaceManifest.of(ManifestEntry(path=p, sha256=sha256_hex(d), size=len(d)) for p, d in files)


A, B, C = b"a" * 1000, b"b" * 3000, b"c" * 5000


async def _fill(path: Path) -> None:
    async with SqliteJobStore(path) as store:
        for tenant, data, stored in (("acme", A, 100), ("acme", B, 300), ("acme", C, 500), ("other", A, 100)):
            await store.note_blob(tenant, sha256_hex(data), len(data), stored)
        one, two = manifest(("x", A), ("y", B)), manifest(("x", A), ("z", C))
        same_as_one = manifest(("copy", A), ("y", B))
        for m in (one, two, same_as_one):
            await store.put_manifest("acme", m)
        await store.put_manifest("other", manifest(("x", A)))
        job1, _ = await store.create(agent="coder", input=TurnInput.new("hi"), tenant="acme")
        await store.save_checkpoint(job1.id, "{}", [], manifest=one.digest)
        await store.log_checkpoint(job1.id, "{}", [], two.digest, None)
        job2, _ = await store.create(agent="coder", input=TurnInput.new("hi"), tenant="acme")
        await store.log_checkpoint(job2.id, "{}", [], one.digest, None)
        job3, _ = await store.create(agent="writer", input=TurnInput.new("hi"), tenant="acme")
        await store.save_checkpoint(job3.id, "{}", [], manifest=same_as_one.digest)
        job4, _ = await store.create(agent="coder", input=TurnInput.new("hi"), tenant="other")
        await store.save_checkpoint(job4.id, "{}", [])  # no snapshot: named by no agent
        await store.run(
            execute(
                "INSERT INTO sandboxes (id, tenant, owner, agent, spec_digest, state, manifest, ttl_s, "
                "created_at, last_used_at, replica) VALUES ('sb', 'other', NULL, 'boxed', 'x', 'paused', ?, "
                "NULL, 0, 0, NULL)",
                manifest(("x", A)).digest,
            )
        )


async def test_usage_sums(tmp_path: Path) -> None:
    await _fill(tmp_path / "jobs.db")
    async with SqliteJobStore(tmp_path / "jobs.db") as store:
        usage = await store.workspace_usage()
    assert [(t.tenant, t.blobs, t.stored, t.plain) for t in usage.tenants] == [
        ("acme", 3, 900, 9000),
        ("other", 1, 100, 1000),
    ]
    assert [(a.tenant, a.agent, a.manifests, a.blobs, a.plain, a.stored) for a in usage.agents] == [
        ("acme", "coder", 2, 3, 9000, 900),  # A counted once though two manifests name it
        ("acme", "writer", 1, 2, 4000, 400),
        ("other", "boxed", 1, 1, 1000, 100),
    ]


def test_the_cli_prints_usage(tmp_path: Path) -> None:
    asyncio.run(_fill(tmp_path / "jobs.db"))
    result = CliRunner().invoke(app, ["store", "usage", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()]
    assert ["acme", "3", "900", "B", "8.8", "KiB"] in rows
    assert ["acme", "coder", "2", "3", "8.8", "KiB", "900", "B"] in rows
    assert ["other", "boxed", "1", "1", "1000", "B", "100", "B"] in rows
    missing = CliRunner().invoke(app, ["store", "usage", "--data-dir", str(tmp_path / "none")])
    assert missing.exit_code == 1 and "no job store at" in missing.output
