"""Faults around a real sandbox mid-turn, under runc and gVisor: the runner killed, the
sandbox removed from outside, the turn's deadline, the gRPC stream to the runner cut (both
processes alive), the whole sandbox frozen, the Docker daemon restarted. Each ends in a clear
state (an ``EnvError`` naming what happened, or a ``timeout`` output) within seconds, and
leaves no container, no network and no state directory behind. (OOM: ``test_resources``; the
controller killed with jobs running and queued: ``tests/integration/test_cli_serve.py`` and
``test_controller_service.py``, filed under the same category.)"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
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


def cut_runner_streams(container: Any) -> None:
    """Shut down every connection this process holds to a runner's control socket (its peer
    is the name the runner bound, ``/run/airlock/runner.sock`` under runc, the host path
    under gVisor): the transport is cut at both ends while both processes live on."""
    cut = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            conn = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        with conn:
            try:
                peer = conn.getpeername() if conn.family == socket.AF_UNIX else ""
                if isinstance(peer, str) and peer.endswith("/runner.sock"):
                    conn.shutdown(socket.SHUT_RDWR)
                    cut += 1
            except OSError:
                pass
    assert cut, "no connection to a runner's socket found"


async def test_the_grpc_stream_cut(boundary: str, runner_image: str) -> None:
    found, elapsed = await fault_during_sleep(boundary, runner_image, cut_runner_streams)
    assert found.error is not None and found.output is None, found.output
    assert found.error.kind == "turn_error" and "UNAVAILABLE" in str(found.error), found.error
    assert elapsed < 30


async def test_the_sandbox_frozen(boundary: str, runner_image: str) -> None:
    """``docker pause`` mid-call: nothing in the sandbox answers any more; the deadline still
    ends the turn, and the frozen container is removed."""
    found, elapsed = await fault_during_sleep(boundary, runner_image, lambda c: c.pause(), turn_timeout=3)
    assert found.error is None and found.output is not None, found.error
    assert found.output.exit_reason.kind == "timeout"
    assert 3 <= elapsed < 30


def _dockerd() -> tuple[int, list[str]] | None:
    """The pid and command line of the Docker daemon, when it runs in this pid namespace."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    argv = [a.decode() for a in f.read().split(b"\0") if a]
            except OSError:
                continue
            if argv and os.path.basename(argv[0]) == "dockerd":
                return int(entry), argv
    return None


def restart_dockerd(container: Any) -> None:
    """Stop the Docker daemon (it stops every container) and start it again as it ran."""
    found = _dockerd()
    assert found is not None
    pid, argv = found
    os.kill(pid, signal.SIGTERM)
    for _ in range(600):  # it waits for its containers to stop (15 s at most by default)
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.1)
    with open("/tmp/dockerd.log", "ab") as log:
        subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    for _ in range(600):
        if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise AssertionError("dockerd did not come back within 60 s")


async def test_the_docker_daemon_restarted(boundary: str, runner_image: str) -> None:
    """The engine goes away mid-call and comes back: the turn ends with a clear error, and the
    sandbox's teardown, which waits for the engine, still removes everything."""
    if os.geteuid() != 0 or _dockerd() is None:
        pytest.skip("needs the Docker daemon as a process this test (root) can restart")
    found, elapsed = await fault_during_sleep(boundary, runner_image, restart_dockerd)
    assert found.error is not None and found.output is None, found.output
    # The daemon stops the container (SIGTERM): the runner says so, or dies first.
    assert "stopped (SIGTERM)" in str(found.error) or "died during the turn" in str(found.error), found.error
    assert elapsed < 90
