"""``airlock jobs watch --json`` streams one JSON object per event as it arrives: read from a
real ``airlock`` process following a real job (process backend, scripted provider) that cannot
end until the test lets it."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from airlock.jobs import JobState
from airlock.testing import text_step, tool_step
from layer0 import TurnInput
from tests.support.controller import running_controller, write_config

pytestmark = pytest.mark.timeout(120)


async def test_watch_json_emits_each_event_before_the_job_ends(tmp_path: Path) -> None:
    go = tmp_path / "go"
    wait = f"while [ ! -e {go} ]; do sleep 0.05; done; echo go"
    steps = [tool_step("bash", {"command": wait}, id="b1"), text_step("done")]
    agent = {
        "provider": {"kind": "scripted", "script": steps},
        "tools": ["bash"],
        "backend": "process",
        "defaults": {"max_turns": 4, "max_duration": "60s"},
    }
    config = write_config(tmp_path, {"waiter": agent})
    async with running_controller(config, tmp_path / "data", tmp_path / "sb", "unused") as (controller, _):
        assert controller.service is not None
        job = await controller.service.submit("waiter", TurnInput.new("go"))
        env = {**os.environ, "AIRLOCK_TOKEN": controller.token}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "airlock", "jobs", "watch", job.id, "--json",
            "--address", controller.address, stdout=asyncio.subprocess.PIPE, env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        seen: list[dict[str, Any]] = []
        while not any(e["event"]["data"].get("event", {}).get("type") == "tool_started" for e in seen):
            line = await proc.stdout.readline()
            assert line, f"the watch ended before the tool started: {seen}"
            seen.append(json.loads(line))
        # The job waits for the go file: every line so far came while it ran.
        assert not (await controller.service.get(job.id)).state.terminal
        assert all(e["event"]["job_id"] == job.id for e in seen)
        go.touch()
        rest = [json.loads(line) for line in (await proc.stdout.read()).splitlines()]
        assert await proc.wait() == 0
    *events, final = rest
    assert events[-1]["event"]["data"] == {
        **events[-1]["event"]["data"],
        "kind": "state",
        "state": "succeeded",
    }
    assert final["job"]["state"] == JobState.SUCCEEDED.value and final["exit_code"] == 0
