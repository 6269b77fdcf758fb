"""Streamed model calls: the text a model generates, as ``TextDelta`` events at a bounded rate.

A provider that can stream (:class:`StreamingProvider`) hands each piece of text to a
:class:`DeltaCoalescer`, which emits at most one event per ``interval_s`` unless
``max_chars`` characters are waiting, and the rest when the call returns (before its
``InferenceFinished``). A fast model thus cannot flood the event stream; a slow one is seen
as it writes. ``AIRLOCK_STREAM_DELTAS=0`` turns streaming off (plain calls);
``AIRLOCK_STREAM_INTERVAL_MS`` and ``AIRLOCK_STREAM_MAX_CHARS`` set the bounds.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel, ConfigDict, Field

from ._events import TextDelta, TurnEvent
from ._provider import Provider, StreamingProvider
from ._types import ProviderRequest, ProviderResponse


class StreamSettings(BaseModel):
    """How text deltas are coalesced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Seconds between two deltas at least (unless ``max_chars`` are waiting).
    interval_s: float = Field(default=0.05, ge=0)
    #: Characters that are sent at once, whatever the interval.
    max_chars: int = Field(default=256, gt=0)

    @classmethod
    def from_env(cls) -> StreamSettings | None:
        """The settings the environment gives (None: streaming is off)."""
        if os.environ.get("AIRLOCK_STREAM_DELTAS", "1").strip().lower() in ("0", "false", "off", "no"):
            return None
        interval = os.environ.get("AIRLOCK_STREAM_INTERVAL_MS")
        chars = os.environ.get("AIRLOCK_STREAM_MAX_CHARS")
        return cls(
            interval_s=float(interval) / 1000 if interval else 0.05,
            max_chars=int(chars) if chars else 256,
        )


class DeltaCoalescer:
    """Collects a call's text and emits it as ``TextDelta`` events at a bounded rate."""

    def __init__(
        self,
        iteration: int,
        emit: Callable[[TurnEvent], Awaitable[None]],
        settings: StreamSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.iteration = iteration
        self._emit = emit
        self._settings = settings
        self._clock = clock
        self._pending: list[str] = []
        self._size = 0
        self._last = -math.inf
        #: Events emitted so far.
        self.emitted = 0

    async def add(self, text: str) -> None:
        """Take a piece of text; emit what waits when the interval passed or enough waits."""
        self._pending.append(text)
        self._size += len(text)
        due = self._clock() - self._last >= self._settings.interval_s
        if due or self._size >= self._settings.max_chars:
            await self.flush()

    async def flush(self) -> None:
        """Emit what waits (nothing when nothing does)."""
        if not self._size:
            return
        text = "".join(self._pending)
        self._pending, self._size = [], 0
        self._last = self._clock()
        self.emitted += 1
        await self._emit(TextDelta(iteration=self.iteration, text=text))


async def call_model(
    provider: Provider,
    request: ProviderRequest,
    iteration: int,
    emit: Callable[[TurnEvent], Awaitable[None]],
    settings: StreamSettings | None,
) -> ProviderResponse:
    """One model call: streamed, its text emitted as deltas, when the provider can and
    ``settings`` are given; otherwise a plain call."""
    if settings is None or not isinstance(provider, StreamingProvider):
        return await provider.complete(request)
    coalescer = DeltaCoalescer(iteration, emit, settings)
    response = await provider.complete_stream(request, coalescer.add)
    await coalescer.flush()
    return response
