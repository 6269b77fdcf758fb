"""The Provider protocol: one async method, like a transport (not a layer0 type)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from ._types import ProviderRequest, ProviderResponse


@runtime_checkable
class Provider(Protocol):
    """Calls a model once.

    Implementations raise ``layer0.TurnError``: ``retryable`` for 429/5xx/timeouts/
    connection errors, ``model`` or ``non_retryable`` for other failures, and
    ``model`` for a stop reason they cannot map. They never retry on their own
    behalf beyond what the SDK is configured for; the orchestrator decides.

    A provider that keeps its place in a conversation (the scripted one) may also define
    ``resume_at(calls: int) -> None``: a session resumed from a snapshot calls it with the
    model calls already made.
    """

    #: Short name used in logs and AgentSpecs (``anthropic``, ``openai_compat``, ``scripted``).
    name: str

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        """Run one model call."""
        ...


#: Receives each piece of text a streaming model call generates, in order (awaited inline:
#: it must be quick).
TextSink = Callable[[str], Awaitable[None]]


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream a call's text as the model generates it."""

    async def complete_stream(self, request: ProviderRequest, on_text: TextSink) -> ProviderResponse:
        """Run one model call, handing ``on_text`` its text as it comes; the response is the
        one :meth:`complete` would return."""
        ...
