"""Why the runner refuses a call: the stable ``ErrorInfo.reason`` words and their legacy form.

Every refusal carries ``google.rpc.ErrorInfo{reason, domain: "airlock.dev"}`` (see
:func:`airlock.wire.abort_with_details`) and, for older clients, the trailing metadata
``airlock-reason`` with the lower-case word it had before (superseded by ``ErrorInfo.reason``).
"""

from __future__ import annotations

#: Trailing-metadata key of the legacy reason (superseded by ``ErrorInfo.reason``).
REASON_KEY = "airlock-reason"

INVALID_ARGUMENT = "INVALID_ARGUMENT"
DUPLICATE = "DUPLICATE"
BUSY = "BUSY"
SHUTTING_DOWN = "SHUTTING_DOWN"
NOT_FOUND = "NOT_FOUND"
NOT_PAUSED = "NOT_PAUSED"
ENDED = "ENDED"
ISOLATION = "ISOLATION"
TOO_LARGE = "TOO_LARGE"
FILE_REFUSED = "FILE_REFUSED"
INTERNAL = "INTERNAL"

#: ``ErrorInfo.reason`` -> the legacy ``airlock-reason`` value.
LEGACY: dict[str, str] = {
    INVALID_ARGUMENT: "invalid",
    DUPLICATE: "duplicate",
    BUSY: "busy",
    SHUTTING_DOWN: "shutdown",
    NOT_FOUND: "not_found",
    NOT_PAUSED: "not_paused",
    ENDED: "ended",
    ISOLATION: "isolation",
    TOO_LARGE: "too_large",
    FILE_REFUSED: "invalid",
    INTERNAL: "internal",
}
#: The legacy value -> ``ErrorInfo.reason`` (a client reading an older runner).
FROM_LEGACY: dict[str, str] = {legacy: reason for reason, legacy in LEGACY.items() if reason != FILE_REFUSED}
#: Seconds a client should wait before trying again after BUSY or SHUTTING_DOWN.
RETRY_AFTER_S: dict[str, float] = {BUSY: 1.0, SHUTTING_DOWN: 5.0}
