"""``GET /api/v1/agents/{name}/usage``: an agent's cost and tokens per hour or day, from the jobs
of the caller's tenant that finished in the window (real runs on the process backend, each
costing a known amount); bad windows are 422 naming the parameter; an unknown agent 404."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from airlock.jobs import JobState
from airlock.testing import text_step
from airlock.web._usage import buckets
from layer0 import TurnInput

from .world import World, process_agent, world

pytestmark = pytest.mark.timeout(90)


@dataclass(frozen=True)
class Use:
    finished_at: datetime
    cost: Decimal
    tokens_in: int
    tokens_out: int


T0 = datetime(2026, 11, 1, 10, 30, tzinfo=UTC)


def test_buckets_cover_the_window_and_count_each_job_in_its_own() -> None:
    uses = [
        Use(T0 + timedelta(minutes=10), Decimal("0.10"), 5, 1),  # 10:40 -> the 10:00 bucket
        Use(T0 + timedelta(minutes=29, seconds=59), Decimal("0.05"), 1, 1),  # 10:59:59 -> 10:00
        Use(T0 + timedelta(minutes=30), Decimal("1"), 2, 3),  # 11:00 -> 11:00
    ]
    rows, totals = buckets(uses, T0, T0 + timedelta(hours=3), "hour")  # type: ignore[arg-type]
    assert [r["start"] for r in rows] == [f"2026-11-01T{h}:00:00+00:00" for h in (10, 11, 12, 13)]
    assert [(r["jobs"], r["cost_usd"], r["tokens_in"]) for r in rows] == [
        (2, "0.15", 6), (1, "1", 2), (0, "0", 0), (0, "0", 0),
    ]  # fmt: skip
    assert totals == {"jobs": 3, "cost_usd": "1.15", "tokens_in": 8, "tokens_out": 5}
    days, _ = buckets(uses, T0, T0 + timedelta(days=1), "day")  # type: ignore[arg-type]
    assert [(d["start"][:10], d["jobs"]) for d in days] == [("2026-11-01", 3), ("2026-11-02", 0)]


@pytest.fixture
async def w(tmp_path: Path) -> AsyncIterator[World]:
    paid = process_agent([text_step("ok", usage=(100, 20), cost="0.25")])
    async with world(tmp_path, {"a": paid, "ops": paid}, workers=True) as made:
        third = await made.service.submit("a", TurnInput.new("again"), tenant="red", owner="alice")
        for job in (made.red, made.blue, third):
            assert (await made.service.wait(job.id)).state is JobState.SUCCEEDED
        yield made


async def test_each_tenant_sees_its_own_spend(w: World) -> None:
    async with w.client("alice") as red, w.client("bob") as blue, w.client("root") as root:
        mine = (await red.get("/api/v1/agents/a/usage")).json()
        theirs = (await blue.get("/api/v1/agents/a/usage")).json()
        everyone = (await root.get("/api/v1/agents/a/usage")).json()
        only_blue = (await root.get("/api/v1/agents/a/usage", params={"tenant": "blue"})).json()
        refused = await red.get("/api/v1/agents/a/usage", params={"tenant": "blue"})
    assert mine["totals"] == {"jobs": 2, "cost_usd": "0.50", "tokens_in": 200, "tokens_out": 40}
    assert theirs["totals"]["jobs"] == 1 and theirs["totals"]["cost_usd"] == "0.25"
    assert everyone["totals"]["jobs"] == 3 and only_blue["totals"]["jobs"] == 1
    assert refused.status_code == 403
    assert mine["bucket"] == "day" and len(mine["buckets"]) == 8  # 7 days reach into an eighth
    assert sum(b["jobs"] for b in mine["buckets"]) == 2 and not mine["truncated"]


async def test_a_window_narrows_the_count_and_picks_hours(w: World) -> None:
    now = datetime.now(UTC)
    async with w.client("alice") as red:
        recent = await red.get(
            "/api/v1/agents/a/usage", params={"since": (now - timedelta(hours=1)).isoformat()}
        )
        before = await red.get(
            "/api/v1/agents/a/usage",
            params={
                "since": (now - timedelta(days=3)).isoformat(),
                "until": (now - timedelta(days=1)).isoformat(),
            },
        )
    assert recent.json()["bucket"] == "hour" and recent.json()["totals"]["jobs"] == 2
    assert before.json()["totals"]["jobs"] == 0


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"}, "since"),
        ({"since": "2020-01-01T00:00:00Z", "bucket": "hour"}, "bucket"),
        ({"bucket": "week"}, "bucket"),
        ({"since": "yesterday"}, "since"),
    ],
)
async def test_a_bad_window_is_422_naming_the_parameter(w: World, params: dict[str, str], field: str) -> None:
    async with w.client("alice") as red:
        response = await red.get("/api/v1/agents/a/usage", params=params)
    assert response.status_code == 422, response.text
    assert field in response.json()["error"]["fields"]


async def test_an_unknown_agent_is_404_and_no_credential_401(w: World) -> None:
    async with w.client("alice") as red, w.client() as nobody:
        assert (await red.get("/api/v1/agents/nope/usage")).status_code == 404
        assert (await nobody.get("/api/v1/agents/a/usage")).status_code == 401
