"""An execution's outgoing events: every event kept, text deltas merged when the reader lags.

The turn puts events as it runs; the Execute stream takes them as fast as its reader (the
controller, then a watcher) reads. Every event but a ``text_delta`` is kept in order. A delta
put while the previous one still waits (of the same model call) is merged into it, so at most
one delta waits at a time; a merged delta longer than ``max_delta_chars`` keeps its end and
counts the characters left out in ``dropped_chars``. The final text is never in a delta (it
comes in the output), so nothing a turn returns is lost.
"""

from __future__ import annotations

import asyncio
from collections import deque

from airlock._proto.runner.v1 import runner_pb2 as pb

#: The longest text a waiting delta keeps (its end: what the model wrote last).
MAX_DELTA_CHARS = 16_384


class EventQueue:
    """A FIFO of turn events that merges waiting text deltas (see the module's docstring)."""

    def __init__(self, max_delta_chars: int = MAX_DELTA_CHARS) -> None:
        self._items: deque[pb.TurnEvent] = deque()
        self._ready = asyncio.Event()
        self.max_delta_chars = max_delta_chars
        #: Deltas merged into a waiting one, and characters left out, so far.
        self.merged = 0
        self.dropped_chars = 0

    def put_nowait(self, event: pb.TurnEvent) -> None:
        """Queue ``event`` (a delta may be merged into the waiting one instead)."""
        if event.WhichOneof("kind") == "text_delta" and self._merge(event.text_delta):
            return
        self._items.append(event)
        self._ready.set()

    async def put(self, event: pb.TurnEvent) -> None:
        """As :meth:`put_nowait` (never blocks: only deltas are bounded)."""
        self.put_nowait(event)

    async def get(self) -> pb.TurnEvent:
        """The next event, waiting for one."""
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        return self._items.popleft()

    def qsize(self) -> int:
        """Events waiting."""
        return len(self._items)

    def _merge(self, delta: pb.TextDelta) -> bool:
        """Merge ``delta`` into the waiting delta of its call, when it is the last event."""
        if not self._items or self._items[-1].WhichOneof("kind") != "text_delta":
            return False
        waiting = self._items[-1].text_delta
        if waiting.iteration != delta.iteration:
            return False
        from airlock.turn import joined_delta_text  # a turn runs: the package is loaded

        before = waiting.dropped_chars + delta.dropped_chars
        text, dropped = joined_delta_text(waiting.text, delta.text, before, self.max_delta_chars)
        self.dropped_chars += dropped - before
        waiting.text, waiting.dropped_chars = text, dropped
        self.merged += 1
        return True
