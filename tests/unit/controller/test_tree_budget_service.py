"""A budget across a delegated job tree, end to end on the process backend: the tree's spend
stays within its limit plus one model call per running job, a later child is not started, the
running ones end with exit reason budget_exhausted; past ``downgrade.at`` later calls ask for
the cheaper model; the root's record tells each decision."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, ServiceSettings, SqliteJobStore
from airlock.controller._service_settings import NotAnApprover
from airlock.jobs import EffectApplied, JobState, SandboxActivity, TreeBudgetChanged
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step, tools_step
from airlock.turn import InferenceStarted
from layer0 import TurnInput

pytestmark = pytest.mark.timeout(180)

WORKERS = ("north", "south", "east")
CALL = "0.20"


def scripted(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


def worker(name: str) -> dict[str, Any]:
    """Four calls of 0.20 each: 0.80, more than a third of the tree's 1.00."""
    steps = [
        tool_step("bash", {"command": f"sleep 1; echo {name} {i}"}, id=f"t{i}", cost=CALL, usage=(100, 10))
        for i in range(3)
    ]
    return scripted([*steps, text_step(f"{name} done", cost=CALL)], ["bash"])


def config(budget: dict[str, Any]) -> dict[str, Any]:
    planner = scripted(
        [
            tools_step([("delegate", {"agent": w, "message": f"survey the {w}"}) for w in WORKERS]),
            text_step("three surveys delegated"),
        ],
        ["delegate"],
        effects={"delegate": list(WORKERS)},
        tree_budget=budget,
    )
    return {"version": 1, "agents": {"planner": planner, **{w: worker(w) for w in WORKERS}}}


@contextlib.asynccontextmanager
async def service_of(tmp_path: Path, doc: dict[str, Any], parallel: int) -> AsyncIterator[JobService]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(doc))
    settings = ServiceSettings(parallel_children=parallel)
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state, settings=settings) as service,
    ):
        yield service


async def test_a_tree_stays_within_its_budget_and_a_later_child_is_not_started(tmp_path: Path) -> None:
    async with service_of(tmp_path, config({"max_cost": "1.00"}), parallel=2) as service:
        job = await service.submit("planner", TurnInput.new("survey all three"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        children = [await service.get(c) for c in done.children]
        # two ran at once; the third would have started after the tree was exhausted
        assert len(children) == 2
        spent = sum((c.output.metadata.cost for c in children if c.output is not None), Decimal(0))
        assert spent <= Decimal("1.00") + 2 * Decimal(CALL), spent
        assert all(c.output is not None for c in children)
        assert {c.output.exit_reason.kind for c in children if c.output is not None} == {"budget_exhausted"}
        outcomes = [
            e.data.outcome for e in await service.store.events(job.id) if isinstance(e.data, EffectApplied)
        ]
        refused = [o for o in outcomes if o.effect == "delegate" and o.status != "ok"]
        assert len(refused) == 1 and "tree budget" in (refused[0].detail or ""), outcomes
        decisions = [
            e.data for e in await service.store.events(job.id) if isinstance(e.data, TreeBudgetChanged)
        ]
        assert [d.decision for d in decisions] == ["continue", "halt_workflow"]
        assert decisions[-1].spent >= Decimal("1.00") and decisions[-1].max_cost == Decimal("1.00")
        shown = (await service.get(job.id)).tree_budget  # what `airlock jobs show` prints
        assert shown is not None and shown.decision == "halt_workflow" and shown.spent == spent
        assert (await service.get(children[0].id)).tree_budget is None  # only the root's
    # another controller over the same store (a replica taking over) counts it again from there
    async with service_of(tmp_path, config({"max_cost": "1.00"}), parallel=2) as again:
        recounted = (await again.get(job.id)).tree_budget
        assert recounted is not None and recounted.spent == spent and recounted.decision == "halt_workflow"


async def test_when_the_trees_wall_time_runs_out_its_running_turns_stop(tmp_path: Path) -> None:
    async with service_of(tmp_path, config({"max_duration": "3s"}), parallel=3) as service:
        job = await service.submit("planner", TurnInput.new("survey all three"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        # each child had four calls a second apart to make: none made them all; one that had
        # not started when the time ran out was not started
        children = [await service.get(c) for c in done.children]
        exits = {c.output.exit_reason.kind for c in children if c.output is not None}
        assert exits <= {"budget_exhausted"}, exits
        outcomes = [
            e.data.outcome for e in await service.store.events(job.id) if isinstance(e.data, EffectApplied)
        ]
        refused = [o for o in outcomes if o.effect == "delegate" and o.status != "ok"]
        assert len(children) + len(refused) == 3
        assert all("max_duration 3000 ms" in (o.detail or "") for o in refused), refused
        decisions = await decisions_of(service, job.id)
        assert [d.decision for d in decisions] == ["continue", "halt_workflow"]
        assert "max_duration 3000 ms" in decisions[-1].reason


async def test_past_the_threshold_later_calls_ask_for_the_cheaper_model(tmp_path: Path) -> None:
    budget = {"max_cost": "10.00", "downgrade": {"at": 0.05, "model": "cheaper-model"}}
    async with service_of(tmp_path, config(budget), parallel=1) as service:
        job = await service.submit("planner", TurnInput.new("survey all three"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        first, *later = [await service.get(c) for c in done.children]
        asked = [
            e.data.event.model
            for e in await service.store.events(first.id, kind="sandbox")
            if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, InferenceStarted)
        ]
        # 0.20 of 10.00 passes 0.05 after the first call (0.50 at the latest): later calls switch
        assert asked[0] != "cheaper-model" and asked[-1] == "cheaper-model", asked
        for child in later:  # children started after the downgrade ask for it from their first call
            models = [
                e.data.event.model
                for e in await service.store.events(child.id, kind="sandbox")
                if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, InferenceStarted)
            ]
            assert models and set(models) == {"cheaper-model"}, models
        decisions = [
            e.data for e in await service.store.events(job.id) if isinstance(e.data, TreeBudgetChanged)
        ]
        assert [d.decision for d in decisions] == ["continue", "downgrade_model"]
        assert decisions[-1].model == "cheaper-model"


async def decisions_of(service: JobService, job_id: str) -> list[TreeBudgetChanged]:
    return [e.data for e in await service.store.events(job_id) if isinstance(e.data, TreeBudgetChanged)]


async def asked(service: JobService, job_id: str, times: int) -> None:
    """Wait until the tree asked for an increase ``times`` times (polled; the test's timeout
    bounds it)."""
    while True:
        kinds = [d.decision for d in await decisions_of(service, job_id)]
        if kinds.count("request_increase") >= times and service._trees.asking(job_id):
            return
        await asyncio.sleep(0.05)


async def test_an_increase_granted_lets_the_tree_run_on_and_one_refused_halts_it(tmp_path: Path) -> None:
    budget = {"max_cost": "1.00", "increase": {"amount": "1.00", "approvers": ["ana"]}}
    async with service_of(tmp_path, config(budget), parallel=2) as service:
        job = await service.submit("planner", TurnInput.new("survey all three"))
        await asked(service, job.id, 1)
        with pytest.raises(NotAnApprover):
            await service.approve(job.id, "mallory")
        await service.approve(job.id, "ana", "go on")
        # the first two finish (0.80 each: 1.60 of 2.00); the third starts capped at what is
        # left and exhausts the tree again: asked once more, refused
        await asked(service, job.id, 2)
        await service.reject(job.id, "ana", "enough")
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        children = [await service.get(c) for c in done.children]
        assert len(children) == 3
        exits = [c.output.exit_reason.kind for c in children if c.output is not None]
        assert exits == ["complete", "complete", "budget_exhausted"], exits
        spent = sum((c.output.metadata.cost for c in children if c.output is not None), Decimal(0))
        assert spent <= Decimal("2.00") + 2 * Decimal(CALL), spent
        kinds = [d.decision for d in await decisions_of(service, job.id)]
        assert kinds == ["continue", "request_increase", "continue", "request_increase", "halt_workflow"]
        last = (await decisions_of(service, job.id))[-1]
        assert last.max_cost == Decimal("2.00") and "refused by ana" in last.reason
