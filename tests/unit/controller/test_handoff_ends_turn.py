"""A handoff ends the handing-off turn in its sandbox: the controller records its exit reason
``custom(handoff)``, its script's later step is never asked for, and the agent handed to runs
as its child with the handed-off state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import JobState
from airlock.state import SqliteStore
from airlock.testing import text_step, tools_step
from layer0 import ExitReason, TurnInput

pytestmark = pytest.mark.timeout(120)


def agent(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        "triage": agent(
            [
                tools_step([("handoff", {"agent": "billing", "state": {"ticket": 7}})]),
                text_step("this step is never asked for"),
            ],
            ["handoff"],
            effects={"handoff": ["billing"]},
        ),
        "billing": agent([text_step("refunded")], []),
    },
}


async def test_a_handoff_ends_the_turn_and_the_agent_handed_to_takes_over(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state) as service,
    ):
        job = await service.submit("triage", TurnInput.new("I was charged twice"))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        assert done.output is not None
        assert done.output.exit_reason == ExitReason.custom("handoff")
        assert done.output.metadata.turns_used == 1
        (child_id,) = done.children
        child = await service.get(child_id)
        assert child.agent == "billing" and child.origin == "handoff"
        assert child.output is not None and child.output.message.as_text() == "refunded"
        assert isinstance(child.input.metadata, dict)
        assert child.input.metadata["handoff_state"] == {"ticket": 7}
