"""Mark and sweep of a tenant's workspace blobs, after retention removed job trees.

Marked (kept): the manifests named by a checkpoint (``checkpoints``, ``checkpoint_log``) of
one of the tenant's jobs or by one of its sandboxes, and every blob their entries name. A
manifest named by none is removed once older than the grace period; then a blob named by no
remaining manifest is removed once older than it too. The grace period (1 h by default)
covers a snapshot under way: its blobs and manifest are written before the checkpoint that
names them, and a blob reused by a new snapshot is noted again (its time refreshed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from airlock.state import Op, execute, fetch_all

from ._blobs import BlobStore
from ._store import JobStore

__all__ = ["GRACE_S", "BlobGc", "SweepReport"]

#: How old an unreferenced manifest or blob must be before a sweep removes it (seconds).
GRACE_S = 3600.0

_NAMED = (
    "SELECT c.manifest FROM checkpoints c JOIN jobs j ON j.id = c.job_id "
    "WHERE j.tenant = ? AND c.manifest IS NOT NULL "
    "UNION SELECT l.manifest FROM checkpoint_log l JOIN jobs j ON j.id = l.job_id "
    "WHERE j.tenant = ? AND l.manifest IS NOT NULL "
    "UNION SELECT manifest FROM sandboxes WHERE tenant = ? AND manifest IS NOT NULL"
)


@dataclass
class SweepReport:
    """What a sweep removed."""

    manifests: int = 0
    blobs: int = 0
    bytes: int = 0


def entry_hashes(entries_json: str) -> set[str]:
    """The content hashes a stored manifest's entries name."""
    return {str(e["sha256"]) for e in json.loads(entries_json)["entries"]}


def _mark(tenant: str, before: float) -> Op[tuple[int, set[str]]]:
    """Remove the tenant's unnamed manifests older than ``before``; how many, and the hashes
    the remaining ones name."""
    named = yield from fetch_all(_NAMED, tenant, tenant, tenant)
    keep = {str(r[0]) for r in named}
    rows = yield from fetch_all(
        "SELECT digest, entries, created_at FROM workspace_manifests WHERE tenant = ?", tenant
    )
    hashes: set[str] = set()
    dropped = 0
    for row in rows:
        digest, entries, created = str(row[0]), str(row[1]), float(row[2])
        if digest in keep or created >= before:
            hashes |= entry_hashes(entries)
            continue
        yield from execute("DELETE FROM workspace_manifests WHERE tenant = ? AND digest = ?", tenant, digest)
        dropped += 1
    return dropped, hashes


def _noted(tenant: str) -> Op[dict[str, tuple[float, int]]]:
    rows = yield from fetch_all(
        "SELECT sha256, created_at, stored FROM workspace_blobs WHERE tenant = ?", tenant
    )
    return {str(r[0]): (float(r[1]), int(r[2])) for r in rows}


class BlobGc:
    """Sweeps a tenant's blobs (see the module).

    Args:
        store: the job store (manifests, blob rows, what names them).
        blobs: the blob store.
        grace_s: how old an unreferenced manifest or blob must be to go.
        now: the clock (seconds since the epoch).
    """

    def __init__(
        self,
        store: JobStore,
        blobs: BlobStore,
        *,
        grace_s: float = GRACE_S,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.blobs, self.grace_s, self.now = store, blobs, grace_s, now

    async def tenants(self) -> list[str]:
        """Every tenant holding workspace rows."""

        def op() -> Op[list[str]]:
            rows = yield from fetch_all(
                "SELECT tenant FROM workspace_blobs UNION SELECT tenant FROM workspace_manifests"
            )
            return sorted(str(r[0]) for r in rows)

        return await self.store.run(op())

    async def sweep(self, tenant: str) -> SweepReport:
        """Remove the tenant's unreferenced manifests, then its unreferenced blobs."""
        before = self.now() - self.grace_s
        report = SweepReport()
        report.manifests, keep = await self.store.run(_mark(tenant, before))
        noted = await self.store.run(_noted(tenant))
        found = {sha: when async for sha, when in self.blobs.names(tenant)}
        for sha in sorted((set(found) | set(noted)) - keep):
            row_time, stored = noted.get(sha, (0.0, 0))
            if max(found.get(sha, 0.0), row_time) >= before:
                continue
            if sha in found:
                await self.blobs.delete(tenant, sha)
            await self.store.run(
                execute("DELETE FROM workspace_blobs WHERE tenant = ? AND sha256 = ?", tenant, sha)
            )
            report.blobs += 1
            report.bytes += stored
        return report

    async def sweep_all(self, tenants: list[str] | None = None) -> SweepReport:
        """Sweep ``tenants`` (None: every tenant holding workspace rows)."""
        total = SweepReport()
        for tenant in tenants if tenants is not None else await self.tenants():
            one = await self.sweep(tenant)
            total.manifests += one.manifests
            total.blobs += one.blobs
            total.bytes += one.bytes
        return total
