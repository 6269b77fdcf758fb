"""airlock.weave: a job tree's turn records as one causal trace.

The controller records each step of a job as an immutable, hash-chained :class:`TurnRecord`.
The records of a submitted job and its delegated children form a :class:`Weave`: a
Mazurkiewicz trace, a partial order in which records of different threads (jobs) with no
causal link commute.

* :mod:`._record` — :class:`RecordDraft` (what a caller supplies) and :class:`TurnRecord`.
* :mod:`._hashing` — :func:`canonical_json`, :func:`state_hash`, :func:`content_digest`.
* :mod:`._chain` — :func:`verify` of a stored sequence (:class:`ChainReport`), against anchors.
* :mod:`._anchor` — :class:`ThreadAnchor`: each thread's tip kept outside the chain.
* :mod:`._weave` — :class:`Weave`: recording, Lamport clocks, linearization, equivalence, cones.
* :mod:`._store` — :class:`WeaveStore`: weaves in a layer0 ``StateStore``.
* :mod:`._fixed_point` — :class:`FixedPoint`: stop an iteration when stable, cycling or spent.
"""

from ._anchor import AnchorStore, ThreadAnchor, anchor_of, anchor_sealed
from ._chain import ChainBreak, ChainReport, cross_check, record_hash, verify
from ._fixed_point import FixedPoint, FixedPointExit, FixedPointResult, detect_cycle, is_stable
from ._hashing import EMPTY_STATE, canonical_json, content_digest, folded_state, state_hash
from ._record import RecordDraft, RecordType, TurnRecord
from ._store import WeaveError, WeaveStore
from ._weave import ConeMetrics, Weave

__all__ = [
    "EMPTY_STATE",
    "AnchorStore",
    "ChainBreak",
    "ChainReport",
    "ConeMetrics",
    "FixedPoint",
    "FixedPointExit",
    "FixedPointResult",
    "RecordDraft",
    "RecordType",
    "ThreadAnchor",
    "TurnRecord",
    "Weave",
    "WeaveError",
    "WeaveStore",
    "anchor_of",
    "anchor_sealed",
    "canonical_json",
    "content_digest",
    "cross_check",
    "detect_cycle",
    "folded_state",
    "is_stable",
    "record_hash",
    "state_hash",
    "verify",
]
