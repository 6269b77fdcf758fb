"""WarmPool's semantics with members that cost nothing: claim, refill, never reused, limits,
idle shapes, failing starts, unhealthy members, closing."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from pydantic import ValidationError

from airlock.sandbox import PoolSettings, WarmPool


class Member:
    """A pretend sandbox: healthy until told otherwise; records its destruction."""

    ids = itertools.count()

    def __init__(self) -> None:
        self.id = next(self.ids)
        self.alive = True
        self.destroyed = 0

    async def healthy(self) -> bool:
        return self.alive

    async def destroy(self) -> None:
        self.destroyed += 1


class Starter:
    """Starts members, optionally slowly or failing; counts the starts running at once."""

    def __init__(self, delay: float = 0.0, fail: int = 0) -> None:
        self.delay = delay
        self.fail = fail
        self.started: list[Member] = []
        self.running = 0
        self.most_at_once = 0

    async def __call__(self) -> Member:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await asyncio.sleep(self.delay)
            if self.fail > 0:
                self.fail -= 1
                raise RuntimeError("the engine said no")
            member = Member()
            self.started.append(member)
            return member
        finally:
            self.running -= 1


def pool(**settings: float) -> WarmPool[Member]:
    return WarmPool(PoolSettings(**settings), name="test")  # type: ignore[arg-type]


async def test_a_claim_takes_a_ready_member_and_the_pool_refills_behind_it() -> None:
    p, start = pool(size=2), Starter()
    p.declare("a", start, label="a")
    assert await p.wait_ready(5)
    first = await p.claim("a")
    assert first is not None and first in start.started
    assert await p.wait_ready(5)
    stats = p.stats()
    assert (stats.hits, stats.misses, stats.started) == (1, 0, 3)
    assert stats.claim_ms_p50 is not None
    assert [s.ready for s in stats.shapes] == [2]
    await p.aclose()


async def test_no_member_is_handed_out_twice() -> None:
    p, start = pool(size=3), Starter()
    p.declare("a", start, label="a")
    claimed = []
    for _ in range(9):
        assert await p.wait_ready(5)
        member = await p.claim("a")
        assert member is not None
        claimed.append(member.id)
    assert len(set(claimed)) == 9
    await p.aclose()


async def test_an_undeclared_shape_or_an_empty_pool_is_a_miss() -> None:
    p, start = pool(size=1), Starter(delay=0.2)
    assert await p.claim("nobody") is None  # not pooled: nothing counted against the pool
    p.declare("a", start, label="a")
    assert await p.claim("a") is None  # declared, still starting: a miss, the job starts cold
    assert p.stats().misses == 1
    await p.aclose()


async def test_size_zero_keeps_nothing() -> None:
    p, start = pool(size=0), Starter()
    p.declare("a", start, label="a")
    await asyncio.sleep(0.05)
    assert not p.enabled and start.started == [] and await p.claim("a") is None
    await p.aclose()


async def test_refills_respect_refill_concurrency_and_max() -> None:
    p, start = pool(size=5, max=7, refill_concurrency=2), Starter(delay=0.02)
    p.declare("a", start, label="a")
    p.declare("b", start, label="b")
    await asyncio.sleep(0.5)
    assert start.most_at_once == 2
    assert sum(s.ready + s.starting for s in p.stats().shapes) == 7
    await p.aclose()


async def test_an_unhealthy_member_is_destroyed_and_the_next_one_handed_out() -> None:
    p, start = pool(size=2), Starter()
    p.declare("a", start, label="a")
    assert await p.wait_ready(5)
    dead, alive = start.started
    dead.alive = False
    assert await p.claim("a") is alive
    await asyncio.sleep(0.01)
    assert dead.destroyed == 1
    await p.aclose()


async def test_failing_starts_back_off_instead_of_spinning() -> None:
    p, start = pool(size=1), Starter(fail=10**6)
    p.declare("a", start, label="a")
    await asyncio.sleep(0.6)
    stats = p.stats()
    assert 1 <= stats.failed <= 2  # 1 s after the first failure, then 2 s, …
    assert stats.shapes[0].failures == stats.failed
    await p.aclose()


async def test_a_start_that_fails_once_is_retried() -> None:
    p, start = pool(size=1), Starter(fail=1)
    p.declare("a", start, label="a")
    assert await p.wait_ready(5)
    assert p.stats().failed == 1 and p.stats().shapes[0].failures == 0
    await p.aclose()


async def test_an_idle_shape_is_emptied_until_its_next_claim() -> None:
    p, start = pool(size=2, idle_timeout_s=0.2), Starter()
    p.declare("a", start, label="a")
    assert await p.wait_ready(5)
    members = list(start.started)
    await asyncio.sleep(0.5)
    p._kick()  # the refill task's next check (it wakes at least every idle_timeout_s)
    await asyncio.sleep(0.05)
    assert all(m.destroyed == 1 for m in members)
    assert p.stats().shapes[0].ready == 0 and p.stats().shapes[0].idle
    assert await p.claim("a") is None  # a miss re-arms it
    assert await p.wait_ready(5)
    await p.aclose()


async def test_close_destroys_waiting_members_and_cancels_starts() -> None:
    p, start = pool(size=2), Starter()
    p.declare("a", start, label="a")
    assert await p.wait_ready(5)
    claimed = await p.claim("a")
    slow = Starter(delay=30)
    p.declare("b", slow, label="b")
    await asyncio.sleep(0.05)
    await p.aclose()
    assert claimed is not None and claimed.destroyed == 0  # the job's to destroy, not the pool's
    assert all(m.destroyed == 1 for m in start.started if m is not claimed)
    assert slow.started == [] and slow.running == 0
    assert await p.claim("a") is None
    await p.aclose()  # idempotent


def test_settings_are_validated() -> None:
    assert PoolSettings().size == 0
    for bad in ({"size": -1}, {"max": 0}, {"idle_timeout_s": 0}, {"refill_concurrency": 0}, {"sise": 2}):
        with pytest.raises(ValidationError):
            PoolSettings.model_validate(bad)


async def test_a_retired_member_is_removed_in_the_background_and_awaited_by_close() -> None:
    p, start = pool(size=1), Starter()
    p.declare("a", start, label="a")
    assert await p.wait_ready(5)
    member = await p.claim("a")
    assert member is not None
    removing = asyncio.Event()

    async def slow_teardown() -> None:
        await removing.wait()
        await member.destroy()

    p.retire(slow_teardown())
    await asyncio.sleep(0.01)
    assert member.destroyed == 0
    removing.set()
    await p.settle()
    assert member.destroyed == 1
    second = await p.claim("a") if await p.wait_ready(5) else None
    assert second is not None
    gate = asyncio.Event()

    async def last_teardown() -> None:
        await asyncio.sleep(0.05)
        gate.set()

    p.retire(last_teardown())
    await p.aclose()
    assert gate.is_set()  # close waited for it
