"""Faults around a real sandbox mid-turn, under runc and gVisor: the runner killed, the
sandbox removed from outside, the turn's deadline. Each ends in a clear state (an
``EnvError`` naming what happened, or a ``timeout`` output) within seconds, and leaves no
container, no network and no state directory behind. (OOM: ``test_resources``; the
controller killed with jobs running and queued: ``tests/integration/test_cli_serve.py`` and
``test_controller_service.py``, filed under the same category.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from airlock.turn import ToolStarted
from tests.support.containers import OWNER, assert_none_left
from tests.support.hostile import Hostile, run_hostile_async

pytestmark = [pytest.mark.docker, pytest.mark.attack("faults")]

#: The runner's pid inside the sandbox, printed by a process with the sandbox's uid.
RUNNER_PID = (
    "for p in /proc/[0-9]*; do [ \"$(tr '\\0' '\\n' < $p/cmdline 2>/dev/null | sed -n 2,3p | paste -sd' ')\" "
    "= '-m airlock.runner' ] && echo ${p#/proc/}; done"
)


def sandbox_container(client: Any) -> Any:
    (found,) = [
        c
        for c in client.containers.list(filters={"label": f"airlock.owner={OWNER}"})
        if c.labels.get("airlock.role", "sandbox") == "sandbox"
    ]
    return found


async def fault_during_sleep(
    boundary: str, image: str, fault: Callable[[Any], None], **options: Any
) -> tuple[Hostile, float]:
    """A turn whose bash call sleeps; ``fault(container)`` strikes once the call runs."""
    import docker

    client = docker.from_env()
    struck = asyncio.Event()

    async def watch(event: Any) -> None:
        if isinstance(event, ToolStarted) and not struck.is_set():
            struck.set()
            await asyncio.sleep(0.5)  # the command is running
            await asyncio.to_thread(fault, sandbox_container(client))

    began = time.monotonic()
    found = await run_hostile_async(["sleep 60"], isolation=boundary, image=image, watch=watch, **options)
    elapsed = time.monotonic() - began
    assert struck.is_set()
    assert_none_left(client)
    assert client.networks.list(filters={"label": f"airlock.owner={OWNER}"}) == []
    client.close()
    return found, elapsed


def kill_runner(container: Any) -> None:
    if container.attrs["HostConfig"].get("Init"):  # runc: docker-init is PID 1, the runner its child
        pid = container.exec_run(["bash", "-c", RUNNER_PID], user="65534").output.decode().strip()
        assert pid.isdigit(), pid
        container.exec_run(["bash", "-c", f"kill -9 {pid}"], user="65534")
    else:  # gVisor: the runner is PID 1, which a signal from inside its namespace cannot kill
        container.kill("SIGKILL")


async def test_the_runner_killed_mid_turn(boundary: str, runner_image: str) -> None:
    found, elapsed = await fault_during_sleep(boundary, runner_image, kill_runner)
    assert found.error is not None and found.output is None
    assert "died during the turn" in str(found.error) or found.error.kind == "turn_error", found.error
    assert elapsed < 30


async def test_the_sandbox_removed_from_outside(boundary: str, runner_image: str) -> None:
    found, elapsed = await fault_during_sleep(boundary, runner_image, lambda c: c.remove(force=True))
    assert found.error is not None and found.output is None, found.output
    assert elapsed < 30


async def test_the_turn_deadline(boundary: str, runner_image: str) -> None:
    found, elapsed = await fault_during_sleep(boundary, runner_image, lambda c: None, turn_timeout=3)
    assert found.error is None and found.output is not None
    assert found.output.exit_reason.kind == "timeout" and "killed" in (found.output.message.as_text() or "")
    assert 3 <= elapsed < 15
