"""Thread anchors: each thread's tip (its last record's ``n`` and hash) kept outside the chain.

The chain alone cannot tell that a thread's newest records were deleted: what remains is a
valid, shorter chain. An anchor, written beside each append in another table, says how long
each thread was; :func:`~._chain.verify` with anchors names a thread cut short or missing.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from ._hashing import canonical_json, seal_matches, seal_of
from ._record import TurnRecord


class ThreadAnchor(BaseModel):
    """Where a thread ended when last written: its job, its tip's ``n`` (the thread's record
    count: ``n`` runs 1, 2, …) and the tip's hash; with the audit key, a seal over the three."""

    model_config = ConfigDict(frozen=True)

    job: str = Field(min_length=1)
    n: int = Field(ge=1)
    hash: str
    seal: str | None = None

    @property
    def record_id(self) -> str:
        """The id of the thread's tip."""
        return f"{self.job}:{self.n}"


def _anchor_bytes(root: str, job: str, n: int, tip_hash: str) -> str:
    return canonical_json({"root": root, "job": job, "n": n, "hash": tip_hash}).decode()


def anchor_of(root: str, record: TurnRecord, key: bytes | None = None) -> ThreadAnchor:
    """The anchor ``record`` makes its thread's tip in ``root``'s weave (sealed with ``key``)."""
    seal = seal_of(_anchor_bytes(root, record.job, record.n, record.hash), key) if key is not None else None
    return ThreadAnchor(job=record.job, n=record.n, hash=record.hash, seal=seal)


def anchor_sealed(root: str, anchor: ThreadAnchor, key: bytes) -> bool:
    """Whether ``anchor``'s seal matches its fields under ``key``."""
    text = _anchor_bytes(root, anchor.job, anchor.n, anchor.hash)
    return anchor.seal is not None and seal_matches(anchor.seal, text, key)


class AnchorStore(Protocol):
    """Where anchors are kept (the job store): advanced with each append, read by verify."""

    async def advance(self, root: str, anchor: ThreadAnchor) -> None:
        """Move the thread's anchor to ``anchor`` (never back to a lower ``n``)."""

    async def anchors(self, root: str) -> list[ThreadAnchor]:
        """Every thread anchor of ``root``'s weave."""

    async def drop(self, root: str) -> int:
        """Delete ``root``'s anchors (its tree was pruned); how many there were."""
