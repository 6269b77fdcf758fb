"""A job resumes only once its previous sandbox is confirmed gone (the controller's side).

The controller asks the agent's backend (``AgentRunner.ensure_gone``) before every resume and
passes the job's id with each turn, so the backend can label the job's sandbox and find it
again. The backends' own checks are tested on the stand-in (Kubernetes) and on Docker.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airlock.config import AgentConfig, load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import JobState
from airlock.state import SqliteStore
from airlock.testing import text_step, tool_step
from layer0 import EnvError, TurnInput, TurnOutput

#: Kills the turn's runner (the topmost ancestor running airlock.runner): the sandbox is lost.
KILL_RUNNER = (
    'p=$PPID; top=; while [ "$p" -gt 1 ]; do '
    "if tr '\\0' ' ' < /proc/$p/cmdline | grep -q 'airlock.runner'; then top=$p; fi; "
    "p=$(awk '/^PPid/{print $2}' /proc/$p/status); done; kill -9 $top; sleep 5"
)


class GuardedRunner(AgentRunner):
    """The real runner, recording each turn's job and each check; the check refuses (as a
    backend does while the previous sandbox may still run)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.turns: list[str | None] = []
        self.checked: list[str] = []

    async def run(self, agent: AgentConfig, input: TurnInput, **kwargs: Any) -> TurnOutput:
        self.turns.append(kwargs.get("job"))
        return await super().run(agent, input, **kwargs)

    async def ensure_gone(self, agent: AgentConfig, job: str) -> None:
        self.checked.append(job)
        raise EnvError.provision_failed(f"job {job} is not resumed: its previous sandbox is still there")


@contextlib.asynccontextmanager
async def service_of(tmp_path: Path, agents: dict[str, Any]) -> AsyncIterator[JobService]:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps({"version": 1, "agents": agents}))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, GuardedRunner(load_config(path)), state) as service,
    ):
        yield service


async def test_a_lost_sandboxs_job_is_not_resumed_while_the_previous_sandbox_is_not_confirmed_gone(
    tmp_path: Path,
) -> None:
    steps = [tool_step("bash", {"command": KILL_RUNNER}, id="k"), text_step("never")]
    agent = {
        "provider": {"kind": "scripted", "script": steps},
        "tools": ["bash"],
        "backend": "process",
        "defaults": {"max_turns": 4, "max_duration": "60s"},
        "durability": {"in_flight": "rerun", "max_resumes": 3},
    }
    async with service_of(tmp_path, {"crashy": agent}) as service:
        job = await service.submit("crashy", TurnInput.new("go"))
        done = await service.wait(job.id)
        runner = service.runner
    assert isinstance(runner, GuardedRunner)
    assert runner.turns == [job.id], "the first turn ran with its job; no second one"
    assert runner.checked == [job.id], "checked before the resume, not before the first turn"
    assert done.state is JobState.FAILED and done.resumes == 1
    assert (
        done.error is not None and "is not resumed: its previous sandbox is still there" in done.error.message
    )
