"""Fixtures of the controller's unit tests: a real ControllerServer over a real JobService
and a real API key store (the bootstrap token is the administrator's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.config import load_config
from airlock.controller import AgentRunner, ControllerServer, IdentityApi, JobService, SqliteJobStore
from airlock.identity import AuthSettings, KeyStore, RoleBook
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
    async with (
        SqliteJobStore(tmp_path / "jobs.db") as store,
        SqliteStore(tmp_path / "state.db") as state,
        KeyStore(tmp_path / "keys.db", RoleBook()) as keys,
    ):
        service = JobService(store, AgentRunner(load_config(config)), state)  # not started: no workers
        identity = IdentityApi(keys, AuthSettings(), service.quotas, store)
        async with ControllerServer(service, TOKEN, "127.0.0.1:0", identity=identity) as started:
            yield started


@pytest.fixture
async def real_client(real_server: ControllerServer) -> AsyncIterator[ControllerClient]:
    async with ControllerClient(real_server.address, TOKEN) as connected:
        yield connected
