"""Errors both servers send the same way: a ``google.rpc.Status`` with typed details.

A refusal is the gRPC status code and message, plus, in the standard
``grpc-status-details-bin`` trailer (what ``grpc-status``/``@grpc/grpc-js`` clients decode):

* ``google.rpc.ErrorInfo{reason, domain: "airlock.dev", metadata}``: always; ``reason`` is a
  stable UPPER_SNAKE word a client may branch on (``INVALID_ARGUMENT``, ``DUPLICATE``,
  ``BUSY``, ``NOT_FOUND``, ...);
* ``google.rpc.BadRequest``: one ``FieldViolation{field, description}`` per problem of a
  malformed request (every problem, decoding and validation alike);
* ``google.rpc.RetryInfo{retry_delay}``: when trying again later can succeed (busy,
  unavailable, shutting down).

The message is one style on both servers: a sentence per problem, ``path: what is wrong``.
:func:`status_details` reads them back (the Python client, and tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import grpc
from google.protobuf import duration_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from airlock.errors import MAX_DETAIL_LINE_BYTES, bounded_detail, shorten

from ._problems import Problem

__all__ = ["DOMAIN", "StatusDetails", "abort_with_details", "rich_status", "status_details"]

#: ``ErrorInfo.domain`` of every airlock error.
DOMAIN = "airlock.dev"
_MAX_VIOLATIONS = 100
#: The violations' share of the trailers: a client refuses trailers over its metadata limit (8 KiB
#: by default, all together), and the details travel base64-encoded beside the message (itself
#: cut to 2000 bytes, and repeated inside the details).
_MAX_VIOLATION_BYTES = 2000
_MAX_PATH_BYTES = 256


def rich_status(
    code: grpc.StatusCode,
    message: str,
    *,
    reason: str,
    problems: Sequence[Problem] = (),
    retry_after_s: float | None = None,
    metadata: Mapping[str, str] | None = None,
) -> grpc.Status:
    """The status to abort with: ``code``, ``message`` (bounded) and the typed details."""
    details: list[Message] = [_info(reason, metadata)]
    if problems:
        details.append(error_details_pb2.BadRequest(field_violations=_violations(problems)))
    if retry_after_s is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(max(0, round(retry_after_s * 1000)))
        details.append(error_details_pb2.RetryInfo(retry_delay=delay))
    status = status_pb2.Status(code=_code(code), message=bounded_detail(message))
    for detail in details:
        status.details.add().Pack(detail)
    result: grpc.Status = rpc_status.to_status(status)
    return result


def _violations(problems: Sequence[Problem]) -> list[error_details_pb2.BadRequest.FieldViolation]:
    """One violation per problem, each cut, as many as fit the trailer's share; then one that
    says how many were left out (an echoed 50 KB value never costs the client its answer)."""
    violations: list[error_details_pb2.BadRequest.FieldViolation] = []
    used = 0
    for i, problem in enumerate(problems):
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=shorten(problem.path, _MAX_PATH_BYTES),
            description=shorten(problem.text, MAX_DETAIL_LINE_BYTES),
        )
        used += violation.ByteSize()
        if i == _MAX_VIOLATIONS or used > _MAX_VIOLATION_BYTES:
            left = f"{len(problems) - i} more problem(s) not listed"
            violations.append(error_details_pb2.BadRequest.FieldViolation(field="", description=left))
            break
        violations.append(violation)
    return violations


async def abort_with_details(
    context: grpc.aio.ServicerContext,
    code: grpc.StatusCode,
    message: str,
    *,
    reason: str,
    problems: Sequence[Problem] = (),
    retry_after_s: float | None = None,
    metadata: Mapping[str, str] | None = None,
    trailing_metadata: Sequence[tuple[str, str]] = (),
) -> NoReturn:
    """End the call with :func:`rich_status` (plus ``trailing_metadata``, e.g. a legacy trailer)."""
    status = rich_status(
        code, message, reason=reason, problems=problems, retry_after_s=retry_after_s, metadata=metadata
    )
    await context.abort(
        status.code, status.details, trailing_metadata=(*status.trailing_metadata, *trailing_metadata)
    )
    raise AssertionError("context.abort returned")  # pragma: no cover


@dataclass(frozen=True)
class StatusDetails:
    """What a refusal's typed details say (empty when it carried none)."""

    reason: str | None = None
    domain: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    #: (field path, description) per violation.
    violations: tuple[tuple[str, str], ...] = ()
    retry_after_s: float | None = None


def status_details(error: grpc.RpcError) -> StatusDetails:
    """The typed details of a failed call (``grpc.RpcError`` or ``grpc.aio.AioRpcError``)."""
    try:
        status = rpc_status.from_call(error)
    except (ValueError, AttributeError, TypeError):
        status = None
    if status is None:
        return StatusDetails()
    reason = domain = None
    metadata: dict[str, str] = {}
    violations: list[tuple[str, str]] = []
    retry: float | None = None
    for any_detail in status.details:
        info = error_details_pb2.ErrorInfo()
        bad = error_details_pb2.BadRequest()
        delay = error_details_pb2.RetryInfo()
        if any_detail.Unpack(info):
            reason, domain, metadata = info.reason, info.domain, dict(info.metadata)
        elif any_detail.Unpack(bad):
            violations += [(v.field, v.description) for v in bad.field_violations]
        elif any_detail.Unpack(delay):
            retry = delay.retry_delay.ToMilliseconds() / 1000
    return StatusDetails(reason, domain, metadata, tuple(violations), retry)


def _info(reason: str, metadata: Mapping[str, str] | None) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=dict(metadata or {}))


def _code(code: grpc.StatusCode) -> int:
    value: int = code.value[0]
    assert code_pb2.Code.Name(value), code
    return value
