"""A planner's three delegates run as three child jobs at once, end to end on the process
backend: every child's tool call starts before any child's ends, the parent hears their results
in the order it asked, and a tree runs no more children at once than it may."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, ServiceSettings, SqliteJobStore
from airlock.jobs import EffectApplied, Job, JobState, SandboxActivity
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step, tools_step
from airlock.turn import ToolFinished, ToolStarted
from layer0 import TurnInput

pytestmark = pytest.mark.timeout(180)

WORKERS = ("north", "south", "east")


def scripted(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


def worker(name: str) -> dict[str, Any]:
    steps = [tool_step("bash", {"command": f"sleep 2; echo {name} surveyed"}), text_step(f"{name} done")]
    return scripted(steps, ["bash"])


CONFIG = {
    "version": 1,
    "agents": {
        "planner": scripted(
            [
                tools_step([("delegate", {"agent": w, "message": f"survey the {w}"}) for w in WORKERS]),
                text_step("three surveys delegated"),
            ],
            ["delegate"],
            effects={"delegate": list(WORKERS)},
        ),
        **{w: worker(w) for w in WORKERS},
    },
}


@contextlib.asynccontextmanager
async def service_of(tmp_path: Path, settings: ServiceSettings) -> AsyncIterator[JobService]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state, settings=settings) as service,
    ):
        yield service


async def tool_spans(service: JobService, job: Job) -> list[tuple[float, float]]:
    """Each child's bash call: when it started and when it ended (event times)."""
    spans = []
    for child in job.children:
        events = await service.store.events(child, kind="sandbox")
        times = {
            type(e.data.event): e.time.timestamp()
            for e in events
            if isinstance(e.data, SandboxActivity) and isinstance(e.data.event, (ToolStarted, ToolFinished))
        }
        spans.append((times[ToolStarted], times[ToolFinished]))
    return spans


async def test_three_delegated_children_run_at_once(tmp_path: Path) -> None:
    async with service_of(tmp_path, ServiceSettings()) as service:
        job = await service.submit("planner", TurnInput.new("survey all three"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert len(done.children) == 3
        spans = await tool_spans(service, done)
        # every call started before any ended: the three ran at once
        assert max(start for start, _ in spans) < min(end for _, end in spans), spans
        # the parent heard them in the order it asked
        outcomes = (done.effects or {})["outcomes"]
        assert [o["agent"] for o in outcomes] == list(WORKERS)
        assert [o["status"] for o in outcomes] == ["ok"] * 3
        effects = [
            e.data.outcome for e in await service.store.events(job.id) if isinstance(e.data, EffectApplied)
        ]
        assert [str(o.agent) for o in effects if o.effect == "delegate"] == list(WORKERS)
        children = [await service.get(c) for c in done.children]
        assert [c.agent for c in children] == list(WORKERS)
        assert all(c.state is JobState.SUCCEEDED for c in children)


async def test_a_tree_runs_no_more_children_at_once_than_it_may(tmp_path: Path) -> None:
    async with service_of(tmp_path, ServiceSettings(parallel_children=1)) as service:
        job = await service.submit("planner", TurnInput.new("survey all three"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        spans = sorted(await tool_spans(service, done))
        # one at a time: each call ended before the next began
        assert all(earlier[1] <= later[0] for earlier, later in pairwise(spans)), spans
