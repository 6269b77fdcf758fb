"""Fixtures of the controller's unit tests: a real ControllerServer over a real JobService."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, JobService, SqliteJobStore
from airlock.jobs import ControllerClient
from airlock.state import SqliteStore

#: The bearer token of :func:`real_server`.
TOKEN = "t0ken"


@pytest.fixture
async def real_server(tmp_path: Path) -> AsyncIterator[ControllerServer]:
    (tmp_path / "s.yaml").write_text("steps: []\n")
    config = tmp_path / "airlock.yaml"
    config.write_text(
        "version: 1\nagents:\n  a:\n    provider: {kind: scripted, script: s.yaml}\n    backend: process\n"
    )
    async with SqliteJobStore(tmp_path / "jobs.db") as store, SqliteStore(tmp_path / "state.db") as state:
        service = JobService(store, AgentRunner(load_config(config)), state)  # not started: no workers
        async with ControllerServer(service, TOKEN, "127.0.0.1:0") as started:
            yield started


@pytest.fixture
async def real_client(real_server: ControllerServer) -> AsyncIterator[ControllerClient]:
    async with ControllerClient(real_server.address, TOKEN) as connected:
        yield connected
