"""Schema v6 (workspaces) on both engines: the rows the intake, checkpoints and forks use, and
the upgrade of a version-5 store (its jobs and checkpoints kept)."""

from __future__ import annotations

from airlock.controller import JobStore, _migrate
from airlock.policy import ManifestEntry, WorkspaceManifest
from airlock.state import Op, execute, fetch_all, fetch_one
from layer0 import TurnInput
from tests.support.job_stores import StoreSite, count_rows

MANIFEST = WorkspaceManifest.of([ManifestEntry(path="a/b.txt", sha256="a" * 64, size=3, executable=True)])

#: What turns a version-6 store back into a version-5 one (the v6 tables, columns and index).
_DOWNGRADE = (
    "DROP INDEX jobs_forked_from",
    "DROP INDEX sandboxes_tenant",
    "ALTER TABLE jobs DROP COLUMN forked_from",
    "ALTER TABLE jobs DROP COLUMN fork_point",
    "ALTER TABLE jobs DROP COLUMN sandbox_id",
    "ALTER TABLE checkpoints DROP COLUMN manifest",
    "DROP TABLE workspace_blobs",
    "DROP TABLE workspace_manifests",
    "DROP TABLE checkpoint_log",
    "DROP TABLE sandboxes",
)


async def _columns(store: JobStore, site: StoreSite, table: str) -> set[str]:
    def op() -> Op[set[str]]:
        if site.engine == "sqlite":
            rows = yield from fetch_all(f"SELECT name FROM pragma_table_info('{table}')")
        else:
            rows = yield from fetch_all(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = ?",
                table,
            )
        return {str(r[0]) for r in rows}

    return await store.run(op())


async def test_workspace_rows(site: StoreSite) -> None:
    async with site.open() as store:
        job, _ = await store.create(agent="a", input=TurnInput.new("hi"), tenant="acme")
        assert await store.checkpoint_manifest(job.id) is None
        await store.save_checkpoint(job.id, '{"s": 1}', ["c1"], manifest=MANIFEST.digest)
        assert await store.checkpoint(job.id) == ('{"s": 1}', ["c1"])
        assert await store.checkpoint_manifest(job.id) == MANIFEST.digest
        await store.save_checkpoint(job.id, '{"s": 2}', [])  # no manifest: the previous one stays
        assert await store.checkpoint_manifest(job.id) == MANIFEST.digest

        assert await store.log_checkpoint(job.id, '{"d": 1}', ["c1"], None, None) == 1
        assert await store.log_checkpoint(job.id, '{"d": 2}', [], MANIFEST.digest, f"{job.id}:3") == 2
        log = await store.checkpoint_log(job.id)
        assert [(r.seq, r.delta, r.started, r.manifest, r.record) for r in log] == [
            (1, '{"d": 1}', ["c1"], None, None),
            (2, '{"d": 2}', [], MANIFEST.digest, f"{job.id}:3"),
        ]
        assert [r.seq for r in await store.checkpoint_log(job.id, upto=1)] == [1]
        assert await store.checkpoint_log("nope") == []

        await store.put_manifest("acme", MANIFEST)
        await store.put_manifest("acme", MANIFEST)  # idempotent
        assert await store.manifest("acme", MANIFEST.digest) == MANIFEST
        assert await store.manifest("other", MANIFEST.digest) is None
        await store.note_blob("acme", "a" * 64, 3, 11)
        await store.note_blob("acme", "a" * 64, 3, 11)
        assert await count_rows(store, "workspace_blobs") == 1
        usage = await store.workspace_usage()
        assert [(t.tenant, t.blobs, t.stored, t.plain) for t in usage.tenants] == [("acme", 1, 11, 3)]
        assert [(a.tenant, a.agent, a.manifests, a.blobs, a.plain, a.stored) for a in usage.agents] == [
            ("acme", "a", 1, 1, 3, 11)
        ]


async def test_a_version_5_store_is_upgraded(site: StoreSite) -> None:
    async with site.open() as store:
        job, _ = await store.create(agent="a", input=TurnInput.new("hi"))
        await store.save_checkpoint(job.id, '{"s": 1}', ["c1"])
        for statement in _DOWNGRADE:
            await store.run(execute(statement))
        assert "manifest" not in await _columns(store, site, "checkpoints")
    await site.set_schema_version(5)
    async with site.open() as store:
        assert await store.get(job.id) is not None
        assert await store.checkpoint(job.id) == ('{"s": 1}', ["c1"])
        assert await store.checkpoint_manifest(job.id) is None
        assert {"forked_from", "fork_point", "sandbox_id"} <= await _columns(store, site, "jobs")
        assert "manifest" in await _columns(store, site, "checkpoints")
        for table in ("workspace_blobs", "workspace_manifests", "checkpoint_log", "sandboxes"):
            assert await count_rows(store, table) == 0
        assert await store.log_checkpoint(job.id, "{}", [], None, None) == 1

        def version() -> Op[int]:
            if site.engine == "sqlite":
                row = yield from fetch_one("PRAGMA user_version")
            else:
                row = yield from fetch_one("SELECT version FROM airlock_schema WHERE component = 'jobs'")
            assert row is not None
            return int(row[0])

        assert await store.run(version()) == _migrate.SCHEMA_VERSION == 7
