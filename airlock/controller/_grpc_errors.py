"""How the controller's gRPC face refuses a request: a ``google.rpc.Status`` with typed details.

Every refusal goes through :func:`airlock.wire.abort_with_details`: ``ErrorInfo.reason`` is one
of :data:`REASONS` (stable words a client may branch on), a malformed request carries a
``BadRequest.FieldViolation`` per problem (decoding and validation problems together) and the
message is one ``path: problem`` line per problem, as the runner's. A refusal that may pass
later (the controller shutting down) carries ``RetryInfo``. UNAUTHENTICATED is the principal
interceptor's (:mod:`._callers`); a missing permission names it (``metadata["permission"]``),
a quota names itself, its limit and its use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import grpc

from airlock import wire
from airlock.errors import AirlockError

from ._access import PermissionDenied
from ._fork_point import ForkRefused
from ._quotas import QuotaExceeded
from ._sandboxes import SandboxNotFound, SandboxRefused
from ._service_settings import JobNotAwaiting, JobNotFound, NotAnApprover

__all__ = ["REASONS", "RETRY_AFTER_S", "fail", "invalid", "need_id", "refuse", "required"]

#: Every ``ErrorInfo.reason`` the Controller service sends, and what it means.
REASONS: dict[str, str] = {
    "INVALID_ARGUMENT": "the request is malformed: see the BadRequest field violations",
    "NOT_FOUND": "no such job, agent, artifact or sandbox",
    "NOT_AWAITING": "the job is not in the state the request needs (FAILED_PRECONDITION)",
    "NOT_AN_APPROVER": "the name may not decide on this job's calls (PERMISSION_DENIED)",
    "PERMISSION_DENIED": "the caller's roles lack a permission, named in ErrorInfo.metadata['permission']",
    "QUOTA_EXCEEDED": "a tenant quota is reached (RESOURCE_EXHAUSTED): metadata quota, limit, used",
    "FILES_OVER_CAP": "the job's input files exceed a cap (RESOURCE_EXHAUSTED)",
    "NOT_FORKABLE": "no such fork point, or a message given inside a step (FAILED_PRECONDITION)",
    "SANDBOX_REFUSED": "the long-lived sandbox cannot do that: another agent's, the agent changed, "
    "no blob store, replicas (FAILED_PRECONDITION), or its box failed (UNAVAILABLE)",
    "SHUTTING_DOWN": "the controller is stopping: try again (UNAVAILABLE, with RetryInfo)",
    "INTERNAL": "the controller failed to answer (a bug: report it)",
}
#: The delay ``RetryInfo`` suggests while the controller restarts.
RETRY_AFTER_S = 1.0

#: The service's refusals of a request about one job: status code and reason.
_REFUSALS: dict[type[AirlockError], tuple[grpc.StatusCode, str]] = {
    JobNotFound: (grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    JobNotAwaiting: (grpc.StatusCode.FAILED_PRECONDITION, "NOT_AWAITING"),
    NotAnApprover: (grpc.StatusCode.PERMISSION_DENIED, "NOT_AN_APPROVER"),
    PermissionDenied: (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    QuotaExceeded: (grpc.StatusCode.RESOURCE_EXHAUSTED, "QUOTA_EXCEEDED"),
    ForkRefused: (grpc.StatusCode.FAILED_PRECONDITION, "NOT_FORKABLE"),
    SandboxNotFound: (grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    SandboxRefused: (grpc.StatusCode.FAILED_PRECONDITION, "SANDBOX_REFUSED"),
}
#: The exception types :func:`refuse` maps (``except REFUSED as e: await refuse(context, e)``).
REFUSED = tuple(_REFUSALS)


def required(request: object, *fields: str) -> list[wire.Problem]:
    """An ``is required`` problem per string field of ``request`` left empty."""
    return [wire.Problem(name, "is required") for name in fields if not getattr(request, name)]


async def need_id(context: grpc.aio.ServicerContext, request: object) -> None:
    """INVALID_ARGUMENT (a violation on ``id``) when the request names no job or sandbox."""
    problems = required(request, "id")
    if problems:
        await invalid(context, problems)


async def fail(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    reason: str,
    message: str,
    *,
    problems: Sequence[wire.Problem] = (),
    retry_after_s: float | None = None,
) -> NoReturn:
    """End the call with ``code``, ``message`` and ErrorInfo ``reason`` (one of :data:`REASONS`)."""
    assert reason in REASONS, reason
    await wire.abort_with_details(
        context, code, message, reason=reason, problems=problems, retry_after_s=retry_after_s
    )


async def invalid(context: grpc.aio.ServicerContext, problems: Sequence[wire.Problem]) -> NoReturn:
    """INVALID_ARGUMENT: one ``path: problem`` line and one field violation per problem."""
    message = "\n".join(str(p) for p in problems)
    await fail(context, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", message, problems=problems)


async def refuse(context: grpc.aio.ServicerContext, error: AirlockError) -> NoReturn:
    """Abort with the status code and reason of one of the service's refusals (:data:`REFUSED`)."""
    code, reason = next(
        (found for kind, found in _REFUSALS.items() if isinstance(error, kind)),
        (grpc.StatusCode.INTERNAL, "INTERNAL"),
    )
    metadata: dict[str, str] = {}
    if isinstance(error, PermissionDenied):
        metadata = {"permission": error.permission}
    elif isinstance(error, QuotaExceeded):
        metadata = {"quota": error.quota, "limit": error.limit, "used": error.used, "tenant": error.tenant}
    assert reason in REASONS, reason
    await wire.abort_with_details(context, code, str(error), reason=reason, metadata=metadata)
