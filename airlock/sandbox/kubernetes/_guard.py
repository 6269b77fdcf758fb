"""Whether jobs may run in a sandbox namespace: :class:`EnforcementGuard`, the latest proof kept fresh.

No job runs on a namespace until a proof (:mod:`._enforcement`) found NetworkPolicy enforced
there; the proof is repeated every ``enforcement.interval_s`` (10 minutes) in the background
and made anew by every controller process (a restarted controller trusts nothing it did not
see). While the latest result is ``failed`` or ``unproven``, every job fails at once with
``isolation_violation`` naming the failed checks; such a result is proven again on demand at
most once a minute, so a fixed cluster is noticed without waiting for the next period. Each
result is published as the namespace's annotation :data:`~._enforcement_result.ANNOTATION`
(``airlock doctor`` shows it). ``network_policy: assume_enforced`` skips the proof, with a
warning at every start.

Guards are shared per event loop, cluster and namespace (:func:`shared_guard`): every agent's
sandbox of one controller asks the same guard, so one proof serves them all.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from layer0 import EnvError

from .._observer import sandbox_observer
from ._enforcement_result import EnforcementResult

__all__ = ["EnforcementGuard", "Prover", "Publisher", "refusal", "shared_guard"]

_log = logging.getLogger("airlock.sandbox.kubernetes")
#: Seconds before a failed or unproven result is proven again on demand.
RETRY_S = 60.0

Prover = Callable[[], Awaitable[EnforcementResult]]
Publisher = Callable[[EnforcementResult], Awaitable[None]]


def refusal(result: EnforcementResult) -> EnvError:
    """``isolation_violation`` for a result that allows no job, naming its failed checks."""
    failed = "; ".join(c.line() for c in result.failed_checks())
    return EnvError.isolation_violation(
        f"NetworkPolicy enforcement is {result.status}: {result.summary()}"
        + (f"; failed checks: {failed}" if failed else "")
        + ". Every sandbox would sit on the open pod network, so no job runs on this cluster. "
        "Use a CNI that enforces NetworkPolicy (Calico, Cilium, GKE Dataplane V2, the EKS "
        "network policy agent, ...); the proof is repeated every minute while it fails. "
        "backends.kubernetes.network_policy: assume_enforced runs without proof, at your risk"
    )


class EnforcementGuard:
    """The latest proof for one namespace, and the decision it implies.

    Args:
        namespace: the sandbox namespace it guards.
        mode: ``verify`` (prove before any job) or ``assume_enforced`` (never prove).
        interval_s: seconds between two background proofs.
        prove: makes one proof (never raises: a problem is an ``unproven`` result).
        publish: records a result where operators see it (the namespace annotation).
    """

    def __init__(
        self,
        *,
        namespace: str,
        mode: str,
        interval_s: float,
        prove: Prover,
        publish: Publisher | None = None,
    ) -> None:
        self.namespace = namespace
        self.mode = mode
        self.interval_s = interval_s
        self._prove = prove
        self._publish = publish
        self._latest: EnforcementResult | None = None
        self._lock = asyncio.Lock()
        self._loop_task: asyncio.Task[None] | None = None
        if mode == "assume_enforced":
            self._latest = EnforcementResult(
                status="assumed",
                namespace=namespace,
                checked_at=datetime.now(UTC),
                reason="backends.kubernetes.network_policy is assume_enforced: no proof was made",
            )
            _log.warning(
                "NetworkPolicy enforcement in namespace %r is ASSUMED, not proven "
                "(backends.kubernetes.network_policy: assume_enforced): if the cluster's CNI "
                "ignores NetworkPolicy, every sandbox sits on the open pod network",
                namespace,
            )

    @property
    def latest(self) -> EnforcementResult | None:
        """The latest result (None before the first proof ended)."""
        return self._latest

    async def require(self) -> None:
        """Return when jobs may run; prove first when there is no usable result.

        Raises:
            EnvError: ``isolation_violation`` while enforcement is failed or unproven.
        """
        if self.mode == "assume_enforced":
            return
        result = await self._current()
        self._ensure_loop()
        if not result.allows_jobs:
            raise refusal(result)

    async def _current(self) -> EnforcementResult:
        async with self._lock:
            latest = self._latest
            if (
                latest is None
                or latest.age_s() > 2 * self.interval_s
                or (not latest.allows_jobs and latest.age_s() > RETRY_S)
            ):
                latest = await self._record(await self._prove())
            return latest

    async def _record(self, result: EnforcementResult) -> EnforcementResult:
        self._latest = result
        sandbox_observer().isolation_proved("kubernetes", result.status)
        log = _log.info if result.allows_jobs else _log.error
        log("NetworkPolicy enforcement %s\n%s", result.summary(), result.evidence())
        if self._publish is not None:
            await self._publish(result)
        return result

    def _ensure_loop(self) -> None:
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.create_task(
                self._repeat(), name=f"prove enforcement in {self.namespace}"
            )

    async def _repeat(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            async with self._lock:
                await self._record(await self._prove())

    async def aclose(self) -> None:
        """Stop the background proofs."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.gather(self._loop_task, return_exceptions=True)
            self._loop_task = None


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], EnforcementGuard]] = (
    weakref.WeakKeyDictionary()
)


def shared_guard(cluster: str, namespace: str, make: Callable[[], EnforcementGuard]) -> EnforcementGuard:
    """The guard of ``namespace`` on ``cluster`` (its API server's address) in this event loop,
    made by ``make`` the first time."""
    guards = _SHARED.setdefault(asyncio.get_running_loop(), {})
    guard = guards.get((cluster, namespace))
    if guard is None:
        guard = guards[(cluster, namespace)] = make()
    return guard
