"""Helpers shared by the benchmarks: percentiles, the docker-py floor, container memory,
thread batches, label sweeps and the machine's description.

Only the standard library here (a docker-py client is passed in): the peers' worker
(``bench/_peers.py``) imports this module in a virtualenv without airlock.
"""

from __future__ import annotations

import os
import platform
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Label on every container a benchmark starts itself (airlock's own carry ``airlock.owner``).
BENCH_LABEL = "airlock.bench"


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# -- the docker-py floor ------------------------------------------------------------------


def floor_start(
    client: Any, image: str, runtime: str = "runc", labels: dict[str, str] | None = None
) -> tuple[Any, float]:
    """docker-py create + start + ``exec_run(["true"])`` (network none, init): the least any
    Docker sandbox costs before its first command. Returns (container, seconds)."""
    t0 = time.perf_counter()
    c = client.containers.create(
        image,
        entrypoint=["sleep", "600"],
        detach=True,
        init=True,
        network_mode="none",
        labels=labels or {BENCH_LABEL: "floor"},
        runtime=runtime,
    )
    try:
        c.start()
        result = c.exec_run(["true"])
    except BaseException:
        c.remove(force=True)
        raise
    elapsed = time.perf_counter() - t0
    if result.exit_code != 0:
        c.remove(force=True)
        raise RuntimeError(f"floor: `true` exited {result.exit_code}")
    return c, elapsed


def floor_remove(container: Any) -> float:
    """Force-remove ``container``; seconds it took."""
    t0 = time.perf_counter()
    container.remove(force=True)
    return time.perf_counter() - t0


def floor_once(
    client: Any, image: str, runtime: str = "runc", labels: dict[str, str] | None = None
) -> tuple[float, float]:
    """One floor sandbox: (create+start+exec seconds, teardown seconds)."""
    container, ready = floor_start(client, image, runtime, labels)
    return ready, floor_remove(container)


def exec_round_trips(container: Any, runs: int, warmup: int = 2) -> list[float]:
    """Seconds of each of ``runs`` ``exec_run(["true"])`` calls, after ``warmup`` untimed."""
    times: list[float] = []
    for i in range(warmup + runs):
        t0 = time.perf_counter()
        result = container.exec_run(["true"])
        if i >= warmup:
            times.append(time.perf_counter() - t0)
        if result.exit_code != 0:
            raise RuntimeError(f"exec: `true` exited {result.exit_code}")
    return times


def docker_run_true(image: str, label: str) -> float:
    """``docker run --rm IMAGE true`` through the CLI (default network); seconds."""
    command = ["docker", "run", "--rm", "--label", label, "--entrypoint", "true", image]
    t0 = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - t0


def pooled_client(threads: int) -> Any:
    """A docker-py client for ``threads`` threads at once. docker-py keeps one connection pool
    per URL (per container) and closes the least recently used beyond ``num_pools`` (25) even
    while a request uses it, which fails that request once more containers than that are
    handled at once."""
    import docker

    return docker.DockerClient(timeout=120, num_pools=max(25, 2 * threads), **docker.utils.kwargs_from_env())


# -- batches on threads -------------------------------------------------------------------


@dataclass
class Batch:
    """``n`` runs started at once: wall time, each run's seconds, what failed."""

    n: int
    wall_s: float
    latencies_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    mem_mib: list[float] = field(default_factory=list)


def thread_batch(n: int, one: Callable[[], None]) -> Batch:
    """Run ``one`` ``n`` times at once, each on its own thread."""
    t0 = time.perf_counter()

    def timed() -> float:
        one()
        return time.perf_counter() - t0

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="bench") as pool:
        futures = [pool.submit(timed) for _ in range(n)]
    batch = Batch(n, time.perf_counter() - t0)
    for f in futures:
        error = f.exception()
        if error is None:
            batch.latencies_s.append(f.result())
        else:
            batch.errors.append(f"{type(error).__name__}: {error}")
    return batch


# -- container memory ---------------------------------------------------------------------


def _cgroup_dirs(container_id: str) -> list[Path]:
    """Where the engine may keep the container's memory cgroup (v1 cgroupfs, v2 both drivers)."""
    root = Path("/sys/fs/cgroup")
    return [
        root / "memory" / "docker" / container_id,
        root / "system.slice" / f"docker-{container_id}.scope",
        root / "docker" / container_id,
    ]


def _stat_value(text: str, *names: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in names:
            return int(value)
    return 0


def _status_kib(status: str, name: str) -> int:
    """A ``/proc/PID/status`` field in KiB (0 when absent)."""
    for line in status.splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def container_memory_mib(container_id: str) -> float | None:
    """The container's cgroup memory less its inactive file cache (as ``docker stats``)."""
    for d in _cgroup_dirs(container_id):
        try:
            if (d / "memory.usage_in_bytes").exists():
                usage = int((d / "memory.usage_in_bytes").read_text())
                cache = _stat_value((d / "memory.stat").read_text(), "total_inactive_file")
            else:
                usage = int((d / "memory.current").read_text())
                cache = _stat_value((d / "memory.stat").read_text(), "inactive_file")
        except (FileNotFoundError, ValueError, ProcessLookupError):
            continue
        return (usage - cache) / 2**20
    return None


def container_rss_mib(container_id: str) -> float | None:
    """The summed RSS of the container's processes (None: cgroup not found or not readable)."""
    for d in _cgroup_dirs(container_id):
        try:
            pids = (d / "cgroup.procs").read_text().split()
        except (FileNotFoundError, PermissionError):
            continue
        total = 0
        for pid in pids:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
            total += _status_kib(status, "VmRSS")
        return total / 1024
    return None


class MemorySampler:
    """Peak memory of each container carrying ``label``, sampled on a thread while in use."""

    def __init__(self, client: Any, label: str, interval: float = 0.2) -> None:
        self.client = client
        self.label = label
        self.interval = interval
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-memory", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                ids = [c["Id"] for c in self.client.api.containers(filters={"label": self.label})]
            except Exception:  # the engine busy or restarting: skip this sample
                continue
            for cid in ids:
                mib = container_memory_mib(cid)
                if mib is not None:
                    self.peaks[cid] = max(mib, self.peaks.get(cid, 0.0))

    def per_container(self) -> list[float]:
        """Each sampled container's peak, MiB."""
        return list(self.peaks.values())


# -- clean-up and context -----------------------------------------------------------------


def remove_labelled(client: Any, label: str) -> int:
    """Force-remove every container carrying ``label`` (``key=value``); how many."""
    found = client.containers.list(all=True, filters={"label": label})
    for c in found:
        try:
            c.remove(force=True)
        except Exception as e:  # already gone (--rm) is fine; anything else is reported
            if "No such container" not in str(e) and "already in progress" not in str(e):
                raise
    return len(found)


def machine(client: Any) -> dict[str, Any]:
    """Cores, memory, kernel, CPU and the Docker engine this run measured on."""
    info = client.info()
    version = client.version()
    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "cpu": _cpu_model(),
        "memory_gib": round(_meminfo_kib("MemTotal") / 2**20, 1),
        "kernel": platform.release(),
        "docker": version.get("Version"),
        "runtime": info.get("DefaultRuntime"),
        "runtimes": sorted(info.get("Runtimes") or {}),
        "cgroup": f"v{info.get('CgroupVersion')} ({info.get('CgroupDriver')})",
        "storage_driver": info.get("Driver"),
        "python": platform.python_version(),
        "load_average": loadavg(),
    }


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def _meminfo_kib(name: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0
