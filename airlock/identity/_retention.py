"""How long finished jobs and the audit log are kept (``retention:``, and a tenant's own).

A retention is a duration with days allowed (``"90d"``, ``"36h"``, ``"1d12h"``, ``"30m"``) or
``"forever"`` (never removed). Finished jobs are kept 90 days by default: long enough to look
into what happened last quarter, short enough that the store does not grow without bound (it
held every job forever before). The audit log is kept forever by default: it is the record an
auditor asks for, small (one row per call that changes something), and its own retention is
set apart from the jobs' for that reason.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer, WithJsonSchema

_PART = re.compile(r"(\d+)(d|h|m|s)")
_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
#: A retention longer than this is refused (about 100 years; ``forever`` says what it means).
_LONGEST = timedelta(days=36_525)


def parse_retention(value: Any) -> timedelta | None:
    """A retention as a timedelta; None for ``forever``.

    Raises:
        ValueError: anything but ``forever`` or positive ``<n><unit>`` parts (``d``, ``h``, ``m``,
            ``s``, largest first, each once).
    """
    if value is None or isinstance(value, timedelta):
        return value
    text = value.strip() if isinstance(value, str) else ""
    if text == "forever":
        return None
    parts = _PART.findall(text)
    units = [u for _, u in parts]
    if not parts or "".join(n + u for n, u in parts) != text or units != sorted(set(units), key="dhms".index):
        raise ValueError(f'invalid retention {value!r}; use e.g. "90d", "36h", "1d12h" or "forever"')
    kept = timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))
    if not timedelta(0) < kept <= _LONGEST:
        raise ValueError(f"a retention must be positive and at most {_LONGEST.days} days (or forever)")
    return kept


def _text(value: timedelta | None) -> str:
    if value is None:
        return "forever"
    days, seconds = value.days, value.seconds
    text = f"{days}d" if days else ""
    for unit, size in (("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size:
            text, seconds = text + f"{seconds // size}{unit}", seconds % size
    return text


#: A retention in settings: a duration string (days allowed) or ``forever`` (None).
Retention = Annotated[
    timedelta | None,
    BeforeValidator(parse_retention),
    PlainSerializer(_text, return_type=str),
    WithJsonSchema({"type": "string", "pattern": r"^(forever|(\d+d)?(\d+h)?(\d+m)?(\d+s)?)$"}),
]


class RetentionSettings(BaseModel):
    """``retention:``, how long records are kept after they stop changing."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: A finished root job and its whole tree (events, files, turn records), after it finished.
    finished_jobs: Retention = timedelta(days=90)
    #: An audit record, after it was written.
    audit: Retention = None


class TenantRetention(BaseModel):
    """``auth.tenants.<t>.retention``: the tenant's own (unset: ``retention.finished_jobs``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    finished_jobs: Retention
