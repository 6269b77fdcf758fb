"""A sandbox observer that records what the backends report provisioned."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from airlock.sandbox import SandboxObserver, set_sandbox_observer


class Provisions(SandboxObserver):
    """Records each sandbox a backend reports provisioned: (backend, cold or warm)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def provisioned(self, backend: str, isolation: str, start: str, seconds: float) -> None:
        self.seen.append((backend, start))


@contextlib.contextmanager
def recorded_provisions() -> Iterator[Provisions]:
    """A :class:`Provisions` installed as the process's sandbox observer while the block runs."""
    recorder = Provisions()
    previous = set_sandbox_observer(recorder)
    try:
        yield recorder
    finally:
        set_sandbox_observer(previous)
