"""tests.support.postgres and postgres_image without Docker: skip or fail when PostgreSQL cannot
run, the DSN, which leftover servers are removed, the remembered package closure key."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.support import postgres, postgres_image


def test_unavailable_skips_or_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRLOCK_REQUIRE_DOCKER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="image x is missing"):
        postgres.unavailable("image x is missing")
    monkeypatch.setenv("AIRLOCK_REQUIRE_DOCKER", "1")
    with pytest.raises(pytest.fail.Exception, match="AIRLOCK_REQUIRE_DOCKER=1 but image x is missing"):
        postgres.unavailable("image x is missing")


def test_dsn_quotes_credentials() -> None:
    server = postgres.PostgresServer(None, "127.0.0.1", 5555, user="u@x", password="p:/w")
    assert server.dsn("t_1") == "postgresql://u%40x:p%3A%2Fw@127.0.0.1:5555/t_1"
    assert server.dsn().endswith("/test")


class FakeContainer:
    def __init__(self, name: str, owner: str) -> None:
        self.name, self.labels, self.removed = name, {postgres.LABEL: owner}, False

    def remove(self, force: bool) -> None:
        self.removed = force


class FakeContainers:
    def __init__(self, found: list[FakeContainer]) -> None:
        self.found = found

    def list(self, *, all: bool, filters: dict[str, Any]) -> list[FakeContainer]:
        assert all and filters == {"label": postgres.LABEL}
        return self.found


def test_only_servers_of_dead_runs_on_this_host_are_removed() -> None:
    host = socket.gethostname()
    dead = 2**22 + 12345  # above Linux's pid_max: no such process
    found = [
        FakeContainer("mine", postgres.OWNER),
        FakeContainer("alive", f"{host}:{os.getppid()}"),
        FakeContainer("dead", f"{host}:{dead}"),
        FakeContainer("elsewhere", f"other-host:{dead}"),
    ]
    client = type("Client", (), {"containers": FakeContainers(found)})()
    assert postgres.remove_leftovers(client) == ["dead"]
    assert [c.removed for c in found] == [False, False, True, False]


def test_the_closure_key_is_remembered_per_apt_state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRLOCK_IMAGE_CACHE", str(tmp_path))
    assert postgres_image._known_closure_key("state-a") is None
    postgres_image._remember_closure_key("state-a", "0123456789abcdef")
    assert postgres_image._known_closure_key("state-a") == "0123456789abcdef"
    assert postgres_image._known_closure_key("state-b") is None
    (tmp_path / "test-postgres-closure.json").write_text("not json")
    assert postgres_image._known_closure_key("state-a") is None
