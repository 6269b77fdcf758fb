"""The HTTP attempts behind one provider call: what the SDK's own retries saw.

The SDKs retry 429/5xx/connection errors themselves (``max_retries``) and say nothing of it.
An SDK's HTTP client given :data:`EVENT_HOOKS` notes each attempt of the call in progress
(in a context variable, so concurrent calls keep theirs apart) inside :func:`attempts`; the
provider reports the failed ones as ``ProviderResponse.retries``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

#: What an attempt that got no response is called (a connection error or a timeout).
NO_RESPONSE = "no response"

_CURRENT: ContextVar[list[str] | None] = ContextVar("airlock_provider_attempts", default=None)


async def _on_request(request: Any) -> None:
    attempts = _CURRENT.get()
    if attempts is not None:
        attempts.append(NO_RESPONSE)


async def _on_response(response: Any) -> None:
    attempts = _CURRENT.get()
    if attempts:
        attempts[-1] = f"HTTP {response.status_code}"


#: ``event_hooks`` for an SDK's HTTP client (httpx-style: ``{"request": […], "response": […]}``).
EVENT_HOOKS: dict[str, list[Any]] = {"request": [_on_request], "response": [_on_response]}


@contextmanager
def attempts() -> Iterator[list[str]]:
    """Note the HTTP attempts made inside the block (by clients using :data:`EVENT_HOOKS`):
    one entry per attempt, ``"HTTP <status>"`` or :data:`NO_RESPONSE`."""
    noted: list[str] = []
    token = _CURRENT.set(noted)
    try:
        yield noted
    finally:
        _CURRENT.reset(token)


def retries(noted: list[str]) -> list[str]:
    """The attempts of a call that answered, but the last: the ones the SDK retried."""
    return noted[:-1]
