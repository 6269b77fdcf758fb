"""The job store's operations on weave anchors: each thread's tip in ``weave_anchors``
(advanced with each record), and a finished job's tip sealed into its own row (``weave_tip``)."""

from __future__ import annotations

import json

from airlock.state import Op, execute, fetch_all, fetch_one
from airlock.weave import ThreadAnchor

#: Moves a thread's anchor forward only: a late or repeated write never shortens it.
_ADVANCE = (
    "INSERT INTO weave_anchors (root, job, n, hash, seal, time) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (root, job) DO UPDATE SET n = excluded.n, hash = excluded.hash, "
    "seal = excluded.seal, time = excluded.time WHERE excluded.n > weave_anchors.n"
)


def advance(root: str, anchor: ThreadAnchor, now: float) -> Op[None]:
    """Move the thread's anchor in ``root``'s weave to ``anchor`` (never back)."""
    yield from execute(_ADVANCE, root, anchor.job, anchor.n, anchor.hash, anchor.seal, now)


def anchors(root: str) -> Op[list[ThreadAnchor]]:
    """Every thread anchor of ``root``'s weave, by job."""
    sql = "SELECT job, n, hash, seal FROM weave_anchors WHERE root = ? ORDER BY job"
    rows = yield from fetch_all(sql, root)
    return [ThreadAnchor(job=r[0], n=int(r[1]), hash=r[2], seal=r[3]) for r in rows]


def drop(root: str) -> Op[int]:
    """Delete ``root``'s anchors; how many there were."""
    rows = yield from fetch_all("DELETE FROM weave_anchors WHERE root = ? RETURNING job", root)
    return len(rows)


def seal_tip(job_id: str) -> Op[None]:
    """Copy the job's thread anchor into its row (``weave_tip``): run as the job finishes,
    in the transaction that makes it terminal."""
    row = yield from fetch_one(
        "SELECT n, hash, seal FROM weave_anchors WHERE job = ? ORDER BY n DESC LIMIT 1", job_id
    )
    if row is not None:
        tip = ThreadAnchor(job=job_id, n=int(row[0]), hash=row[1], seal=row[2])
        yield from execute("UPDATE jobs SET weave_tip = ? WHERE id = ?", tip.model_dump_json(), job_id)


def sealed_tips(root: str) -> Op[list[ThreadAnchor]]:
    """The tips sealed into the rows of ``root``'s tree (its jobs, their children and forks,
    found through the jobs table, not the anchors)."""
    found: list[ThreadAnchor] = []
    seen, todo = {root}, [root]
    row = yield from fetch_one("SELECT weave_tip FROM jobs WHERE id = ?", root)
    tips = [row[0]] if row is not None else []
    while todo:
        up = todo.pop()
        rows = yield from fetch_all(
            "SELECT id, weave_tip FROM jobs WHERE parent_id = ? OR forked_from = ?", up, up
        )
        for found_row in rows:
            job_id: str = found_row[0]
            if job_id not in seen:
                seen.add(job_id)
                todo.append(job_id)
                tips.append(found_row[1])
    for tip in tips:
        if tip is not None:
            found.append(ThreadAnchor.model_validate(json.loads(tip)))
    return found
