"""Resource abuse from inside a real sandbox, each in a sandbox of its own: a fork bomb, a
memory hog, filling the workspace and /tmp, flooding the output, and processes that ignore
SIGTERM (in the background and in the foreground past the call's timeout). Each must end in
a clear state — the sandbox survives and the turn completes, or the turn fails with
``resource_exceeded`` — and leave no container and no state behind (``run_hostile`` checks
the state directory; the suite's fixtures check the containers)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from layer0 import EnvironmentSpec, ResourceLimits
from tests.support.containers import assert_none_left
from tests.support.hostile import Hostile, run_hostile

pytestmark = [pytest.mark.docker, pytest.mark.attack("resources")]

ALIVE = "echo alive"
IGNORES_TERM = (
    "/opt/venv/bin/python -c 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "time.sleep(300)' ignore-term"
)
#: Prints the pids of the TERM-ignoring processes still running (there is no ps in the image):
#: a command line ending in the NUL-separated argument ``ignore-term``.
FIND_IGNORERS = (
    '/opt/venv/bin/python -c \'import os; print(*[p for p in os.listdir("/proc") if p.isdigit() and '
    'open(f"/proc/{p}/cmdline", "rb").read().endswith(b"\\x00ignore-term\\x00")])\''
)


def hostile(boundary: str, image: str, docker_client: Any, *calls: Any, **spec: Any) -> Hostile:
    found = run_hostile(list(calls), isolation=boundary, image=image, spec=EnvironmentSpec(**spec))
    assert_none_left(docker_client)
    return found


def stdout(found: Hostile, i: int) -> str:
    return str(found.results[i]["stdout"])


def survived(found: Hostile) -> bool:
    return found.error is None and found.output is not None and found.output.exit_reason.kind == "complete"


def test_fork_bomb(boundary: str, runner_image: str, docker_client: Any) -> None:
    found = hostile(
        boundary, runner_image, docker_client, {"command": ":(){ :|:& };:", "timeout_s": 8}, ALIVE
    )
    if survived(found):  # the process cap held, the call was killed at its timeout, bash lives on
        assert stdout(found, 1) == "alive\n"
    else:  # under gVisor each process also costs host memory and host tasks: either cap can come first
        assert found.error is not None and found.error.kind == "resource_exceeded", found.error
        assert "exceeded: memory:" in str(found.error) or "exceeded: processes:" in str(found.error)


def test_memory_hog(boundary: str, runner_image: str, docker_client: Any) -> None:
    eat = "/opt/venv/bin/python -c 'x = bytearray(2 * 2**30); print(len(x))'"
    found = hostile(boundary, runner_image, docker_client, eat, resources=ResourceLimits(memory="256Mi"))
    assert found.error is not None and found.error.kind == "resource_exceeded"
    assert "memory" in str(found.error) and "256Mi" in str(found.error)


@pytest.mark.parametrize("where", ["/workspace", "/tmp"])
def test_filling_a_writable_mount(boundary: str, runner_image: str, docker_client: Any, where: str) -> None:
    fill = f"dd if=/dev/zero of={where}/fill bs=1M count=512 2>&1; echo rc=$?; rm -f {where}/fill"
    found = hostile(boundary, runner_image, docker_client, fill, ALIVE, resources=ResourceLimits(disk="64Mi"))
    assert survived(found), found.error
    assert "No space left on device" in stdout(found, 0) and "rc=1" in stdout(found, 0)
    assert stdout(found, 1) == "alive\n"


def test_output_flood(boundary: str, runner_image: str, docker_client: Any) -> None:
    found = hostile(boundary, runner_image, docker_client, "head -c 200000000 /dev/zero | tr '\\0' x", ALIVE)
    assert survived(found), found.error
    assert len(stdout(found, 0)) <= 64 * 1024  # the tool keeps the head and counts the rest
    assert len(json.dumps(found.results[0])) < 256 * 1024
    assert stdout(found, 1) == "alive\n"


def test_a_background_process_ignoring_sigterm_dies_with_its_call(
    boundary: str, runner_image: str, docker_client: Any
) -> None:
    found = hostile(
        boundary, runner_image, docker_client, f"{IGNORES_TERM} & sleep 1; echo started", FIND_IGNORERS
    )
    assert survived(found), found.error
    assert stdout(found, 0) == "started\n"
    assert stdout(found, 1).strip() == ""  # killed (SIGKILL) when the call that started it ended


def test_a_foreground_process_ignoring_sigterm_is_killed_at_the_timeout(
    boundary: str, runner_image: str, docker_client: Any
) -> None:
    found = hostile(
        boundary, runner_image, docker_client, {"command": IGNORES_TERM, "timeout_s": 2}, FIND_IGNORERS, ALIVE
    )
    assert survived(found), found.error
    assert "timed out after 2s" in json.dumps(found.results[0])
    assert stdout(found, 1).strip() == "" and stdout(found, 2) == "alive\n"
