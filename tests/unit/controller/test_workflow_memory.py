"""Agents of one workflow share memory: a parent job writes its workflow's scope and its own
agent scope, delegates, and its child (a real runner on the process backend) reads the
workflow's value, does not see the parent's agent scope, and writes back to the workflow's
scope; a scope its policy does not grant is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import EffectReport, JobState, SandboxActivity
from airlock.state import SqliteStore
from airlock.testing import text_step, tools_step
from airlock.turn import ToolFinished
from layer0 import Scope, TurnInput

pytestmark = pytest.mark.timeout(120)

PLAN = {"step": 1, "owner": "lead"}


def agent(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        "lead": agent(
            [
                tools_step(
                    [
                        ("write_memory", {"key": "plan", "value": PLAN, "scope": "workflow"}),
                        ("write_memory", {"key": "note", "value": "mine", "scope": "agent"}),
                        ("delegate", {"agent": "helper", "message": "carry on"}),
                    ]
                ),
                text_step("delegated"),
            ],
            ["write_memory", "delegate"],
            effects={"memory": {"scopes": ["session", "workflow", "agent"]}, "delegate": ["helper"]},
        ),
        "helper": agent(
            [
                tools_step(
                    [
                        ("read_memory", {"key": "plan", "scope": "workflow"}),
                        ("read_memory", {"key": "note", "scope": "agent"}),
                        ("write_memory", {"key": "result", "value": "done", "scope": "workflow"}),
                        ("write_memory", {"key": "x", "value": 1, "scope": "custom:team-notes"}),
                    ]
                ),
                text_step("ok"),
            ],
            ["read_memory", "write_memory"],
            effects={"memory": ["workflow", "agent"]},
        ),
    },
}


async def test_a_parent_and_its_delegate_share_the_workflows_memory(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state) as service,
    ):
        job = await service.submit("lead", TurnInput.new("plan it"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        workflow = Scope.workflow(done.workflow)
        assert await state.read(workflow, "plan") == PLAN
        assert await state.read(workflow, "result") == "done"  # the child's write, same scope
        assert await state.read(Scope.agent(done.workflow, "lead"), "note") == "mine"
        assert await state.read(Scope.custom("team-notes"), "x") is None

        (child_id,) = done.children
        activity = [e.data.event for e in await store.events(child_id) if isinstance(e.data, SandboxActivity)]
        outputs = {e.tool_use_id: e.output for e in activity if isinstance(e, ToolFinished)}
        assert json.loads(str(outputs["t0"])) == PLAN  # the parent's write, read by its child
        assert "No memory under key 'note' in agent memory" in str(outputs["t1"])  # not its own

        report = EffectReport.model_validate(done.effects)
        (delegated,) = [o for o in report.outcomes if o.effect == "delegate"]
        assert delegated.follow_up is not None
        refused = [o for o in delegated.follow_up.outcomes if o.status == "refused"]
        assert [o.detail for o in refused] == [
            "agent helper may not write custom memory scope 'team-notes' (not granted in effects.memory)"
        ]
