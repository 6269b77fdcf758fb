"""Live-only job events: what watchers see as it happens and the job's record never holds.

A model's text deltas are forwarded to the watchers of the job on this replica and are not
written to the job store (the call's text is recorded in its output). Each watcher has its
own bounded buffer: a watcher that reads slowly gets consecutive deltas of one model call
merged (the oldest text cut, counted in ``dropped_chars``), and never slows the job down.
"""

from __future__ import annotations

from collections import deque

from airlock.jobs import JobEventData, SandboxActivity
from airlock.turn import TextDelta, joined_delta_text

#: Live events a watcher's buffer holds at most (beyond, the oldest are dropped).
MAX_BUFFERED = 64
#: The longest text a buffered delta keeps (its end).
MAX_DELTA_CHARS = 16_384


class LiveBuffer:
    """One watcher's pending live events (bounded; deltas of one call merged)."""

    def __init__(self, max_items: int = MAX_BUFFERED, max_delta_chars: int = MAX_DELTA_CHARS) -> None:
        self._items: deque[JobEventData] = deque(maxlen=max_items)
        self._max_delta_chars = max_delta_chars

    def push(self, data: JobEventData) -> None:
        """Buffer ``data``, merged into the last buffered delta when both are deltas of one call."""
        delta = _delta(data)
        last = _delta(self._items[-1]) if self._items else None
        if delta is not None and last is not None and last.iteration == delta.iteration:
            dropped = last.dropped_chars + delta.dropped_chars
            text, dropped = joined_delta_text(last.text, delta.text, dropped, self._max_delta_chars)
            merged = TextDelta(iteration=delta.iteration, text=text, dropped_chars=dropped)
            self._items[-1] = SandboxActivity(event=merged)
            return
        self._items.append(data)

    def take(self) -> list[JobEventData]:
        """Everything buffered, oldest first (the buffer is then empty)."""
        items = list(self._items)
        self._items.clear()
        return items


class LiveFeed:
    """The live buffers of each job's watchers on this replica."""

    def __init__(self) -> None:
        self._buffers: dict[str, set[LiveBuffer]] = {}

    def open(self, job_id: str) -> LiveBuffer:
        """A new watcher's buffer for ``job_id`` (close it when the watcher ends)."""
        buffer = LiveBuffer()
        self._buffers.setdefault(job_id, set()).add(buffer)
        return buffer

    def close(self, job_id: str, buffer: LiveBuffer) -> None:
        """Forget a watcher's buffer."""
        buffers = self._buffers.get(job_id)
        if buffers is not None:
            buffers.discard(buffer)
            if not buffers:
                del self._buffers[job_id]

    def publish(self, job_id: str, data: JobEventData) -> bool:
        """Hand ``data`` to the job's watchers here; False when nobody watches."""
        buffers = self._buffers.get(job_id)
        for buffer in buffers or ():
            buffer.push(data)
        return bool(buffers)


def is_live_only(data: object) -> bool:
    """Whether a sandbox event is forwarded live and never recorded (a text delta)."""
    return isinstance(data, TextDelta)


def _delta(data: JobEventData) -> TextDelta | None:
    if isinstance(data, SandboxActivity) and isinstance(data.event, TextDelta):
        return data.event
    return None
