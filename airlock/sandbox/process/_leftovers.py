"""Finding and stopping the runner processes of a job (the process backend's ``ensure_gone``).

Each runner the backend starts for a job carries ``AIRLOCK_SANDBOX_JOB=<job>`` in its
environment (a job id, not a secret), which its tool processes inherit.
:func:`stop_job_runners` finds this user's processes carrying it (``/proc/<pid>/environ``),
sends each SIGTERM (a runner cancels its turns, which kills their tool trees, and exits; a
tool is stopped directly) and waits for them to be gone. A runner whose controller
died stops by itself (``--exit-with-parent``): this is the confirmation before a resume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from layer0 import EnvError

__all__ = ["JOB_MARKER", "SESSION_MARKER", "job_runners", "stop_job_runners"]

#: The environment variable naming a runner's job.
JOB_MARKER = "AIRLOCK_SANDBOX_JOB"
#: The environment variable naming the long-lived sandbox a runner serves (it carries no job).
SESSION_MARKER = "AIRLOCK_SANDBOX_SESSION"
#: Seconds a runner gets to cancel its turn and exit (its own grace is 10 s).
WAIT_S = 15.0
_PROC = Path("/proc")


def job_runners(job: str) -> list[int]:
    """The pids of this user's processes whose environment names ``job`` (none without /proc)."""
    wanted = f"{JOB_MARKER}={job}".encode()
    found = []
    for entry in _PROC.glob("[0-9]*") if _PROC.is_dir() else ():
        with contextlib.suppress(OSError):  # gone meanwhile, or another user's
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return [pid for pid in found if pid != os.getpid()]


def stop_job_runners(job: str) -> None:
    """SIGTERM each runner of ``job`` and wait until none is left.

    Raises:
        EnvError: ``provision_failed`` when one is still there after :data:`WAIT_S`.
    """
    pids = job_runners(job)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + WAIT_S
    while (left := job_runners(job)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if left:
        raise EnvError.provision_failed(
            f"the runner processes of job {job} ({', '.join(map(str, left))}) did not stop within "
            f"{WAIT_S:.0f} s: the job does not resume while they may still run its tools"
        )
