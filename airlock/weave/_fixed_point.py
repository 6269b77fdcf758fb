"""Iterating to a fixed point: stop when a state is stable, cycles, or iterations run out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

#: Why an iteration stopped.
FixedPointExit = Literal["stable", "cycle", "max_iterations"]


class FixedPointResult(BaseModel):
    """How the iteration ended, after how many iterations, and which iteration's output
    (0-based) is the result."""

    model_config = ConfigDict(frozen=True)

    exit: FixedPointExit
    iterations: int
    chosen: int


def is_stable(pre: str, post: str) -> bool:
    """Whether an iteration left the state unchanged."""
    return pre == post


def _check_window(window: int) -> None:
    if isinstance(window, bool) or not isinstance(window, int) or window < 2:
        raise ValueError(f"window must be an int of at least 2, got {window!r}")


def detect_cycle(post_hashes: Sequence[str], window: int = 3) -> int | None:
    """The index of the nearest earlier occurrence of the last hash among the last ``window``
    hashes (the last included), or None when it repeats none of them."""
    _check_window(window)
    if not post_hashes:
        return None
    last = len(post_hashes) - 1
    for i in range(last - 1, max(last - window, -1), -1):
        if post_hashes[i] == post_hashes[last]:
            return i
    return None


class FixedPoint:
    """Tracks an iteration's state hashes: :meth:`observe` each iteration's ``pre`` and
    ``post`` hashes until it returns a result.

    - ``stable``: the iteration left the state unchanged; its output is the result.
    - ``cycle``: the post-hash repeats one of the last ``window`` (this one included); the
      result collapses to the cycle's first state, the iteration whose post-hash repeated.
    - ``max_iterations``: the last iteration's output is the result.
    """

    def __init__(self, max_iterations: int = 10, window: int = 3) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            raise ValueError(f"max_iterations must be an int of at least 1, got {max_iterations!r}")
        _check_window(window)
        self.max_iterations = max_iterations
        self.window = window
        self._posts: list[str] = []
        self._result: FixedPointResult | None = None

    @property
    def iterations(self) -> int:
        """How many iterations were observed."""
        return len(self._posts)

    @property
    def result(self) -> FixedPointResult | None:
        """The result, once the iteration has ended."""
        return self._result

    def observe(self, pre: str, post: str) -> FixedPointResult | None:
        """Record one iteration; None to continue, else the result. Observing after the
        result raises RuntimeError."""
        if self._result is not None:
            raise RuntimeError(f"the iteration already ended ({self._result.exit})")
        self._posts.append(post)
        current = len(self._posts) - 1
        result: FixedPointResult | None = None
        if is_stable(pre, post):
            result = FixedPointResult(exit="stable", iterations=current + 1, chosen=current)
        elif (earlier := detect_cycle(self._posts, self.window)) is not None:
            result = FixedPointResult(exit="cycle", iterations=current + 1, chosen=earlier)
        elif current + 1 >= self.max_iterations:
            result = FixedPointResult(exit="max_iterations", iterations=current + 1, chosen=current)
        self._result = result
        return result
