"""Each weave thread's anchor (its tip's ``n`` and hash, sealed) in the job store's
``weave_anchors`` table: outside the state store that holds the records, so deleting a
thread's newest records there leaves the anchor saying how long the thread was."""

from __future__ import annotations

import time

from airlock.state import Op, execute, fetch_all
from airlock.weave import ThreadAnchor

from ._store import JobStore

#: Moves a thread's anchor forward only: a late or repeated write never shortens it.
_ADVANCE = (
    "INSERT INTO weave_anchors (root, job, n, hash, seal, time) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (root, job) DO UPDATE SET n = excluded.n, hash = excluded.hash, "
    "seal = excluded.seal, time = excluded.time WHERE excluded.n > weave_anchors.n"
)


def _anchors(root: str) -> Op[list[ThreadAnchor]]:
    rows = yield from fetch_all(
        "SELECT job, n, hash, seal FROM weave_anchors WHERE root = ? ORDER BY job", root
    )
    return [ThreadAnchor(job=r[0], n=int(r[1]), hash=r[2], seal=r[3]) for r in rows]


def _drop(root: str) -> Op[int]:
    rows = yield from fetch_all("DELETE FROM weave_anchors WHERE root = ? RETURNING job", root)
    return len(rows)


class StoredAnchors:
    """The anchors of every weave, in ``jobs``' ``weave_anchors`` table (SQLite or PostgreSQL)."""

    def __init__(self, jobs: JobStore) -> None:
        self._jobs = jobs

    async def advance(self, root: str, anchor: ThreadAnchor) -> None:
        """Move the thread's anchor to ``anchor`` (never back to a lower ``n``)."""
        op = execute(_ADVANCE, root, anchor.job, anchor.n, anchor.hash, anchor.seal, time.time())
        await self._jobs.run(op)

    async def anchors(self, root: str) -> list[ThreadAnchor]:
        """Every thread anchor of ``root``'s weave, by job."""
        return await self._jobs.run(_anchors(root))

    async def drop(self, root: str) -> int:
        """Delete ``root``'s anchors (its tree was pruned); how many there were."""
        return await self._jobs.run(_drop(root))
