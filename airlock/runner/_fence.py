"""The runner's own check of its network before the first turn: :class:`NetworkFence`.

On Kubernetes the controller proves, per namespace, that NetworkPolicy is enforced; a pod
could still land on a node or network where it is not (a policy not yet programmed, a node
whose agent is down). So before its first turn the runner tries each ``--fence`` address
(the cloud metadata service, the API server) once, all at once, for a fraction of a second
each, starting as soon as it serves (the check runs while the controller waits for health
and binds the job). An address that accepts the connection fails every Execute with
FAILED_PRECONDITION and ``airlock-reason: isolation``; refused, unreachable or silent ones
pass. It never sends a byte.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

__all__ = ["DEFAULT_FENCE_TIMEOUT_S", "NetworkFence", "split_address"]

#: Seconds one attempt may take; a destination that neither answers nor refuses by then is
#: unreachable for the fence's purpose.
DEFAULT_FENCE_TIMEOUT_S = 0.5


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` (an IPv6 host in brackets) as ``(host, port)``.

    Raises:
        ValueError: no port, or one out of range.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address!r} is not host:port")
    return host.strip("[]"), int(port)


class NetworkFence:
    """Addresses the sandbox must not reach, tried once when :meth:`start` is called."""

    def __init__(self, addresses: Sequence[str], timeout: float = DEFAULT_FENCE_TIMEOUT_S) -> None:
        self.addresses = tuple(addresses)
        self.targets = [split_address(a) for a in self.addresses]
        self.timeout = timeout
        self._check: asyncio.Task[list[str]] | None = None

    def start(self) -> None:
        """Begin the attempts (in the background; :meth:`breaches` waits for them)."""
        if self._check is None and self.targets:
            self._check = asyncio.create_task(self._attempt_all(), name="network fence")

    async def breaches(self) -> list[str]:
        """The addresses that accepted a connection (empty: the fence holds)."""
        self.start()
        return [] if self._check is None else await asyncio.shield(self._check)

    async def _attempt_all(self) -> list[str]:
        reached = await asyncio.gather(*(self._reaches(host, port) for host, port in self.targets))
        return [address for address, ok in zip(self.addresses, reached, strict=True) if ok]

    async def _reaches(self, host: str, port: int) -> bool:
        try:
            async with asyncio.timeout(self.timeout):
                _, writer = await asyncio.open_connection(host, port)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True
