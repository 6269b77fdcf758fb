"""Tenant quotas over real gRPC: each at its limit and one past it (RESOURCE_EXHAUSTED naming
the quota, its limit and its use), concurrent submits that cannot overshoot, the day's cost
capping a starting turn, and ``ListTenants`` showing use against limits."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import grpc
import pytest

from airlock import wire
from airlock._proto.controller.v1 import controller_pb2 as cpb
from airlock.controller import capped
from airlock.jobs import JobState
from layer0 import TurnConfig, TurnInput, TurnMetadata, TurnOutput

from .world import AUTH, world


def _auth(**tenants: dict[str, Any]) -> dict[str, Any]:
    return {**AUTH, "tenants": {name: {"quotas": quotas} for name, quotas in tenants.items()}}


def _submit(agent: str = "a") -> cpb.SubmitJobRequest:
    return cpb.SubmitJobRequest(agent=agent, input=wire.input_to_proto(TurnInput.new("work")))


def _quota(error: grpc.aio.AioRpcError) -> dict[str, str]:
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    details = wire.status_details(error)
    assert details.reason == "QUOTA_EXCEEDED"
    return dict(details.metadata)


async def test_concurrent_submits_cannot_overshoot_the_concurrency_quota(tmp_path: Path) -> None:
    async with world(tmp_path, _auth(blue={"concurrent_jobs": 3})) as w:  # blue holds one job

        async def one() -> str:
            try:
                await w.call("bob", "SubmitJob", _submit())
            except grpc.aio.AioRpcError as e:
                return _quota(e)["quota"]
            return "ok"

        outcomes = await asyncio.gather(*(one() for _ in range(50)))
        assert sorted(set(outcomes)) == ["concurrent_jobs", "ok"] and outcomes.count("ok") == 2
        blue = [j for j in await w.service.find() if j.tenant == "blue"]
        assert len(blue) == 3 and all(j.state is JobState.QUEUED for j in blue)
        refused = await w.refused("bob", "SubmitJob", _submit())
        assert _quota(refused) == {"quota": "concurrent_jobs", "limit": "3", "used": "3", "tenant": "blue"}
        await w.call("bob", "CancelJob", cpb.CancelJobRequest(id=w.blue.id))
        await w.call("bob", "SubmitJob", _submit())  # a finished job frees its place
        assert (await w.call("alice", "SubmitJob", _submit())).tenant == "red"  # red has no such limit


async def test_the_rate_quota_counts_the_last_minute(tmp_path: Path) -> None:
    async with world(tmp_path, _auth(red={"jobs_per_minute": 3})) as w:  # red submitted one
        for _ in range(2):
            await w.call("alice", "SubmitJob", _submit())
        assert _quota(await w.refused("alice", "SubmitJob", _submit()))["quota"] == "jobs_per_minute"
        for job in await w.service.find():
            await w.call("root", "CancelJob", cpb.CancelJobRequest(id=job.id))
        assert _quota(await w.refused("alice", "SubmitJob", _submit()))["used"] == "3"  # finished still count


async def test_the_days_cost_refuses_new_jobs_once_spent(tmp_path: Path) -> None:
    async with world(tmp_path, _auth(red={"cost_per_day": "0.50"})) as w:
        assert await w.service.quotas.cost_left("red") == Decimal("0.50")
        metadata = TurnMetadata.empty().model_copy(update={"cost": Decimal("0.30")})
        output = TurnOutput.new("done").model_copy(update={"metadata": metadata})
        await w.store.transition(w.red.id, JobState.SUCCEEDED, output=output)
        assert await w.service.quotas.cost_left("red") == Decimal("0.20")
        await w.call("alice", "SubmitJob", _submit())
        second = await w.service.submit("a", TurnInput.new("x"), tenant="red", owner="alice")
        await w.store.transition(second.id, JobState.SUCCEEDED, output=output)
        refused = _quota(await w.refused("alice", "SubmitJob", _submit()))
        assert (refused["quota"], refused["limit"], refused["used"]) == ("cost_per_day", "0.50", "0.60")


def test_a_starting_turn_may_spend_only_what_the_day_leaves() -> None:
    plain = TurnInput.new("x")
    assert capped(plain, Decimal("1.00"), Decimal("0.25")).config == TurnConfig(max_cost=Decimal("0.25"))
    assert capped(plain, None, Decimal("0.25")).config == TurnConfig(max_cost=Decimal("0.25"))
    own = TurnInput.new("x", config=TurnConfig(max_cost=Decimal("0.10"), max_turns=3))
    assert capped(own, Decimal("1.00"), Decimal("0.25")) == own
    assert capped(own, None, Decimal("0.05")).config == TurnConfig(max_cost=Decimal("0.05"), max_turns=3)
    assert capped(plain, Decimal("1.00"), None) == plain


async def test_a_sandbox_larger_than_the_tenant_allows_is_refused(tmp_path: Path) -> None:
    async with world(tmp_path, _auth(carl={"max_memory": "256Mi"})) as w:
        refused = _quota(await w.refused("zed", "SubmitJob", _submit()))
        assert (refused["quota"], refused["limit"], refused["used"]) == ("max_memory", "256Mi", "unlimited")
        assert len(await w.service.find()) == 2


async def test_artifact_bytes_kept_count_against_the_tenant(tmp_path: Path) -> None:
    async with world(tmp_path, _auth(red={"artifact_bytes": 10})) as w:  # red keeps 3 bytes
        assert await w.service.quotas.artifact_room("red") == 7
        await w.call("alice", "SubmitJob", _submit())
        await w.store.save_artifacts(w.red.id, [("out/r.txt", b"red"), ("out/big", b"x" * 7)])
        assert await w.service.quotas.artifact_room("red") == 0
        assert _quota(await w.refused("alice", "SubmitJob", _submit()))["quota"] == "artifact_bytes"


async def test_tenants_show_their_use_against_their_limits(tmp_path: Path) -> None:
    async with world(tmp_path, _auth(red={"concurrent_jobs": 5}, carl={"max_cpu": "2"})) as w:
        listed = await w.call("root", "ListTenants", cpb.ListTenantsRequest())
        assert [t.tenant for t in listed.tenants] == ["default", "carl", "red"]
        red = {q.quota: (q.limit if q.HasField("limit") else None, q.used) for q in listed.tenants[2].quotas}
        assert red["concurrent_jobs"] == ("5", "1") and red["jobs_per_minute"] == (None, "1")
        assert red["artifact_bytes"] == (None, "3") and red["max_cpu"] == (None, "-")
        carl = {q.quota: (q.limit if q.HasField("limit") else None, q.used) for q in listed.tenants[1].quotas}
        assert carl["max_cpu"] == ("2", "-") and carl["concurrent_jobs"] == (None, "0")
        own = await w.call("alice", "ListTenants", cpb.ListTenantsRequest())
        assert [t.tenant for t in own.tenants] == ["red"]


@pytest.mark.parametrize("quota", ["concurrent_jobs", "jobs_per_minute"])
async def test_a_quota_of_one_admits_exactly_one(tmp_path: Path, quota: str) -> None:
    async with world(tmp_path, _auth(carl={quota: 1})) as w:
        await w.service.submit("a", TurnInput.new("first"), tenant="carl", owner="x")
        with pytest.raises(Exception, match=f"its {quota} quota: 1 used of 1"):
            await w.service.submit("a", TurnInput.new("second"), tenant="carl", owner="x")
