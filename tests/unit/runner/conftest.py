"""Fixtures: real runner servers on 127.0.0.1 (ephemeral port) or a unix socket in tmp."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.runner import RunnerConfig, RunnerServer

from .runner_streams import Runner


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(32)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
async def server(token: str, workspace: Path) -> AsyncIterator[RunnerServer]:
    runner = RunnerServer(RunnerConfig(token=token, workspace=workspace, max_message_bytes=1024 * 1024))
    await runner.start("127.0.0.1:0")
    try:
        yield runner
    finally:
        await runner.stop(grace=1.0)


@pytest.fixture
def address(server: RunnerServer) -> str:
    assert server.address is not None
    return server.address


@pytest.fixture
async def runner(address: str, token: str) -> AsyncIterator[Runner]:
    """A client of the runner server, its streams read as they come."""
    client = Runner(address, token)
    try:
        yield client
    finally:
        await client.close()
