"""A job's limit follows its turn's max_duration: the input's TurnConfig, else the agent's."""

from __future__ import annotations

from pathlib import Path

from airlock.config import load_config
from airlock.controller import AgentRunner, JobService, ServiceSettings, SqliteJobStore
from airlock.controller._service_settings import DEFAULT_SLACK_MS
from airlock.state import SqliteStore
from layer0 import TurnConfig, TurnInput

CONFIG = """
agents:
  timed:
    provider: {kind: scripted, script: []}
    backend: process
    defaults: {max_duration: 30s}
  untimed:
    provider: {kind: scripted, script: []}
    backend: process
"""


async def test_the_job_limit_is_the_turns_max_duration_plus_slack(tmp_path: Path) -> None:
    path = tmp_path / "airlock.yaml"
    path.write_text(CONFIG)
    settings = ServiceSettings(default_max_duration_ms=7_200_000)
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
    ):
        service = JobService(store, AgentRunner(load_config(path)), state, settings)  # no workers
        agent_default = await service.submit("timed", TurnInput.new("hi"))
        longer = TurnInput.new("hi", config=TurnConfig(max_duration=600_000))
        from_input = await service.submit("timed", longer)
        explicit = await service.submit("timed", longer, max_duration_ms=5_000)
        neither = await service.submit("untimed", TurnInput.new("hi"))
    assert agent_default.max_duration_ms == 30_000 + DEFAULT_SLACK_MS
    assert from_input.max_duration_ms == 600_000 + DEFAULT_SLACK_MS  # e.g. airlock run --timeout 10m
    assert explicit.max_duration_ms == 5_000
    assert neither.max_duration_ms == 7_200_000
