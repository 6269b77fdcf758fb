"""How the HTTP API refuses a request: a status and ``{"error": {"code", "message"}}``.

The codes are the gRPC API's reasons (``NOT_FOUND``, ``PERMISSION_DENIED``, ``NOT_AWAITING``…),
so a client branches on the same words over either transport. A malformed request is 422 with
one ``field: problem`` line per problem and the fields in ``error.fields``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from airlock.controller import (
    ForkRefused,
    JobNotAwaiting,
    JobNotFound,
    NotAnApprover,
    PermissionDenied,
    QuotaExceeded,
)
from airlock.errors import AirlockError


class ApiError(Exception):
    """A refusal: ``status``, a stable ``code`` and a message for people."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra


#: The service's refusals: status and code.
_REFUSALS: dict[type[AirlockError], tuple[int, str]] = {
    JobNotFound: (404, "NOT_FOUND"),
    JobNotAwaiting: (409, "NOT_AWAITING"),
    NotAnApprover: (403, "NOT_AN_APPROVER"),
    PermissionDenied: (403, "PERMISSION_DENIED"),
    QuotaExceeded: (429, "QUOTA_EXCEEDED"),
    ForkRefused: (409, "NOT_FORKABLE"),
}
#: The exceptions :func:`refusal` maps.
REFUSED = tuple(_REFUSALS)
#: The codes of HTTP errors Starlette raises itself (routing, methods).
_HTTP_CODES = {401: "UNAUTHENTICATED", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 413: "TOO_LARGE"}


def refusal(error: AirlockError) -> ApiError:
    """``error`` (one of :data:`REFUSED`) as the API's refusal."""
    status, code = next(v for k, v in _REFUSALS.items() if isinstance(error, k))
    return ApiError(status, code, str(error))


def invalid(field: str, problem: str) -> ApiError:
    """422 naming ``field``."""
    return ApiError(422, "INVALID_ARGUMENT", f"{field}: {problem}", fields=[field])


def body(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    """The JSON error response."""
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status_code=status)


def error_response(error: ApiError) -> JSONResponse:
    """``error`` as its response (a 401 names the scheme, and nothing else; a ``retry_after``
    in seconds is also the ``Retry-After`` header)."""
    response = body(error.status, error.code, error.message, **error.extra)
    if error.status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    if "retry_after" in error.extra:
        response.headers["Retry-After"] = str(error.extra["retry_after"])
    return response


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AirlockError)
    made = refusal(exc)
    return body(made.status, made.code, made.message)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    fields, lines = [], []
    for problem in exc.errors():
        where = ".".join(str(p) for p in problem.get("loc", ()) if p not in ("body", "query", "path"))
        fields.append(where)
        lines.append(f"{where or 'body'}: {problem.get('msg', 'invalid')}")
    return body(422, "INVALID_ARGUMENT", "\n".join(lines), fields=fields)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
    return body(exc.status_code, code, str(exc.detail))


def install(app: FastAPI) -> None:
    """Every refusal of ``app`` as the JSON error body."""
    app.add_exception_handler(ApiError, _api_error)
    for kind in REFUSED:
        app.add_exception_handler(kind, _refused)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
