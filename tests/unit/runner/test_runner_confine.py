"""The runner's self-confinement: non-dumpable and the ptrace seccomp filter, each shown on
real processes (never installed in the test process itself), and the BPF program per arch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from airlock.runner import __main__ as runner_main
from airlock.runner import _confine
from airlock.runner._confine import ARCHES, ConfinementError, filter_program
from tests.support.probes import TRACE_PROBE as PROBE


def _without_caps() -> list[str]:
    """A prefix that runs a program without capabilities (root would bypass the checks; the
    kernel also wants a tracer's capabilities to cover the tracee's)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and setpriv is missing: cannot drop CAP_SYS_PTRACE")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all"]


def _probe(pid: int, prefix: list[str] | None = None) -> dict[str, str]:
    done = subprocess.run(
        [*(prefix or []), sys.executable, "-c", PROBE, str(pid)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    result: dict[str, str] = json.loads(done.stdout)
    return result


@pytest.fixture
def target() -> Iterator[tuple[subprocess.Popen[str], subprocess.Popen[str]]]:
    """Two sleeping Python processes without capabilities: one made non-dumpable by
    ``set_non_dumpable``, one not."""
    body = "import sys, time\n{}print('ready', flush=True)\ntime.sleep(60)\n"
    confined = body.format("from airlock.runner._confine import set_non_dumpable\nset_non_dumpable()\n")
    procs = [
        subprocess.Popen([*_without_caps(), sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for code in (confined, body.format(""))
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
        yield procs[0], procs[1]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_non_dumpable_process_cannot_be_traced_or_read_by_its_own_uid(
    target: tuple[subprocess.Popen[str], subprocess.Popen[str]],
) -> None:
    confined, plain = target
    prefix = _without_caps()
    assert _probe(plain.pid, prefix)["environ"] == "opened"  # the same probe reads a dumpable peer
    found = _probe(confined.pid, prefix)
    assert found["attach"] == "EPERM"
    assert found["process_vm_readv"] == "EPERM"
    assert found["environ"] == "EACCES"
    assert found["mem"] == "EACCES"


#: Starts ``sleep``, optionally installs the filter, then probes the sleep from a new child.
FILTERED = """
import subprocess, sys
from airlock.runner._confine import install_ptrace_filter
sleeper = subprocess.Popen(["sleep", "60"])
if sys.argv[1] == "filter":
    install_ptrace_filter()
try:
    print(subprocess.run([sys.executable, "-c", sys.argv[2], str(sleeper.pid)],
                         capture_output=True, text=True, check=True).stdout)
finally:
    sleeper.kill()
"""


def _filtered_probe(mode: str) -> dict[str, str]:
    done = subprocess.run(
        [sys.executable, "-c", FILTERED, mode, PROBE], capture_output=True, text=True, timeout=30, check=True
    )
    result: dict[str, str] = json.loads(done.stdout)
    return result


def test_the_filter_denies_ptrace_to_every_later_child() -> None:
    # Without the filter the child may trace its dumpable sibling: the probe does work.
    control = _filtered_probe("none")
    assert control["attach"] == "attached" and control["seccomp"] == "0"
    assert control["process_vm_readv"] == "EFAULT"  # allowed; the address is just not mapped
    # With it, inherited across fork and execve, the same calls fail with EPERM.
    found = _filtered_probe("filter")
    assert found["seccomp"] == "2"
    assert found["attach"] == "EPERM"
    assert found["process_vm_readv"] == "EPERM"


def test_the_filter_refuses_to_install_once_threads_run() -> None:
    code = (
        "import threading, time\n"
        "from airlock.runner._confine import ConfinementError, install_ptrace_filter\n"
        "threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
        "try:\n    install_ptrace_filter()\nexcept ConfinementError as e:\n    print(e)\n"
        "print(open('/proc/self/status').read().count('Seccomp:\\t0'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout == "2 threads already run; the filter must come before any thread\n1\n"


def _run_bpf(program: list[tuple[int, int, int, int]], arch: int, nr: int, *args: int) -> int:
    """Evaluate a classic-BPF seccomp program on ``seccomp_data`` {nr, arch, args}."""
    data = {0: nr, 4: arch} | {16 + 8 * i: a & 0xFFFFFFFF for i, a in enumerate(args)}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == _confine.BPF_LD_W_ABS:
            acc = data.get(k, 0)
        elif code == _confine.BPF_JEQ_K:
            pc += jt if acc == k else jf
        elif code == _confine.BPF_JGE_K:
            pc += jt if acc >= k else jf
        elif code == _confine.BPF_JSET_K:
            pc += jt if acc & k else jf
        elif code == _confine.BPF_AND_K:
            acc &= k
        elif code == _confine.BPF_RET_K:
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", sorted(ARCHES))
def test_the_bpf_program_per_architecture(machine: str) -> None:
    program = filter_program(machine)
    arch = ARCHES[machine]
    eperm = _confine.SECCOMP_RET_ERRNO | 1
    for nr in arch.denied:
        assert _run_bpf(program, arch.audit_arch, nr) == eperm
    for nr in (0, 1, 39, 56, 59, 62, 100, 102, 116, 118, 269, 272, 309, 312, 437, 439):
        assert _run_bpf(program, arch.audit_arch, nr) == _confine.SECCOMP_RET_ALLOW
    other = next(a.audit_arch for m, a in ARCHES.items() if m != machine)
    assert _run_bpf(program, other, arch.denied[0]) == _confine.SECCOMP_RET_KILL_PROCESS
    assert _run_bpf(program, 0x40000003, 26) == _confine.SECCOMP_RET_KILL_PROCESS  # i386: ptrace is 26
    if arch.foreign_nr_from is not None:  # x32: ptrace is 0x40000000 + 521
        assert _run_bpf(program, arch.audit_arch, 0x40000000 + 521) == _confine.SECCOMP_RET_KILL_PROCESS
    # No new namespaces: unshare/clone with a namespace flag, setns; clone3 falls back to clone.
    for nr in arch.namespace_flagged:
        for flag in (0x10000000, 0x00020000, 0x40000000, 0x20000000, 0x80, 0x01200011 | 0x10000000):
            assert _run_bpf(program, arch.audit_arch, nr, flag) == eperm
        for flags in (0, 0x01200011, 0x00010000 | 0x00000100 | 0x00000800):  # fork, threads
            assert _run_bpf(program, arch.audit_arch, nr, flags) == _confine.SECCOMP_RET_ALLOW
    assert _run_bpf(program, arch.audit_arch, 435) == _confine.SECCOMP_RET_ERRNO | 38
    # No device nodes; FIFOs, sockets and regular files stay possible.
    for nr, i in arch.mknod:
        for mode, verdict in (
            (0o020600, eperm),
            (0o060600, eperm),
            (0o010600, _confine.SECCOMP_RET_ALLOW),
            (0o140600, _confine.SECCOMP_RET_ALLOW),
            (0o100600, _confine.SECCOMP_RET_ALLOW),
        ):
            args = [0, 0, 0]
            args[i] = mode
            assert _run_bpf(program, arch.audit_arch, nr, *args) == verdict, (nr, oct(mode))


def test_the_filter_refuses_new_namespaces_but_not_processes_or_threads() -> None:
    code = (
        "import ctypes, os, subprocess, sys, threading\n"
        "from airlock.runner._confine import install_ptrace_filter\n"
        "install_ptrace_filter()\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.unshare(0x10000000), ctypes.get_errno())\n"
        "t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "child = subprocess.run([sys.executable, '-c', 'print(1 + 1)'], capture_output=True, text=True)\n"
        "print(child.stdout)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.split() == ["-1", "1", "thread", "2"]


def test_unknown_architecture_is_refused() -> None:
    with pytest.raises(ConfinementError, match="no seccomp filter for architecture 'mips'"):
        filter_program("mips")


def test_the_runner_refuses_to_start_unconfined_before_reading_the_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken() -> None:
        raise ConfinementError("PR_SET_SECCOMP failed: Invalid argument (errno 22)")

    monkeypatch.setattr(_confine, "confine", broken)
    monkeypatch.setenv(runner_main.TOKEN_ENV, "a-token-long-enough-to-pass")
    with pytest.raises(SystemExit) as e:
        runner_main.main([])
    assert e.value.code == 2
    assert (
        "cannot protect the runner from its tool processes: PR_SET_SECCOMP failed" in capsys.readouterr().out
    )
    assert os.environ[runner_main.TOKEN_ENV] == "a-token-long-enough-to-pass"  # never read
