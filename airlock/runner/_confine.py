"""Self-confinement of the runner process, applied once at start, before any thread exists.

Tool processes run as the runner's own uid (a different uid is impossible under
``cap_drop ALL`` + no-new-privileges), so the runner protects itself from them:

- **Non-dumpable** (``PR_SET_DUMPABLE 0``): a process without ``CAP_SYS_PTRACE`` can no
  longer ptrace the runner nor open its ``/proc/<pid>/{mem,environ,fd,...}``, although it
  has the same uid. The token the runner keeps in memory stays out of reach.
- **A seccomp filter** that makes ``ptrace``, ``process_vm_readv``, ``process_vm_writev``
  and ``pidfd_getfd`` fail with EPERM. A filter is inherited by every child and survives
  ``execve``, so every tool process carries it: a second layer in case the first one is
  lost (e.g. a later credential change resets the dumpable flag). Installing a filter
  without ``CAP_SYS_ADMIN`` needs ``PR_SET_NO_NEW_PRIVS``, which is set first (Docker
  sandboxes already run with no-new-privileges).
- **No new namespaces**, whatever the runtime: ``setns`` fails with EPERM, and so do
  ``unshare`` and ``clone`` when their flags ask for a namespace; ``clone3``, whose flags
  sit in a struct the filter cannot read, fails with ENOSYS so that libc falls back to
  ``clone`` (as Docker's own profile does). Under runc Docker's profile already refuses
  these without capabilities; gVisor lets an unprivileged process create a user namespace
  (and so gain every capability inside it, then mount, chroot, …, all inside gVisor's own
  kernel). Refusing it in the runner keeps both runtimes to one meaning.
- **No device nodes**: ``mknod``/``mknodat`` of a character or block device fails with
  EPERM (FIFOs and sockets stay allowed). runc refuses it without ``CAP_MKNOD``; gVisor
  lets any process create one in its own tmpfs.

The filter is classic BPF over ``struct seccomp_data`` (``nr`` at offset 0, ``arch`` at
offset 4). A system call of any other architecture (i386 ``int 0x80`` on x86_64, arm32 on
aarch64) or of the x32 ABI kills the process: its syscall numbers would differ and slip past.
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

__all__ = ["ConfinementError", "confine", "install_ptrace_filter", "set_non_dumpable"]

PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1

# Classic BPF opcodes (linux/filter.h).
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = *(u32 *)(data + k)
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K: pc += (A == k) ? jt : jf
BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K: pc += (A >= k) ? jt : jf
BPF_RET_K = 0x06  # BPF_RET | BPF_K: return k
BPF_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K: pc += (A & k) ? jt : jf
BPF_AND_K = 0x54  # BPF_ALU | BPF_AND | BPF_K: A &= k

SECCOMP_DATA_NR = 0
SECCOMP_DATA_ARCH = 4
#: The low 32 bits of argument i (little-endian) are at 16 + 8 * i: clone's and unshare's
#: flags are argument 0, mknod's mode argument 1, mknodat's argument 2.
SECCOMP_DATA_ARG0 = 16
S_IFMT, S_IFCHR, S_IFBLK = 0o170000, 0o020000, 0o060000
ENOSYS = 38
#: CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
#: | CLONE_NEWNET | CLONE_NEWTIME.
NAMESPACE_FLAGS = (
    0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
)
X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True)
class _Arch:
    audit_arch: int
    #: Syscall numbers denied with EPERM: ptrace, process_vm_readv, process_vm_writev,
    #: pidfd_getfd, setns.
    denied: tuple[int, ...]
    #: Numbers at or above this belong to another ABI on the same audit arch (x32), or None.
    foreign_nr_from: int | None
    #: unshare and clone: EPERM when their first argument holds a namespace flag.
    namespace_flagged: tuple[int, ...] = ()
    #: clone3: ENOSYS (libc then uses clone).
    enosys: tuple[int, ...] = ()
    #: (mknod-like syscall, index of its mode argument): EPERM for a device node.
    mknod: tuple[tuple[int, int], ...] = ()


#: From asm/unistd_64.h (x86_64) and asm-generic/unistd.h (aarch64).
ARCHES: dict[str, _Arch] = {
    "x86_64": _Arch(
        0xC000003E, (101, 310, 311, 438, 308), X32_SYSCALL_BIT, (272, 56), (435,), ((133, 1), (259, 2))
    ),
    "aarch64": _Arch(0xC00000B7, (117, 270, 271, 438, 268), None, (97, 220), (435,), ((33, 2),)),
}


class ConfinementError(Exception):
    """The runner cannot confine itself (unknown architecture, no seccomp, threads running)."""


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.prctl.restype = ctypes.c_int
    return libc


def _prctl(option: int, arg2: int, arg3: int = 0, what: str = "prctl") -> int:
    result = int(_libc().prctl(option, arg2, arg3, 0, 0))
    if result < 0:
        err = ctypes.get_errno()
        raise ConfinementError(f"{what} failed: {os.strerror(err)} (errno {err})")
    return result


def filter_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The BPF program for ``machine`` (``platform.machine()``) as (code, jt, jf, k) tuples.

    Raises:
        ConfinementError: an architecture this module has no syscall numbers for.
    """
    arch = ARCHES.get(machine)
    if arch is None:
        raise ConfinementError(f"no seccomp filter for architecture {machine!r} (known: {', '.join(ARCHES)})")
    prog = _Program()
    prog.emit(BPF_LD_W_ABS, SECCOMP_DATA_ARCH)
    prog.emit(BPF_JEQ_K, arch.audit_arch, jf="kill")
    prog.emit(BPF_LD_W_ABS, SECCOMP_DATA_NR)
    if arch.foreign_nr_from is not None:
        prog.emit(BPF_JGE_K, arch.foreign_nr_from, jt="kill")
    for nr in arch.denied:
        prog.emit(BPF_JEQ_K, nr, jt="eperm")
    for nr in arch.enosys:
        prog.emit(BPF_JEQ_K, nr, jt="enosys")
    for nr in arch.namespace_flagged:
        prog.emit(BPF_JEQ_K, nr, jt="flags")
    modes = sorted({i for _, i in arch.mknod})
    for nr, i in arch.mknod:
        prog.emit(BPF_JEQ_K, nr, jt=f"mode{i}")
    prog.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    prog.label("flags")
    prog.emit(BPF_LD_W_ABS, SECCOMP_DATA_ARG0)
    prog.emit(BPF_JSET_K, NAMESPACE_FLAGS, jt="eperm")
    prog.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    for i in modes:
        prog.label(f"mode{i}")
        prog.emit(BPF_LD_W_ABS, SECCOMP_DATA_ARG0 + 8 * i)
        prog.emit(BPF_AND_K, S_IFMT)
        prog.emit(BPF_JEQ_K, S_IFCHR, jt="eperm")
        prog.emit(BPF_JEQ_K, S_IFBLK, jt="eperm")
        prog.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
    prog.label("eperm")
    prog.emit(BPF_RET_K, SECCOMP_RET_ERRNO | EPERM)
    prog.label("enosys")
    prog.emit(BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS)
    prog.label("kill")
    prog.emit(BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    return prog.assemble()


class _Program:
    """Classic BPF with named jump targets, resolved to forward offsets by :meth:`assemble`."""

    def __init__(self) -> None:
        self._code: list[tuple[int, int | str, int | str, int]] = []
        self._labels: dict[str, int] = {}

    def emit(self, code: int, k: int, *, jt: int | str = 0, jf: int | str = 0) -> None:
        self._code.append((code, jt, jf, k))

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def assemble(self) -> list[tuple[int, int, int, int]]:
        def offset(at: int, target: int | str) -> int:
            if isinstance(target, int):
                return target
            jump = self._labels[target] - (at + 1)
            assert 0 <= jump <= 255, f"jump to {target} out of range"
            return jump

        return [(code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(self._code)]


def _threads() -> int | None:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def set_non_dumpable() -> None:
    """``PR_SET_DUMPABLE 0``: no ptrace and no ``/proc/<pid>/mem`` for same-uid processes.

    Raises:
        ConfinementError: the prctl failed or did not stick.
    """
    _prctl(PR_SET_DUMPABLE, 0, what="PR_SET_DUMPABLE")
    if _prctl(PR_GET_DUMPABLE, 0, what="PR_GET_DUMPABLE") != 0:
        raise ConfinementError("PR_SET_DUMPABLE 0 did not stick")


def install_ptrace_filter(machine: str | None = None) -> None:
    """Set no-new-privileges and install the seccomp filter on the calling thread.

    Call it before any other thread starts: a filter installed with prctl applies to the
    calling thread and the threads and processes it creates afterwards.

    Raises:
        ConfinementError: more than one thread, an unknown architecture, or a kernel that
            refuses (no seccomp filter support).
    """
    threads = _threads()
    if threads is not None and threads > 1:
        raise ConfinementError(f"{threads} threads already run; the filter must come before any thread")
    instructions = filter_program(machine or platform.machine())
    array = (_SockFilter * len(instructions))(*(_SockFilter(*ins) for ins in instructions))
    prog = _SockFprog(len(instructions), ctypes.cast(array, ctypes.POINTER(_SockFilter)))
    _prctl(PR_SET_NO_NEW_PRIVS, 1, what="PR_SET_NO_NEW_PRIVS")
    _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), what="PR_SET_SECCOMP")


def confine() -> None:
    """Make this process non-dumpable and deny ptrace-like system calls to it and its children.

    Raises:
        ConfinementError: either protection cannot be applied; the runner must not start.
    """
    set_non_dumpable()
    install_ptrace_filter()
