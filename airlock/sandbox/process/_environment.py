"""LocalProcessEnvironment: the process backend as a ``layer0.Environment``."""

from __future__ import annotations

from typing import Any

from airlock.sandbox._environment import SandboxEnvironment
from airlock.sandbox._events import SandboxEventSink

from ._backend import ProcessBackend

__all__ = ["LocalProcessEnvironment"]


class LocalProcessEnvironment(SandboxEnvironment):
    """:class:`ProcessBackend` as a ``layer0.Environment`` (``run(turn, input, spec)``).

    Args:
        events: default sink for the turn's events (``run(..., events=)`` overrides).
        options: :class:`ProcessBackend`'s arguments.
    """

    sandbox: ProcessBackend

    def __init__(self, *, events: SandboxEventSink | None = None, **options: Any) -> None:
        super().__init__(ProcessBackend(**options), events=events)
