"""Controller replicas as real processes (``airlock serve --store postgresql://…``) sharing one
PostgreSQL database and one data directory (its token and audit key), for the failover tests
and ``bench/replicas.py`` (which also starts one on SQLite)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from airlock.jobs import ControllerClient

#: How ``airlock serve`` is started (the installed entry point of this venv).
AIRLOCK = [sys.executable, "-m", "airlock.cli"]


class ReplicaProcess:
    """One ``airlock serve`` replica: its process, address, replica id and a client factory."""

    def __init__(
        self,
        config: Path,
        data_dir: Path,
        dsn: str | None,
        *extra: str,
        lease_s: float = 3.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start one (``extra``: more ``serve`` options; ``env``: more environment variables)."""
        self.log = data_dir.parent / f"replica-{time.monotonic_ns()}.log"
        command = [*AIRLOCK, "serve", "-c", str(config), "--data-dir", str(data_dir), "--json"]
        command += ["--address", "127.0.0.1:0", "--lease", str(lease_s), *extra]
        environ = {k: v for k, v in os.environ.items() if k != "AIRLOCK_STORE"}  # None: SQLite in data_dir
        environ.update(env or {})
        if dsn is not None:
            environ["AIRLOCK_STORE"] = dsn
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, env=environ)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(10)
            raise AssertionError(f"replica did not start: {self.log.read_text()}")
        started: dict[str, Any] = json.loads(line)
        self.address: str = started["address"]
        self.replica: str = started["replica"]
        self.token = (data_dir / "token").read_text().strip()

    def client(self) -> ControllerClient:
        """A client of this replica (the shared bootstrap token)."""
        return ControllerClient(self.address, self.token)

    def kill(self) -> None:
        """kill -9: no clean-up of any kind."""
        self.proc.kill()
        self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP (its lease then runs out)."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def cont(self) -> None:
        """SIGCONT."""
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM, as a rolling update sends, and wait for it to exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def sandbox_processes(job_ids: set[str]) -> list[int]:
    """Pids of processes running a sandbox of one of ``job_ids`` (the process backend marks each
    runner, and the tools it starts, with ``AIRLOCK_SANDBOX_JOB=<job>``)."""
    wanted = {f"AIRLOCK_SANDBOX_JOB={job}".encode() for job in job_ids}
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if wanted & set((entry / "environ").read_bytes().split(b"\0")):
                found.append(int(entry.name))
    return found


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return 0


def runs_on(job_id: str, candidates: list[ReplicaProcess]) -> ReplicaProcess | None:
    """The replica whose process runs ``job_id``'s sandbox now (its runner is that process's
    descendant), if any."""
    for pid in sandbox_processes({job_id}):
        with contextlib.suppress(OSError):
            ancestor = pid
            while ancestor > 1:
                for replica in candidates:
                    if replica.proc.pid == ancestor:
                        return replica
                ancestor = _parent(ancestor)
    return None


@contextlib.contextmanager
def replicas() -> Iterator[list[ReplicaProcess]]:
    """A list the test starts replicas into; each is stopped (or killed) at the end."""
    started: list[ReplicaProcess] = []
    try:
        yield started
    finally:
        for replica in started:
            with contextlib.suppress(OSError):
                replica.cont()
            replica.stop()
