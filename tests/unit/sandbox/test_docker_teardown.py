"""The Docker sandbox's teardown while the engine restarts or is still killing the sandbox: it
waits (a bounded number of attempts), then removes everything; an engine that never comes back,
or keeps refusing, leaves the owner file for the reaper."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest
import requests

from airlock.sandbox.docker import _instance, _remove
from airlock.sandbox.docker._reaper import owner_file, write_owner_file


class RestartingEngine:
    """A docker client whose engine is down for the first ``down_for`` calls."""

    def __init__(self, down_for: int) -> None:
        self.down_for = down_for
        self.calls = 0
        self.removed: list[str] = []
        self.api = SimpleNamespace(remove_container=self._remove)

    def _answer(self) -> None:
        self.calls += 1
        if self.calls <= self.down_for:
            raise docker.errors.DockerException("Error while fetching server API version: connection refused")

    def _remove(self, container_id: str, force: bool) -> None:
        self._answer()
        self.removed.append(container_id)

    def ping(self) -> bool:
        self._answer()
        return True


def _sandbox(client: Any, state: Path) -> Any:
    sandbox = _instance.DockerInstance(client, state)
    write_owner_file(state, sandbox.id, {"airlock.owner": "test"})
    sandbox.dir.mkdir()
    sandbox.container = SimpleNamespace(id="c0ffee")
    return sandbox


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_instance, "_ENGINE_RETRY_DELAYS", (0.01,) * 5)


def test_teardown_waits_for_a_restarting_engine(tmp_path: Path) -> None:
    client = RestartingEngine(down_for=4)  # remove, ping, remove, ping fail; then it answers
    sandbox = _sandbox(client, tmp_path)
    asyncio.run(sandbox.teardown())
    assert client.removed == ["c0ffee"]
    assert not sandbox.dir.exists()
    assert not owner_file(tmp_path, sandbox.id).exists()


def test_an_engine_that_stays_down_leaves_the_owner_file_for_the_reaper(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = RestartingEngine(down_for=10**6)
    sandbox = _sandbox(client, tmp_path)
    asyncio.run(sandbox.teardown())
    assert client.removed == []
    assert client.calls == 11  # the first attempt, then a ping and an attempt per pause
    assert owner_file(tmp_path, sandbox.id).exists()
    assert "teardown of sandbox" in caplog.text and "incomplete" in caplog.text


class Refusing(RestartingEngine):
    """A live engine that refuses the first ``refusals`` removals (still killing the sandbox)."""

    def __init__(self, refusals: int) -> None:
        super().__init__(down_for=0)
        self.refusals = refusals
        self.attempts = 0

    def _remove(self, container_id: str, force: bool) -> None:
        self.attempts += 1
        if self.attempts <= self.refusals:
            raise docker.errors.APIError("removal of container c0ffee is already in progress")
        self.removed.append(container_id)


def test_a_live_engine_still_killing_the_sandbox_is_asked_again(tmp_path: Path) -> None:
    client = Refusing(refusals=3)
    sandbox = _sandbox(client, tmp_path)
    asyncio.run(sandbox.teardown())
    assert client.attempts == 4 and client.removed == ["c0ffee"]
    assert not owner_file(tmp_path, sandbox.id).exists()


def test_a_live_engine_that_keeps_refusing_leaves_the_owner_file_after_the_last_attempt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    client = Refusing(refusals=10**6)
    sandbox = _sandbox(client, tmp_path)
    asyncio.run(sandbox.teardown())
    assert client.attempts == 6  # the first attempt, then one per pause: bounded
    assert owner_file(tmp_path, sandbox.id).exists()
    assert "incomplete" in caplog.text and "already in progress" in caplog.text


class SlowRemoval(RestartingEngine):
    """A live engine whose removal outlasts the client's read timeout; the engine finishes it
    after ``inspections`` more questions (or never)."""

    def __init__(self, inspections: int) -> None:
        super().__init__(down_for=0)
        self.inspections = inspections
        self.attempts = 0
        self.api = SimpleNamespace(remove_container=self._remove, inspect_container=self._inspect)

    def _remove(self, container_id: str, force: bool) -> None:
        self.attempts += 1
        raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=120)")

    def _inspect(self, container_id: str) -> dict[str, Any]:
        self.inspections -= 1
        if self.inspections < 0:
            raise docker.errors.NotFound("No such container: c0ffee")
        if self.inspections == 1:
            raise requests.exceptions.ReadTimeout("Read timed out. (read timeout=120)")
        return {"Id": container_id}


def test_a_removal_that_outlasts_the_read_timeout_is_waited_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_remove, "CONCURRENT_REMOVAL_S", 5.0)
    client = SlowRemoval(inspections=3)  # one of them times out too
    sandbox = _sandbox(client, tmp_path)
    asyncio.run(sandbox.teardown())
    assert client.attempts == 1 and client.inspections < 0
    assert not sandbox.dir.exists()
    assert not owner_file(tmp_path, sandbox.id).exists()


def test_a_removal_that_never_finishes_leaves_the_owner_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_remove, "CONCURRENT_REMOVAL_S", 0.05)
    client = SlowRemoval(inspections=10**6)
    sandbox = _sandbox(client, tmp_path)
    asyncio.run(sandbox.teardown())
    assert client.attempts == 6  # the first attempt, then one per pause: bounded
    assert owner_file(tmp_path, sandbox.id).exists()
    assert "did not finish" in caplog.text


def test_an_unreachable_engine_is_not_waited_on_per_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection refused is the engine gone (the teardown's own retries cover a restart),
    not a removal under way: no 30 s wait per container."""
    monkeypatch.setattr(_remove, "CONCURRENT_REMOVAL_S", 3600.0)
    client = RestartingEngine(down_for=0)

    def refused(container_id: str, force: bool) -> None:
        client.calls += 1
        raise requests.exceptions.ConnectionError("Connection refused")

    client.api = SimpleNamespace(remove_container=refused)
    with pytest.raises(docker.errors.DockerException, match="Connection refused"):
        _remove.force_remove(client, "c0ffee")
    assert client.calls == 1
