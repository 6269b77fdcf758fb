"""The Docker engine as the tests see it: is one reachable, which containers are this test
process's, and the checks that none is left behind."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from airlock.build import build_turn
from airlock.sandbox.docker._labels import LABEL_OWNER
from airlock.sandbox.docker._remove import force_remove
from airlock.spec import AgentSpec
from airlock.turn import NeuronTurn

#: The owner label value of every sandbox object this test process creates.
OWNER = f"{socket.gethostname()}:{os.getpid()}"


@cache
def docker_available() -> bool:
    """Does ``docker info`` answer (asked once per process)?"""
    try:
        return (
            subprocess.run(
                ["docker", "info", "--format", "{{.ServerVersion}}"],
                capture_output=True,
                timeout=20,
                check=False,
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


@cache
def docker_runtimes() -> frozenset[str]:
    """The engine's registered runtimes (asked once per process; empty without an engine)."""
    try:
        out = subprocess.run(
            ["docker", "info", "--format", "{{json .Runtimes}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    if out.returncode != 0:
        return frozenset()
    return frozenset(json.loads(out.stdout or "{}"))


def gvisor_missing() -> str | None:
    """Why gVisor sandboxes cannot run here (None: both registrations are there)."""
    from airlock.sandbox.docker import DockerRuntimes

    names = DockerRuntimes()
    missing = [n for n in (names.gvisor, names.gvisor_networked) if n not in docker_runtimes()]
    if not missing:
        return None
    return (
        f"gVisor runtimes {', '.join(missing)} not registered with Docker (install runsc and register it: "
        "airlock doctor prints the daemon.json entry)"
    )


def require_isolation(kind: str) -> None:
    """Skip (or, with ``AIRLOCK_REQUIRE_GVISOR=1``, fail) when ``kind`` cannot run here."""
    import pytest

    if kind == "gvisor" and (why := gvisor_missing()):
        if os.environ.get("AIRLOCK_REQUIRE_GVISOR") == "1":
            pytest.fail(f"AIRLOCK_REQUIRE_GVISOR=1 but {why}")
        pytest.skip(why)


def my_containers(client: Any) -> list[Any]:
    """Containers labelled as owned by this test process."""
    return list(client.containers.list(all=True, filters={"label": f"{LABEL_OWNER}={OWNER}"}))


def my_container_names(client: Any) -> dict[str, str]:
    """Id → name of each container of this test process, from the engine's listing alone
    (inspecting each one, as ``containers.list`` does, waits on a container being removed)."""
    listed = client.api.containers(all=True, filters={"label": f"{LABEL_OWNER}={OWNER}"})
    return {c["Id"]: (c.get("Names") or [c["Id"][:12]])[0].lstrip("/") for c in listed}


def assert_none_left(client: Any) -> None:
    """Fail if a container of this process remains, after removing it (the next test starts clean)."""
    leftovers = my_container_names(client)
    for container_id in leftovers:  # its own teardown may be finishing it meanwhile: waited out
        force_remove(client, container_id, wait_s=120)
    assert not leftovers, f"containers left behind: {sorted(leftovers.values())}"


def assert_clean(client: Any, state_dir: Path) -> None:
    """No container of this process and nothing in the state directory."""
    assert my_container_names(client) == {}
    assert list(state_dir.iterdir()) == []


def sandbox_turn(spec: AgentSpec, tmp_path: Path) -> NeuronTurn:
    """The turn of ``spec`` with ``tmp_path/host-workspace`` as its (host) workspace."""
    workspace = tmp_path / "host-workspace"
    workspace.mkdir(exist_ok=True)
    return build_turn(spec, workspace=workspace)
