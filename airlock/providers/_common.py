"""Shared by the SDK-backed providers: API-key resolution and SDK-error mapping."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from airlock.errors import SpecError
from layer0 import TurnError

#: The TurnError kinds a provider raises.
ErrorKind = Literal["model", "retryable", "non_retryable", "other"]

#: Sent when no key is configured because a credential sidecar injects the real one on
#: the way out; the SDKs refuse to build a request without some key.
PLACEHOLDER_API_KEY = "airlock-placeholder-key-injected-by-sidecar"

#: Marker in an error table: classify by the HTTP status code of the error.
BY_STATUS: Literal["by_status"] = "by_status"


def resolve_api_key(api_key_env: str | None) -> str:
    """The API key from the environment variable named in the spec, or the placeholder.

    Raises:
        SpecError: the spec names a variable that is unset or empty.
    """
    if api_key_env is None:
        return PLACEHOLDER_API_KEY
    value = os.environ.get(api_key_env, "")
    if not value:
        raise SpecError(
            f"provider api_key_env names {api_key_env!r}, but that environment variable is unset or empty"
        )
    return value


def kind_for_status(status: int) -> ErrorKind:
    """TurnError kind for an HTTP error status.

    429, 408, 409, 499 and 5xx (but 501) are transient; 400/413/422/431 mean the request
    itself is bad (a model error); every other 4xx (401, 402, 403, 404, 412, …) and 501
    is permanent.
    """
    if status in (408, 409, 429, 499) or (status >= 500 and status != 501):
        return "retryable"
    if status in (400, 413, 422, 431):
        return "model"
    return "non_retryable"


def map_sdk_error(
    exc: BaseException, *, sdk: str, table: Mapping[str, ErrorKind | Literal["by_status"]]
) -> TurnError:
    """Map an SDK exception to a TurnError using ``table`` (class name → kind).

    The exception's class and then its bases (MRO) are looked up by name among the SDK's
    own classes, so an SDK subclass we have never seen maps like its parent. A
    ``BY_STATUS`` entry defers to :func:`kind_for_status`. Callers ``raise … from exc``.
    """
    status = getattr(exc, "status_code", None)
    kind: ErrorKind = "other"
    for cls in type(exc).__mro__:
        if not cls.__module__.startswith(sdk):
            continue
        entry = table.get(cls.__name__)
        if entry is None:
            continue
        if entry == BY_STATUS:
            kind = kind_for_status(status) if isinstance(status, int) else "other"
        else:
            kind = entry
        break
    where = f" (HTTP {status})" if isinstance(status, int) else ""
    return TurnError(kind, f"{sdk}: {type(exc).__name__}{where}: {exc}")


def unexpected_error(exc: Exception, *, sdk: str) -> TurnError:
    """A non-SDK exception from an SDK call or the response mapping: ``model`` for a
    malformed response (a body that is not JSON, a field of the wrong shape), ``other``
    for anything else."""
    kind: ErrorKind = "model" if isinstance(exc, ValueError | AttributeError | TypeError) else "other"
    what = "malformed response" if kind == "model" else "unexpected error"
    return TurnError(kind, f"{sdk}: {what}: {type(exc).__name__}: {exc}")
