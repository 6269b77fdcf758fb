"""Progress reporting for the one-time set-up (download, reassembly, wheel build, install)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Phase = Literal["download", "assemble", "verify", "build_wheel", "create_venv", "install", "done"]
Unit = Literal["files", "bytes", "steps"]


@dataclass(frozen=True)
class ProgressEvent:
    """One progress update of a set-up phase."""

    phase: Phase
    """Which phase is running."""
    completed: int
    """Units done so far in this phase."""
    total: int | None
    """Units in the whole phase, None when unknown."""
    unit: Unit
    """What ``completed`` and ``total`` count."""
    message: str = ""
    """A short human-readable note (e.g. the file being downloaded)."""


ProgressCallback = Callable[[ProgressEvent], None]
"""Receives progress events. Always called on the event loop thread of the awaiting coroutine."""


class _Reporter:
    """Forwards events to a callback on the loop thread, also from worker threads."""

    def __init__(self, callback: ProgressCallback | None) -> None:
        self._callback = callback
        self._loop = asyncio.get_running_loop()

    def __call__(self, event: ProgressEvent) -> None:
        if self._callback is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._callback(event)
        else:
            self._loop.call_soon_threadsafe(self._callback, event)
