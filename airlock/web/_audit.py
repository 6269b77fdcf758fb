"""The audit log of the HTTP API's state-changing requests: the same entries the gRPC API
writes (principal, tenant, action, target, peer, outcome), the peer marked ``http:``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request

from airlock.errors import AirlockError
from airlock.identity import Principal
from airlock.jobs import AuditRecord, utcnow

from ._errors import REFUSED, ApiError, refusal

_log = logging.getLogger("airlock.web")

#: Writes one audit entry (the job store's ``record_audit``).
Record = Callable[[AuditRecord], Awaitable[object]]


@dataclass
class Note:
    """What a handler notes for its entry: the thing acted on and its tenant."""

    target: str = ""
    tenant: str | None = None
    detail: str = ""


@contextlib.asynccontextmanager
async def audited(request: Request, principal: Principal, action: str) -> AsyncIterator[Note]:
    """Audit the request's ``action`` with its outcome (``OK`` or the refusal's code)."""
    note = Note()
    outcome = "INTERNAL"
    try:
        yield note
        outcome = "OK"
    except ApiError as e:
        outcome = e.code
        raise
    except AirlockError as e:
        outcome = _code(e)
        raise
    finally:
        await _write(request, principal, action, note, outcome)


def _code(error: AirlockError) -> str:
    return refusal(error).code if isinstance(error, REFUSED) else "INTERNAL"


async def _write(request: Request, principal: Principal, action: str, note: Note, outcome: str) -> None:
    record: Record | None = request.app.state.record
    if record is None:
        return
    peer = f"http:{request.client.host}:{request.client.port}" if request.client else "http:"
    entry = AuditRecord(
        time=utcnow(),
        principal=principal.name,
        tenant=note.tenant or principal.tenant,
        action=action,
        target=note.target,
        peer=peer,
        outcome=outcome,
        detail=note.detail,
    )
    try:
        await record(entry)
    except Exception:
        _log.exception("cannot write the audit entry of %s by %s", action, principal.name)
