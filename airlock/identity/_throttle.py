"""Failed authentications per peer: past a limit within a window, the peer's requests are
refused with 429 until the window moves on, so a token cannot be guessed at wire speed through
``/login`` or a bearer header. Memory is bounded: the least recently failing peers are dropped."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

#: Failures allowed per peer within :data:`WINDOW_S`.
MAX_FAILURES = 20
#: The window, seconds.
WINDOW_S = 60.0
#: Peers remembered at once.
MAX_PEERS = 10_000


class FailureThrottle:
    """Counts each peer's failed authentications in a sliding window."""

    def __init__(
        self,
        limit: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        max_peers: int = MAX_PEERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._limit = limit
        self._window_s = window_s
        self._max_peers = max_peers
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def wait(self, peer: str) -> float:
        """Seconds until ``peer`` may try again (0: now)."""
        times = self._recent(peer)
        if times is None or len(times) < self._limit:
            return 0.0
        return max(times[0] + self._window_s - self._clock(), 0.001)

    def failed(self, peer: str) -> None:
        """Count one failure of ``peer``."""
        times = self._recent(peer)
        if times is None:
            times = self._failures[peer] = deque()
            while len(self._failures) > self._max_peers:
                self._failures.popitem(last=False)
        self._failures.move_to_end(peer)
        times.append(self._clock())
        while len(times) > self._limit:
            times.popleft()

    def _recent(self, peer: str) -> deque[float] | None:
        times = self._failures.get(peer)
        if times is None:
            return None
        horizon = self._clock() - self._window_s
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[peer]
            return None
        return times
