"""Each weave thread's anchor (its tip's ``n`` and hash, sealed) in the job store: outside the
state store that holds the records, so deleting a thread's newest records there leaves the
anchor saying how long the thread was. A finished job's tip is also sealed into its row."""

from __future__ import annotations

import time

from airlock.weave import ThreadAnchor

from . import _store_anchors as ops
from ._store import JobStore


def furthest(*sources: list[ThreadAnchor]) -> list[ThreadAnchor]:
    """One anchor per thread: the furthest any source holds (a source rolled back or
    deleted leaves the other's)."""
    best: dict[str, ThreadAnchor] = {}
    for source in sources:
        for anchor in source:
            held = best.get(anchor.job)
            if held is None or anchor.n > held.n:
                best[anchor.job] = anchor
    return [best[job] for job in sorted(best)]


class StoredAnchors:
    """The anchors of every weave, in ``jobs``' ``weave_anchors`` table and its jobs' rows."""

    def __init__(self, jobs: JobStore) -> None:
        self._jobs = jobs

    async def advance(self, root: str, anchor: ThreadAnchor) -> None:
        """Move the thread's anchor to ``anchor`` (never back to a lower ``n``)."""
        await self._jobs.run(ops.advance(root, anchor, time.time()))

    async def anchors(self, root: str) -> list[ThreadAnchor]:
        """Every thread anchor of ``root``'s weave, by job: the table's, or the tip sealed
        into a finished job's row when that one is further."""
        return furthest(await self._jobs.run(ops.anchors(root)), await self._jobs.run(ops.sealed_tips(root)))

    async def drop(self, root: str) -> int:
        """Delete ``root``'s anchors (its tree was pruned); how many there were."""
        return await self._jobs.run(ops.drop(root))
