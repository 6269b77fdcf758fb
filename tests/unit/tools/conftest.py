"""Fixtures for the tool tests: a real runner server on 127.0.0.1 (ephemeral port)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from airlock.runner import RunnerConfig, RunnerServer


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    """A runner serving on loopback with a fresh workspace: ``(address, token)``."""
    token = secrets.token_urlsafe(32)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    server = RunnerServer(RunnerConfig(token=token, workspace=workspace))
    await server.start("127.0.0.1:0")
    assert server.address is not None
    try:
        yield server.address, token
    finally:
        await server.stop(grace=1.0)
