"""Memory written by one job is read back by the next job of the session: job 1's write_memory
effect is applied by the controller to its SQLite state store; job 2's sandbox (a real runner on
the process backend) receives it in its state snapshot and reads it through read_memory and
through memory.context_keys."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, SqliteJobStore
from airlock.jobs import JobState
from airlock.sandbox import state_snapshot
from airlock.spec import HISTORY_KEY
from airlock.state import SqliteStore
from airlock.testing import text_step, tools_step
from layer0 import Scope, SessionId, TurnInput, TurnOutput, WriteMemory

pytestmark = pytest.mark.timeout(120)

SESSION = SessionId("conversation-1")
FAVOURITE = {"colour": "blue", "since": 2019}


def agent(steps: list[dict[str, Any]], tools: list[str], **extra: Any) -> dict[str, Any]:
    return {"provider": {"kind": "scripted", "script": steps}, "tools": tools, "backend": "process", **extra}


CONFIG = {
    "version": 1,
    "agents": {
        "writer": agent(
            [
                tools_step(
                    [
                        ("write_memory", {"key": "favourite", "value": FAVOURITE}),
                        (
                            "write_memory",
                            {"key": "house_rule", "value": "answer in French", "scope": "global"},
                        ),
                    ]
                ),
                text_step("noted"),
            ],
            ["write_memory"],
            effects={"memory": ["session", "global"]},
        ),
        "reader": agent(
            [tools_step([("read_memory", {"key": "favourite"})]), text_step("bleu")],
            ["read_memory"],
            memory={"context_keys": ["favourite", "house_rule"]},
            effects={"memory": ["session", "global"]},  # it may read what it may write
        ),
    },
}


def history_of(output: TurnOutput) -> list[dict[str, Any]]:
    (history,) = [e for e in output.effects if isinstance(e, WriteMemory) and e.key == HISTORY_KEY]
    assert isinstance(history.value, list)
    return history.value  # type: ignore[return-value]


def assert_read_back(history: list[dict[str, Any]]) -> None:
    """The session's history after job 2: job 1's four messages, then job 2's, which start with
    the memory before its input and hold read_memory's answer."""
    assert len(history) == 8
    history = history[4:]
    first_user = history[0]["content"]
    assert first_user[:2] == [
        {"type": "text", "text": 'Memory favourite (session): {"colour": "blue", "since": 2019}'},
        {"type": "text", "text": 'Memory house_rule (global): "answer in French"'},
    ]
    assert first_user[2] == {"type": "text", "text": "what is my favourite colour?"}
    (result,) = [p for m in history for p in m["content"] if p["type"] == "tool_result"]
    assert not result["is_error"] and json.loads(result["content"]) == FAVOURITE


async def run_writer(service: JobService, state: SqliteStore) -> None:
    job = await service.submit("writer", TurnInput.new("remember: blue since 2019", session=SESSION))
    done = await service.wait(job.id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert await state.read(Scope.session(SESSION), "favourite") == FAVOURITE
    assert await state.read(Scope.global_(), "house_rule") == "answer in French"


async def test_memory_of_job_one_is_read_back_in_job_two_s_sandbox(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state) as service,
    ):
        await run_writer(service, state)
        # job 2: the turn in a fresh sandbox of the controller's runner, its snapshot the
        # controller's state as state_snapshot reads it
        second = TurnInput.new("what is my favourite colour?", session=SESSION)
        snapshot = await state_snapshot(state, second)
        output = await service.runner.run(service.runner.agent("reader"), second, state=snapshot)
        assert output.message.as_text() == "bleu"
        assert_read_back(history_of(output))


async def test_job_two_submitted_to_the_controller_reads_job_ones_memory(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(json.dumps(CONFIG))
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        JobService(store, AgentRunner(load_config(path)), state) as service,
    ):
        await run_writer(service, state)
        job = await service.submit("reader", TurnInput.new("what is my favourite colour?", session=SESSION))
        done = await service.wait(job.id)
        assert done.state is JobState.SUCCEEDED, done.error
        history = await state.read(Scope.session(SESSION), HISTORY_KEY)
        assert isinstance(history, list)
        assert_read_back(history)
