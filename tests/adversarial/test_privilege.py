"""Privilege, from inside a real sandbox through the agent's bash tool: capabilities, setuid,
the root filesystem, mount, namespaces, the runner's process, the kernel's interfaces and
the host's devices and sockets. One hostile turn per boundary runs every attempt; each
attempt is one case."""

from __future__ import annotations

from typing import Any

import pytest

from tests.adversarial.probes import PRIVILEGE, python_command
from tests.support.hostile import run_hostile

pytestmark = [pytest.mark.docker, pytest.mark.attack("privilege")]

#: Attempts that must fail (any errno: EPERM, EACCES, EROFS, ENOENT, ENOSYS, ...).
REFUSED = [
    "setuid_0",
    "setgid_0",
    "write_rootfs",
    "write_etc_passwd",
    "remount_root_rw",
    "mount_tmpfs",
    "mount_proc",
    "mount_fuse",
    "unshare_user",
    "unshare_mount",
    "unshare_net",
    "unshare_pid",
    "setns_host_net",
    "chroot",
    "mknod_block_device",
    "mknod_char_device",
    "raw_socket",
    "packet_socket",
    "sethostname",
    "reboot",
    "kexec_load",
    "init_module",
    "bpf",
    "perf_event_open",
    "iopl",
    "clock_settime",
    "read_proc_kcore",
    "read_dev_mem",
    "write_proc_sys",
    "write_sysfs",
    "write_proc_sysrq",
    "ptrace_runner",
    "read_runner_mem",
]


@pytest.fixture(scope="module")
def seen(boundary: str, runner_image: str) -> dict[str, Any]:
    hostile = run_hostile([python_command(PRIVILEGE)], isolation=boundary, image=runner_image)
    assert hostile.error is None, hostile.error
    return hostile.json()


@pytest.mark.parametrize("attempt", REFUSED)
def test_refused(seen: dict[str, Any], attempt: str) -> None:
    assert seen[attempt] != "ok", f"{attempt} succeeded inside the sandbox"


def test_no_capability_in_any_set(seen: dict[str, Any]) -> None:
    caps = {k: v for k, v in seen["caps"].items() if v is not None}  # gVisor has no CapAmb line
    assert set(caps.values()) == {"0000000000000000"}, caps


def test_not_root(seen: dict[str, Any]) -> None:
    assert 0 not in seen["uid"]


def test_no_setuid_or_setgid_file(seen: dict[str, Any]) -> None:
    assert seen["setuid_files"] == []


def test_the_runner_is_found_and_only_signalled(seen: dict[str, Any]) -> None:
    # Same uid: a tool may signal the runner (it survives: the bash call waits on it), but
    # never trace or read it (ptrace_runner / read_runner_mem above).
    assert isinstance(seen["runner_pid"], int)


def test_no_container_engine_socket(seen: dict[str, Any]) -> None:
    assert seen["docker_sockets"] == []


def test_only_harmless_devices(seen: dict[str, Any]) -> None:
    harmless = {"fd", "full", "mqueue", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin"}
    harmless |= {"stdout", "tty", "urandom", "zero", "net", "console"}
    harmless.add("fuse")  # gVisor's own (mount_fuse above: unusable without a mount)
    assert set(seen["devices"]) <= harmless, set(seen["devices"]) - harmless
