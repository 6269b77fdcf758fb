"""Warm pools: sandboxes started ahead of their jobs, holding no secret and no agent.

Backend-neutral. A backend turns a job's :class:`~._port.SandboxRequest` into a *shape* key
(image, isolation, resource class, network profile: everything fixed when a sandbox starts)
and declares each shape it may be asked for with a function that starts one member of it.
The pool keeps ``size`` members of every declared shape started and healthy; :meth:`WarmPool.claim`
hands one over and a background task refills behind it. The job's agent, input and
credentials are bound by the backend after the claim, so one pool serves every agent whose
sandboxes share a shape. A claimed member belongs to its job and is destroyed with it: no
member is ever handed out twice, so no state crosses jobs.

Housekeeping: refills run at most ``refill_concurrency`` at a time and the pools hold at
most ``max`` members (starting ones included), so a refill never takes the host from jobs;
a shape claimed from for none of ``idle_timeout_s`` is emptied until its next claim; a shape
whose members fail to start backs off (doubling up to a minute) instead of spinning.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["PoolMember", "PoolSettings", "PoolStats", "ShapeStats", "WarmPool", "shape_id"]

_log = logging.getLogger("airlock.sandbox.pool")

#: Longest pause between two attempts to start a member of a shape whose starts fail.
_MAX_BACKOFF_S = 60.0
#: Claim latencies kept for the statistics.
_LATENCIES_KEPT = 1024


def shape_id(shape: object) -> str:
    """A short stable id of a shape (its ``repr``: a frozen dataclass's fields), for the labels
    of its members."""
    return hashlib.sha256(repr(shape).encode()).hexdigest()[:12]


class PoolSettings(BaseModel):
    """The ``pool`` section of ``airlock.yaml``: warm sandboxes per shape (``size: 0``: none)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Ready sandboxes kept per sandbox shape (0: every job starts its sandbox cold).
    size: int = Field(default=0, ge=0, le=256)
    #: Sandboxes all shapes' pools hold at once, those starting included.
    max: int = Field(default=32, ge=1, le=4096)
    #: A shape no job claimed from for this long is emptied until its next claim.
    idle_timeout_s: float = Field(default=600.0, gt=0)
    #: Members started at once while refilling (jobs' own cold starts are not counted).
    refill_concurrency: int = Field(default=2, ge=1, le=64)


class PoolMember(Protocol):
    """A started sandbox waiting in a pool."""

    async def healthy(self) -> bool:
        """Whether it can still take a job (checked at claim time)."""
        ...

    async def destroy(self) -> None:
        """Remove it and everything it holds (idempotent; never raises)."""
        ...


class ShapeStats(BaseModel):
    """One shape's pool, now."""

    shape: str
    ready: int
    starting: int
    failures: int
    idle: bool


class PoolStats(BaseModel):
    """Hits, misses and claim latency of a pool since it was created."""

    hits: int
    misses: int
    started: int
    failed: int
    destroyed: int
    claim_ms_p50: float | None
    claim_ms_p95: float | None
    shapes: list[ShapeStats]


M = TypeVar("M", bound=PoolMember)


@dataclass
class _Shape(Generic[M]):
    key: Hashable
    label: str
    start: Callable[[], Awaitable[M]]
    last_claim: float
    ready: deque[M] = field(default_factory=deque)
    starting: int = 0
    failures: int = 0
    retry_at: float = 0.0

    def idle(self, now: float, timeout: float) -> bool:
        return now - self.last_claim > timeout


class WarmPool(Generic[M]):
    """Members of every declared shape, started ahead of their jobs (see the module doc).

    Args:
        settings: sizes and timeouts.
        name: for logs (the backend's name).
    """

    def __init__(self, settings: PoolSettings, *, name: str = "sandbox") -> None:
        self.settings = settings
        self.name = name
        self._shapes: dict[Hashable, _Shape[M]] = {}
        self._wanted = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._starts: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self._hits = self._misses = self._started = self._failed = self._destroyed = 0
        self._claim_ms: deque[float] = deque(maxlen=_LATENCIES_KEPT)

    @property
    def enabled(self) -> bool:
        """Whether the pool keeps any member (``size`` above 0)."""
        return self.settings.size > 0 and not self._closed

    def declare(self, key: Hashable, start: Callable[[], Awaitable[M]], *, label: str) -> None:
        """Keep members of shape ``key`` ready, each started by ``start()`` (the first
        declaration of a shape wins; later ones only mark it as wanted again)."""
        if not self.enabled:
            return
        shape = self._shapes.get(key)
        if shape is None:
            self._shapes[key] = _Shape(key=key, label=label, start=start, last_claim=time.monotonic())
            _log.info("%s pool: keeping %d ready of %s", self.name, self.settings.size, label)
        else:
            shape.last_claim = time.monotonic()
        self._kick()

    def declared(self, key: Hashable) -> bool:
        """Whether shape ``key`` is pooled."""
        return key in self._shapes

    async def claim(self, key: Hashable) -> M | None:
        """A ready, healthy member of shape ``key``, now the caller's to use and destroy;
        None when the shape is not pooled or none is ready (the caller starts one cold)."""
        began = time.perf_counter()
        shape = self._shapes.get(key) if self.enabled else None
        if shape is None:
            return None
        shape.last_claim = time.monotonic()
        try:
            while shape.ready:
                member = shape.ready.popleft()
                if await member.healthy():
                    self._hits += 1
                    self._claim_ms.append((time.perf_counter() - began) * 1000)
                    return member
                _log.warning("%s pool: a member of %s was no longer healthy; removed", self.name, shape.label)
                self._spawn(self._destroy(member))
            self._misses += 1
            return None
        finally:
            self._kick()

    def retire(self, teardown: Awaitable[None]) -> None:
        """Finish a claimed member's removal in the background (its job is done and nothing
        runs in it); :meth:`settle` and :meth:`aclose` wait for it."""
        self._spawn(teardown)

    async def settle(self) -> None:
        """Wait for every removal under way (retired members, expired or unhealthy ones)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def wait_ready(self, timeout: float = 60.0) -> bool:  # noqa: ASYNC109
        """Wait until every declared shape holds ``size`` ready members; False on timeout."""

        def full() -> bool:
            return all(len(s.ready) >= self.settings.size for s in self._shapes.values())

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(full), timeout)
            except TimeoutError:
                return False
        return True

    def stats(self) -> PoolStats:
        """The pool's counters and claim latency so far."""
        latencies = list(self._claim_ms)
        now = time.monotonic()
        return PoolStats(
            hits=self._hits,
            misses=self._misses,
            started=self._started,
            failed=self._failed,
            destroyed=self._destroyed,
            claim_ms_p50=round(statistics.median(latencies), 2) if latencies else None,
            claim_ms_p95=round(_quantile(latencies, 0.95), 2) if latencies else None,
            shapes=[
                ShapeStats(
                    shape=s.label,
                    ready=len(s.ready),
                    starting=s.starting,
                    failures=s.failures,
                    idle=s.idle(now, self.settings.idle_timeout_s),
                )
                for s in self._shapes.values()
            ],
        )

    async def aclose(self) -> None:
        """Stop refilling and destroy every member still waiting (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        starts = list(self._starts)
        for t in starts:
            t.cancel()
        await asyncio.gather(*starts, return_exceptions=True)
        members = [m for s in self._shapes.values() for m in s.ready]
        for s in self._shapes.values():
            s.ready.clear()
        await asyncio.gather(*(self._destroy(m) for m in members), return_exceptions=True)
        await self.settle()
        if self._hits or self._misses:
            _log.info("%s pool closed: %s", self.name, self.stats().model_dump_json(exclude={"shapes"}))

    # -- refilling ------------------------------------------------------------------------

    def _kick(self) -> None:
        self._wanted.set()
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(
                self._refill_forever(), name=f"{self.name}-pool"
            )

    async def _refill_forever(self) -> None:
        # ``wait_for`` may swallow a cancel that meets its inner wait's completion: check too.
        while not self._closed:
            self._wanted.clear()
            wake = self._refill_once(time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wanted.wait(), wake)

    def _refill_once(self, now: float) -> float:
        """Empty idle shapes, start what is missing within the limits; seconds until the
        next check is due."""
        wake = min(self.settings.idle_timeout_s, 30.0)
        held = sum(len(s.ready) + s.starting for s in self._shapes.values())
        starting = sum(s.starting for s in self._shapes.values())
        for s in self._shapes.values():
            if s.idle(now, self.settings.idle_timeout_s):
                while s.ready:
                    held -= 1
                    self._spawn(self._destroy(s.ready.popleft()))
                continue
            if s.retry_at > now:
                wake = min(wake, s.retry_at - now)
                continue
            while (
                len(s.ready) + s.starting < self.settings.size
                and held < self.settings.max
                and starting < self.settings.refill_concurrency
            ):
                s.starting += 1
                held += 1
                starting += 1
                task = asyncio.get_running_loop().create_task(self._start_one(s))
                self._starts.add(task)
                task.add_done_callback(self._starts.discard)
        return max(wake, 0.01)

    async def _start_one(self, shape: _Shape[M]) -> None:
        try:
            member = await shape.start()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._failed += 1
            shape.failures += 1
            backoff = min(_MAX_BACKOFF_S, 0.5 * 2 ** min(shape.failures, 8))
            shape.retry_at = time.monotonic() + backoff
            _log.warning(
                "%s pool: a member of %s did not start (%s); next try in %.1fs",
                self.name,
                shape.label,
                e,
                backoff,
            )
        else:
            self._started += 1
            shape.failures = 0
            if self._closed:
                await self._destroy(member)
            else:
                shape.ready.append(member)
        finally:
            shape.starting -= 1
            self._wanted.set()
            async with self._changed:
                self._changed.notify_all()

    async def _destroy(self, member: M) -> None:
        self._destroyed += 1
        try:
            await member.destroy()
        except Exception:  # destroy never raises by contract; a bug must not kill the pool
            _log.exception("%s pool: destroying a member failed", self.name)

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
