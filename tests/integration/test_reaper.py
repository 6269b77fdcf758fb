"""The reaper on the real engine: orphans (owner process gone) are removed, live owners' kept."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import pytest

from airlock.build import build_turn
from airlock.sandbox.docker import DockerEnvironment, reap_orphans
from airlock.sandbox.docker._labels import Owner, owner_labels
from airlock.sandbox.docker._reaper import write_owner_file
from airlock.testing import bash_agent

pytestmark = pytest.mark.docker


def dead_owner() -> Owner:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return Owner(socket.gethostname(), proc.pid, "1")


def start_idle(client: Any, image: str, labels: dict[str, str]) -> Any:
    return client.containers.run(
        image, entrypoint=["sleep", "300"], labels=labels, detach=True, init=True, network_mode="none"
    )


def test_reap_orphans_removes_only_dead_owners(
    runner_image: str, docker_client: Any, state_dir: Path
) -> None:
    orphan_id, live_id = "sb-0000" + os.urandom(4).hex(), "sb-1111" + os.urandom(4).hex()
    orphan_labels = owner_labels(orphan_id, dead_owner())
    orphan = start_idle(docker_client, runner_image, orphan_labels)
    live = start_idle(docker_client, runner_image, owner_labels(live_id))
    write_owner_file(state_dir, orphan_id, orphan_labels)
    (state_dir / orphan_id).mkdir()
    try:
        report = reap_orphans(docker_client, state_dir)
        assert f"{orphan.name} ({orphan_id})" in report.containers
        assert str(state_dir / orphan_id) in report.directories
        assert not report.errors
        names = {
            c.name for c in docker_client.containers.list(all=True, filters={"label": "airlock.sandbox"})
        }
        assert orphan.name not in names and live.name in names
        assert list(state_dir.iterdir()) == []
    finally:
        for c in (orphan, live):
            with contextlib.suppress(Exception):  # already removed by the reaper
                c.remove(force=True)


def test_two_sweeps_racing_over_the_same_orphans_both_succeed(
    runner_image: str, docker_client: Any, state_dir: Path
) -> None:
    """Two replicas on one host sweep the same dead owner's containers at once: the engine
    answers the slower removal 409 "already in progress", which is waited out, not an error."""
    owner = dead_owner()
    orphans = [
        start_idle(docker_client, runner_image, owner_labels("sb-2222" + os.urandom(4).hex(), owner))
        for _ in range(6)
    ]
    barrier = threading.Barrier(3)

    def sweep() -> Any:
        barrier.wait()
        return reap_orphans(docker_client, state_dir)

    try:
        with ThreadPoolExecutor(3) as pool:
            reports = list(pool.map(lambda _: sweep(), range(3)))
        assert [r.errors for r in reports] == [[], [], []]
        removed = sorted(name for r in reports for name in r.containers)
        assert removed == sorted(f"{c.name} ({c.labels['airlock.sandbox']})" for c in orphans)
        for c in orphans:
            with pytest.raises(docker.errors.NotFound):
                docker_client.containers.get(c.id)
    finally:
        for c in orphans:
            with contextlib.suppress(Exception):
                c.remove(force=True)


def test_airlock_gc_command(runner_image: str, docker_client: Any, state_dir: Path) -> None:
    sid = "sb-2222" + os.urandom(4).hex()
    orphan = start_idle(docker_client, runner_image, owner_labels(sid, dead_owner()))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "airlock.cli", "gc", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert f"removed container {orphan.name} ({sid})" in proc.stdout
    finally:
        with contextlib.suppress(Exception):
            orphan.remove(force=True)
    assert sid not in str(
        docker_client.containers.list(all=True, filters={"label": f"airlock.sandbox={sid}"})
    )


async def test_startup_sweep(runner_image: str, docker_client: Any, state_dir: Path, tmp_path: Path) -> None:
    from layer0 import EnvironmentSpec, TurnInput

    sid = "sb-3333" + os.urandom(4).hex()
    orphan = start_idle(docker_client, runner_image, owner_labels(sid, dead_owner()))
    env = DockerEnvironment(image=runner_image, state_dir=state_dir)
    try:
        await env.run(
            build_turn(bash_agent("true"), workspace=tmp_path),
            TurnInput.new("x"),
            EnvironmentSpec(),
        )
        assert env.sandbox.swept is not None and f"{orphan.name} ({sid})" in env.sandbox.swept.containers
    finally:
        with contextlib.suppress(Exception):
            orphan.remove(force=True)
