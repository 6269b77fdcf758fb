"""The runner's socket and token, attacked from a tool inside a real sandbox: the control
directory is locked once the runner listens (nothing in it can be listed, read, added,
replaced or removed, and the socket cannot be dialled from inside), the token file is gone,
the token is nowhere the sandbox can read (environment, any /proc environ or cmdline, files),
the runner's descriptors and memory map are closed to tools, and the runner listens on no
TCP or UDP port. The token is pinned for the test so that the sandbox can be searched for
its SHA-256 (the sandbox gets only the hash)."""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any
from unittest import mock

import pytest

from airlock.sandbox.docker import _instance
from tests.adversarial.probes import RUNNER_CHANNEL, python_command
from tests.support.hostile import Hostile, run_hostile

pytestmark = [pytest.mark.docker, pytest.mark.attack("runner")]

REFUSED = [
    "list_control_dir",
    "read_token_file",
    "connect_runner_socket",
    "replace_runner_socket",
    "create_in_control_dir",
    "remove_runner_socket",
    "list_runner_fds",
    "open_runner_fd",
    "runner_root",
    "runner_maps",
]


#: What gVisor 20221219's /proc shows of a non-dumpable process to its own uid (Linux does
#: not): fd numbers and the memory map's addresses. Opening those fds, reading the memory
#: and tracing stay refused (open_runner_fd here; read_runner_mem, ptrace_runner in privilege).
GVISOR_GAPS = {
    "list_runner_fds": "gVisor lists a non-dumpable process's fd numbers to its own uid",
    "runner_maps": "gVisor shows a non-dumpable process's memory map (addresses) to its own uid",
}


@pytest.fixture(scope="module")
def attack(boundary: str, runner_image: str) -> tuple[Hostile, str]:
    token = secrets.token_urlsafe(32)
    scan = {"canary_sha256": hashlib.sha256(token.encode()).hexdigest()}
    with mock.patch.object(_instance.secrets, "token_urlsafe", return_value=token):
        hostile = run_hostile(
            [
                python_command(RUNNER_CHANNEL),
                f"/opt/venv/bin/python -m airlock.probe.sandbox '{json.dumps(scan)}'",
            ],
            isolation=boundary,
            image=runner_image,
        )
    assert hostile.error is None, hostile.error
    return hostile, token


@pytest.fixture(scope="module")
def seen(attack: tuple[Hostile, str]) -> dict[str, Any]:
    return attack[0].json(0)


@pytest.mark.parametrize("attempt", REFUSED)
def test_refused(seen: dict[str, Any], attempt: str, boundary: str, request: pytest.FixtureRequest) -> None:
    if boundary == "gvisor" and attempt in GVISOR_GAPS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=GVISOR_GAPS[attempt]))
    assert seen[attempt] != "ok", f"{attempt} succeeded inside the sandbox"


def test_the_runner_listens_on_no_inet_port(seen: dict[str, Any]) -> None:
    assert seen["inet_listeners"] == []


def test_the_token_is_nowhere_in_the_sandbox(attack: tuple[Hostile, str]) -> None:
    hostile, _ = attack
    assert hostile.json(1)["canary_found_in"] == []


def test_the_token_is_in_no_output_event_or_log(attack: tuple[Hostile, str]) -> None:
    hostile, token = attack
    assert token not in hostile.everything() and token not in hostile.logs
