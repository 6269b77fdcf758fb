"""The Pruner: removes finished jobs past their retention, once at start and then every hour.

Each batch is one transaction of the job store (``JobStore.prune``, :mod:`._retention`) that
holds ``lock("retention")``: replicas sharing a PostgreSQL store may all run a Pruner, their
batches never interleave, and a tree one removed is not found by the next. The turn records
of each removed tree (its weave, in the state store) are deleted after its batch commits, and
the workspace blobs of its tenant no checkpoint names any more are swept (``_blob_gc``). On
SQLite, the pages the rows held are then given back to the file system (``reclaim``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime

from airlock.identity import AuthSettings, RetentionSettings
from airlock.jobs import utcnow

from ._blob_gc import BlobGc
from ._retention import Cutoffs, PruneReport
from ._store import JobStore
from ._store_sqlite import SqliteJobStore
from ._weaving import Weaves

_log = logging.getLogger("airlock.controller")

#: How often the Pruner runs (seconds).
PRUNE_INTERVAL_S = 3600.0
#: Job trees per transaction.
PRUNE_BATCH = 100


class Pruner:
    """Applies ``retention`` (and the tenants' own, from ``auth``) to the job store.

    Args:
        store: the job store.
        weaves: where the removed trees' turn records are deleted.
        retention: the ``retention:`` settings.
        auth: the ``auth:`` settings (a tenant's ``retention``).
        now: the clock (a test's fake one).
        gc: sweeps the workspace blobs of the tenants whose trees a batch removed (None: none).
    """

    def __init__(
        self,
        store: JobStore,
        weaves: Weaves,
        retention: RetentionSettings,
        auth: AuthSettings,
        *,
        now: Callable[[], datetime] = utcnow,
        interval_s: float = PRUNE_INTERVAL_S,
        batch: int = PRUNE_BATCH,
        gc: BlobGc | None = None,
    ) -> None:
        self.store, self.weaves, self.retention, self.auth = store, weaves, retention, auth
        self.now, self.interval_s, self.batch, self.gc = now, interval_s, batch, gc
        self._task: asyncio.Task[None] | None = None

    def cutoffs(self, tenant: str | None = None) -> Cutoffs:
        """Which jobs are due now under the settings (``tenant``: that tenant's alone)."""
        now = self.now()
        kept = self.retention.finished_jobs
        tenants = {
            name: (now - t.retention.finished_jobs if t.retention.finished_jobs is not None else None)
            for name, t in self.auth.tenants.items()
            if t.retention is not None
        }
        audit = self.retention.audit
        return Cutoffs(
            default=now - kept if kept is not None else None,
            tenants=tenants,
            only=tenant,
            audit=now - audit if audit is not None and tenant is None else None,
        )

    async def prune(self, cutoffs: Cutoffs, *, dry_run: bool = False) -> PruneReport:
        """Remove every job tree due under ``cutoffs``, batch by batch, and their turn records
        (dry: count what one pass would remove; remove nothing)."""
        total = PruneReport()
        while True:
            report = await self.store.prune(cutoffs, self.batch, dry_run=dry_run)
            total.add(report)
            if not dry_run:
                for root in report.roots:
                    await self.weaves.drop(root)
                if self.gc is not None and report.tenants:
                    await self.gc.sweep_all(sorted(report.tenants))
            # Dry, every batch counts the same trees; a batch that removed nothing would repeat.
            if dry_run or not report.more or not (report.roots or report.audit):
                break
        if not dry_run and (total.jobs or total.audit) and isinstance(self.store, SqliteJobStore):
            await self.store.reclaim()
        return total

    async def once(self) -> PruneReport:
        """Apply the settings now."""
        report = await self.prune(self.cutoffs())
        if self.gc is not None:  # uploads no checkpoint ever named (a box lost mid-snapshot)
            swept = await self.gc.sweep_all()
            if swept.blobs or swept.manifests:
                _log.info(
                    "retention: removed %d workspace manifests and %d blobs (%d bytes stored)",
                    swept.manifests, swept.blobs, swept.bytes,
                )  # fmt: skip
        if report.jobs or report.audit:
            _log.info(
                "retention: removed %d finished jobs (%d trees, %d events, %d files, %d bytes), "
                "%d audit records",
                report.jobs, len(report.roots), report.events, report.files, report.bytes, report.audit,
            )  # fmt: skip
        return report

    def start(self) -> None:
        """Prune now, then every ``interval_s`` (until :meth:`stop`)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                await self.once()
            except Exception:  # a failed pass is retried at the next one
                _log.exception("retention: pruning finished jobs failed")
            await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        """Stop pruning (a pass under way is cancelled; its transaction rolls back)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
