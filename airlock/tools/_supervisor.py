"""Per-call supervisor of a ``bash`` tool command: nothing the command starts outlives it.

Run as ``python -I -S _supervisor.py STATUS_FD COMMAND`` (stdlib only, so it starts fast).
It becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): every process of the command's
tree that loses its parent, including ones that called ``setsid`` or double-forked, is
re-parented to the supervisor instead of init. It starts ``bash -c COMMAND`` in a new
session, reaps children until bash ends, then SIGKILLs all of its children and reaps
them, again and again, until it has none left. SIGTERM (the caller's timeout or
cancellation, or the death of the runner that started it) ends the wait early and kills
the tree the same way.

Last, it writes one status line to ``STATUS_FD`` and exits 0:

- ``exit N``: bash ended with code N (negative: killed by signal -N);
- ``stopped``: SIGTERM arrived before bash ended;
- ``error MESSAGE``: the supervisor could not start bash or become a subreaper.

No line at all means the supervisor itself was killed (the command can do that: same uid);
the caller then has to kill what is left (its own subreaper role covers that).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as typing's, without importing typing (start-up time)
if TYPE_CHECKING:
    import signal
else:  # the C module: ``signal`` imports enum, a third of the start-up time
    import _signal as signal

PR_SET_PDEATHSIG = 1
EINVAL = 22
PR_SET_CHILD_SUBREAPER = 36


def children_of(pid: int) -> list[int]:
    """Pids of the processes whose parent is ``pid`` (a /proc scan; zombies included)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            children.append(int(entry))
    return children


def set_child_subreaper() -> None:
    """``prctl(PR_SET_CHILD_SUBREAPER, 1)`` on this process.

    Raises:
        OSError: the kernel refused.
    """
    _prctl(PR_SET_CHILD_SUBREAPER, 1, "PR_SET_CHILD_SUBREAPER")


def become_subreaper() -> None:
    """:func:`set_child_subreaper`, or rely on the runner being init.

    gVisor (release 20221219) grants ``PR_SET_CHILD_SUBREAPER`` only to PID 1 and refuses
    it to anyone else with EINVAL. Under gVisor the runner *is* PID 1 (the Docker backend
    starts it without an init), and it adopts and sweeps every orphan after each call
    (``airlock.tools.adopt_orphans``), so a process that leaves this supervisor's tree is
    still killed when the call ends. Any other refusal, or EINVAL under another parent,
    stays an error.

    Raises:
        OSError: the kernel refused and the parent is not init.
    """
    try:
        set_child_subreaper()
    except OSError as e:
        if e.errno != EINVAL or os.getppid() != 1:
            raise


#: Tasks kept out of a tool's reach for the runner's own threads when the sandbox caps
#: processes per uid (``RLIMIT_NPROC``, as the Docker backend does under gVisor).
RUNNER_RESERVE = 32


def leave_room_for_the_runner() -> None:
    """Lower ``RLIMIT_NPROC`` by :data:`RUNNER_RESERVE` for the command's whole tree.

    ``RLIMIT_NPROC`` counts every task of the uid, and the runner shares the tools' uid: a
    fork bomb that reached the sandbox's limit would leave the runner unable to start a
    thread (its gRPC server then drops the call). With a lower limit for the tools the
    runner keeps its headroom. No limit (runc, where the pids cgroup caps the sandbox and
    ``RLIMIT_NPROC`` would count the uid host-wide): nothing changes.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if hard == resource.RLIM_INFINITY:
        return
    cap = max(1, hard - min(RUNNER_RESERVE, hard // 4))
    resource.setrlimit(resource.RLIMIT_NPROC, (min(soft, cap), cap))


def stop_with_parent() -> None:
    """SIGTERM to this process when its parent (the runner) dies (``PR_SET_PDEATHSIG``): a
    runner killed outright (the process backend SIGKILLs a timed-out runner's group) still
    leaves no tree behind, because SIGTERM makes the supervisor kill it.

    Raises:
        OSError: the kernel refused.
    """
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM, "PR_SET_PDEATHSIG")
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os.kill(os.getpid(), signal.SIGTERM)


def _prctl(option: int, value: int, name: str) -> None:
    import ctypes  # only here: the import costs a few milliseconds

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def kill_children() -> None:
    """SIGKILL and reap every child of this process until there are none (orphans of the
    killed ones are re-parented here meanwhile and caught by the next round)."""
    me = os.getpid()
    while children := children_of(me):
        for pid in children:
            try:  # noqa: SIM105 - contextlib costs milliseconds of start-up
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:  # noqa: SIM105
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _wait_for(bash: int) -> str:
    """Reap children as they end until ``bash`` does (its status line) or SIGTERM comes.

    SIGCHLD and SIGTERM are blocked and taken with ``sigwaitinfo``: no handler can fire in
    the middle of the cleanup.
    """
    while True:
        if signal.sigwaitinfo({signal.SIGCHLD, signal.SIGTERM}).si_signo == signal.SIGTERM:
            return "stopped"
        while True:  # one SIGCHLD may stand for several ended children
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return "error bash vanished"
            if pid == 0:
                break
            if pid == bash:
                return f"exit {os.waitstatus_to_exitcode(status)}"


def supervise(command: str) -> str:
    """Run ``bash -c command`` and kill its whole tree afterwards; the status line."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD, signal.SIGTERM})
    bash: int | None = None
    try:
        become_subreaper()
        leave_room_for_the_runner()
        stop_with_parent()
        bash = os.posix_spawn(
            "/bin/bash",
            ["bash", "-c", command],
            os.environ,
            setsid=True,
            setsigmask=(),
            # Python ignores these; the command gets the defaults, as from any shell.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError as e:
        return f"error {e.strerror or e}"
    try:
        return _wait_for(bash)
    finally:
        # The common case in one call: the command's own process group.
        try:  # noqa: SIM105
            os.killpg(bash, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_children()


def main(argv: list[str]) -> None:
    """``_supervisor.py STATUS_FD COMMAND``; see the module docstring."""
    status_fd, command = int(argv[1]), argv[2]
    os.set_inheritable(status_fd, False)  # bash and its children never see it
    line = supervise(command)
    os.write(status_fd, line.encode("utf-8", "replace") + b"\n")
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
