"""Failed authentications are throttled per peer: past the limit within the window, the peer's
requests are 429 with ``Retry-After`` (even with a good credential) until the window moves on;
another peer is untouched; memory stays bounded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.identity import FailureThrottle
from airlock.identity._throttle import MAX_FAILURES

from .world import World, token, world

pytestmark = pytest.mark.timeout(60)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_peer_past_the_limit_waits_until_its_oldest_failure_leaves_the_window() -> None:
    clock = Clock()
    throttle = FailureThrottle(limit=3, window_s=60, clock=clock)
    for _ in range(2):
        throttle.failed("10.0.0.1")
        clock.now += 1
    assert throttle.wait("10.0.0.1") == 0
    throttle.failed("10.0.0.1")
    assert throttle.wait("10.0.0.1") == pytest.approx(58)
    assert throttle.wait("10.0.0.2") == 0
    clock.now += 58.5
    assert throttle.wait("10.0.0.1") == 0


def test_memory_is_bounded_by_dropping_the_least_recently_failing_peer() -> None:
    throttle = FailureThrottle(limit=1, window_s=60, max_peers=2, clock=Clock())
    for peer in ("a", "b", "a", "c"):
        throttle.failed(peer)
    assert throttle.wait("a") and throttle.wait("c")
    assert throttle.wait("b") == 0


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    async with world(tmp_path) as made:
        yield made


async def test_guessing_tokens_is_throttled_through_login_and_bearer_alike(w: World) -> None:
    async with w.client() as browser:
        for i in range(MAX_FAILURES // 2):
            assert (await browser.post("/login", data={"token": f"guess-{i}"})).status_code == 401
            headers = {"Authorization": f"Bearer guess-{i}"}
            assert (await browser.get("/api/v1/jobs", headers=headers)).status_code == 401
        refused = await browser.post("/login", data={"token": token("alice")})
        assert refused.status_code == 429 and "set-cookie" not in refused.headers
        assert refused.json()["error"]["code"] == "THROTTLED"
        assert 0 < int(refused.headers["Retry-After"]) <= 60
        good = {"Authorization": f"Bearer {token('alice')}"}
        assert (await browser.get("/api/v1/jobs", headers=good)).status_code == 429
        assert (await browser.get("/api/v1/health")).status_code == 200
